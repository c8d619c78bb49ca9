"""Adapters for SGLang 0.5.23's DeepSeek-V4-style mHC code paths, from the released wheel.
TARGETS ``sglang:mhc``, ``sglang:mhc-triton`` and ``sglang:mhc-triton-split``.

**What runs.**

* ``sglang:mhc``: the engine's residual layer class ``MHCState``
  (``sglang/srt/layers/layer_boundary/residual/mhc.py``), the hyper-connection residual of its
  mHC models, with the callables its models bind (``glm5_next.py``'s ``_hc_pre`` /
  ``hc_post``): ``hc_pre`` / ``hc_post`` of ``sglang/kernels/ops/layernorm/mhc.py`` with the
  config's ``hc_eps``, ``rms_norm_eps``, ``hc_sinkhorn_iters`` and the post multiplier 2. One
  step is ``read_attn_input`` (``hc_pre``: mixes, Sinkhorn, collapse), the branch, then
  ``apply_post`` (``hc_post``). Those dispatch to the TileLang kernels by default
  (``SGLANG_OPT_USE_TILELANG_MHC_PRE`` / ``_POST``, both on) and to the file's own torch
  functions (``_mhc_pre_torch``, ``_mhc_post_torch``) with the switches off, which is what a
  machine without TileLang runs: the factory turns the two switches off (the engine's own
  environment variables, read at each call; :data:`TORCH_SWITCHES`). ``pre`` for ``weights``
  is the tensor ``_mhc_pre_torch`` collapses with (read with
  :class:`~hcspec.conformance.adapters._capture.CallRecorder`).
* ``sglang:mhc-triton``: the DeepSeek-V4 decoder layer's path on Hopper and Blackwell
  (``srt/models/deepseek_v4_mhc.py``, ``_mix_stats_impl``): ``hc_mix_stats_sinkhorn`` (the
  split-K projection ``_hc_mix_stats_partial_kernel`` and the fused reduce + Sinkhorn
  ``_hc_mix_reduce_sinkhorn_kernel``, Triton), the collapse ``mhc_combine``
  (``_mhc_combine_kernel``, Triton), then the layer's torch post (``hc_post``'s
  ``_mhc_post_torch``, the same sum as ``deepseek_v4_mhc.post``'s ``post_torch_impl``).
* ``sglang:mhc-triton-split``: the unfused route: the layer's torch projection
  (``_mix_stats_impl`` off CUDA: ``F.linear(x, fn)·rsqrt(mean(x²) + eps)``, two lines the
  adapter writes out), then the Triton port of the Sinkhorn ``_hc_split_sinkhorn_triton``
  (``_hc_split_sinkhorn_triton_kernel``, the gfx1250 route), ``mhc_combine``, the torch post.
  It runs the kit's canonical case (``n·d = 32``), which the fused route refuses.

The Triton targets need ``TRITON_INTERPRET=1`` before the import on a CPU
(:mod:`._triton`); the projection's split-K kernel needs ``n·d`` a multiple of its 64-wide
block (an assertion) and the fused Sinkhorn kernel ``n`` a power of two (``tl.arange(0,
HC)``): the factory refuses other sizes (the kit leaves those cases out).

All targets: bfloat16 state (the model's), float32 parameters, mixes and coefficients; the
branch input and ``X'`` bfloat16. ``H_res = combᵀ`` (``hc_post``: ``X'_j = post_j x + Σ_i
comb[i, j] X_i``). The TileLang kernels (``mhc_pre``, ``mhc_post``,
``mhc_fused_post_pre``, ``hc_split_sinkhorn_kernel``) and the AITER and DeepGEMM routes need a
GPU: ``tools/gpu_check.sh``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

import torch

from hcspec.conformance.adapters._capture import (
    CallRecorder,
    PackageChanged,
    check_branch_output,
)
from hcspec.conformance.adapters._engine_mhc import (
    HC_EPS,
    PUBLISHED,
    SINKHORN_ITERS,
    STATE_DTYPE,
    build_parameters,
)
from hcspec.conformance.adapters._triton import TritonMode, kernel_mode
from hcspec.conformance.adapters.deepseek_v4_style import (
    Decomposition,
    LayerStep,
    v4_style_target,
)
from hcspec.conformance.protocol import Conventions, Factory

WRITTEN_FOR: Final = "0.5.23"
"""The SGLang release these adapters were read against."""

TORCH_SWITCHES: Final = {"SGLANG_OPT_USE_TILELANG_MHC_PRE": "0",
                         "SGLANG_OPT_USE_TILELANG_MHC_POST": "0"}
"""SGLang's own switches (``srt/environ.py``) that send ``hc_pre`` / ``hc_post`` to the torch
functions instead of TileLang."""

_LOADED: dict[str, ModuleType] = {}


def _import(name: str) -> ModuleType:
    module = _LOADED.get(name)
    if module is None:
        module = _LOADED[name] = importlib.import_module(name)
    return module


def kernels() -> ModuleType:
    """``sglang.kernels.ops.layernorm.mhc`` from the installed wheel (imported once).

    Raises:
        ImportError: SGLang, Triton or what the module imports is not installed.
    """
    return _import("sglang.kernels.ops.layernorm.mhc")


def conventions(path: str, *, triton: bool, head: bool = False) -> Conventions:
    """What an SGLang target declares (DeepSeek-V4's config settings; see the module
    docstring)."""
    return Conventions(
        compute_dtype=torch.float32, output_dtype=STATE_DTYPE,
        weights_dtype=torch.float32 if triton else None,
        reduce="learned" if head else "mean",
        sinkhorn_iterations=SINKHORN_ITERS, sinkhorn_variant="softmax",
        sinkhorn_iterations_count="rounds_from_softmax", sinkhorn_additive_eps=HC_EPS,
        sinkhorn_denominator_eps=HC_EPS, sinkhorn_exact_axis="rows", h_pre_eps=HC_EPS,
        contiguous_input=True, published="deepseek-v4",
        notes=(f"SGLang {WRITTEN_FOR} wheel, {path}: state cast to bfloat16, mixes and "
               "coefficients float32; pre = σ + 1e-6, post = 2σ, comb = softmax(-1) + 1e-6, a "
               "column normalisation, then 19 (row, column) rounds with 1e-6 in the "
               "denominators; H_res = combᵀ; reduce: "
               + ("the fused Triton HC head (fused_hc_head)" if head else "the mean (hc_contract)")
               + ("; the factory refuses n·d not a multiple of 64 (the split-K projection "
                  "asserts it) and, for the fused kernel, n not a power of two" if triton
                  else "")))


def _flat(x: torch.Tensor) -> torch.Tensor:
    """``x [B, T, n, d]`` as SGLang's hidden states ``[B·T, n·d]``, bfloat16, contiguous."""
    b, t, n, d = x.shape
    return x.to(STATE_DTYPE).reshape(b * t, n * d).contiguous()


def _hc_pre(module: Any, hidden: torch.Tensor, n: int) -> Any:
    """``hc_pre`` with the arguments SGLang's model binds (``glm5_next._hc_pre``)."""
    return kernels().hc_pre(
        x=hidden, hc_fn=module.fn, hc_scale=module.scale, hc_base=module.base, hc_mult=n,
        rms_eps=module.norm_eps, hc_eps=module.hc_eps, sinkhorn_iters=module.sinkhorn_iters,
        post_mult_value=module.post_mult, hc_norm_weight=None, out_norm_weight=None,
        out_norm_eps=None)


def _switched_to_torch() -> None:
    for key, value in TORCH_SWITCHES.items():
        os.environ[key] = value


# --- sglang:mhc ----------------------------------------------------------------------------------
def decompose_torch(module: Any, x: torch.Tensor) -> Decomposition:
    """``hc_pre`` at ``x [B, T, n, d]``: post, comb (``h_post``, ``h_res``), the branch input,
    and ``pre`` as ``_mhc_pre_torch`` collapses with (its one ``pre.unsqueeze(-1)``).

    Raises:
        PackageChanged: the torch function no longer collapses with one ``[N, n]`` unsqueeze
            before the post's.
    """
    b, t, n, d = x.shape
    hidden = _flat(x)
    with CallRecorder((torch.Tensor.unsqueeze,)) as recorder:
        layer_input, h_res, h_post, _ = _hc_pre(module, hidden, n)
    found = [c.args[0] for c in recorder.of(torch.Tensor.unsqueeze)
             if isinstance(c.args[0], torch.Tensor) and tuple(c.args[0].shape) == (b * t, n)]
    if len(found) != 2:  # pre (the collapse), then post (the return)
        raise PackageChanged(f"SGLang _mhc_pre_torch: expected two [N, n] unsqueezes (pre, "
                             f"post; adapter written for {WRITTEN_FOR}), saw {len(found)}")
    return Decomposition(pre=found[0].reshape(b, t, n), post=h_post.reshape(b, t, n),
                         comb=h_res.reshape(b, t, n, n), collapsed=layer_input.reshape(b, t, d))


def state_class() -> Any:
    """SGLang's ``MHCState``, or None where its module does not import here (it imports the
    engine's whole ``srt.configs`` package, which imports torchvision: the PyPI torchvision
    wheels are built against CUDA torch and do not load with the lane's CPU torch 2.13,
    "operator torchvision::nms does not exist")."""
    try:
        return _import("sglang.srt.layers.layer_boundary.residual.mhc").MHCState
    except Exception:  # any import-time failure of the engine's runtime: the fallback step
        return None


def mhc_state_of(module: Any) -> LayerStep:
    """One step through SGLang's ``MHCState``: ``read_attn_input`` (``hc_pre``), the branch in
    place of the attention (no norm), ``apply_post`` (``hc_post``). Where ``MHCState`` does not
    import (:func:`state_class`), the same two calls without it: ``hc_pre`` then ``hc_post``
    with its ``h_res`` / ``h_post`` (``MHCState.read_attn_input`` and ``apply_post`` are
    those calls and nothing else when no norm is given)."""
    cls = state_class()
    post_fn = kernels().hc_post
    n_of: dict[str, int] = {}

    def attn_pre(hidden: torch.Tensor, out_norm_weight: Any, out_norm_eps: Any) -> Any:
        return _hc_pre(module, hidden, n_of["n"])

    def post(hidden: torch.Tensor, residual: torch.Tensor, h_res: torch.Tensor,
             h_post: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = post_fn(x=hidden, residual=residual, h_post=h_post, h_res=h_res,
                                    hc_mult=n_of["n"])
        return out

    def step(x: torch.Tensor, branch: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        b, t, n, d = x.shape
        n_of["n"] = n
        hidden = _flat(x)
        if cls is not None:
            state = cls(hc_mult=n, hc_attn_pre=attn_pre, hc_ffn_pre=attn_pre, hc_post=post)
            layer_input, residual = state.read_attn_input(hidden, out_norm=None)
        else:
            layer_input, h_res, h_post, _ = attn_pre(hidden, None, None)
            residual = hidden
        collapsed = layer_input.reshape(b, t, d).to(x.dtype)
        z = check_branch_output(branch(collapsed), collapsed).reshape(b * t, d).to(STATE_DTYPE)
        out = state.apply_post(z, residual) if cls is not None else post(z, residual, h_res,
                                                                          h_post)
        return out.reshape(b, t, n, d)
    return step


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0, tilelang: bool = False) -> Any:
    """Factory (kit target form) of ``sglang:mhc`` (turns :data:`TORCH_SWITCHES` on in this
    process's environment) and, with ``tilelang=True``, ``sglang:mhc-tilelang`` (the engine's
    default: ``hc_pre`` / ``hc_post`` on the TileLang kernels; a CUDA device only).

    Raises:
        ImportError: SGLang (or what its modules import) is not installed.
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    if tilelang:
        if torch.device(device).type != "cuda":
            raise ValueError("sglang:mhc-tilelang: TileLang kernels need a CUDA device (run it "
                             "with --device cuda; tools/gpu_check.sh does)")
        for key in TORCH_SWITCHES:
            os.environ[key] = "1"
    else:
        _switched_to_torch()
    kernels()
    factory = v4_style_target(
        build_parameters, decompose_torch, comb="source_target",
        conventions=conventions(
            ("MHCState" if state_class() is not None else
             "hc_pre then hc_post as MHCState calls them (MHCState does not import here: "
             "torchvision)") + " with hc_pre / hc_post on their torch route (_mhc_pre_torch, "
            "_mhc_post_torch)" if not tilelang else "MHCState with hc_pre / hc_post on the "
            "TileLang kernels (mhc_pre, mhc_post)", triton=False),
        compose_dtype="float32", keep_float32=True, published=PUBLISHED,
        decoder_layer=mhc_state_of)
    return factory(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)


# --- sglang:mhc-triton, sglang:mhc-triton-split ---------------------------------------------------
def triton_mode() -> TritonMode:
    """Where SGLang's Triton mHC kernels run in this process (imports them)."""
    return kernel_mode(kernels()._hc_mix_reduce_sinkhorn_kernel)


def coefficients(module: Any, hidden: torch.Tensor, n: int, route: str
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(pre [N, n], post [N, n], comb [N, n, n])`` float32 from the Triton kernels:
    ``route="fused"``: ``hc_mix_stats_sinkhorn``; ``"split"``: the torch projection of
    ``_mix_stats_impl`` off CUDA, then ``_hc_split_sinkhorn_triton``."""
    k = kernels()
    if route == "fused":
        pre, post, comb = k.hc_mix_stats_sinkhorn(
            hidden, module.fn, module.scale, module.base, n, module.sinkhorn_iters,
            module.norm_eps, module.hc_eps)
        return pre, post, comb
    # deepseek_v4_mhc._mix_stats_impl's projection off CUDA (its two torch lines)
    flat = hidden.float()
    rsqrt = torch.rsqrt(flat.square().mean(-1, keepdim=True) + module.norm_eps)
    mixes = (torch.nn.functional.linear(flat, module.fn) * rsqrt).unsqueeze(1)
    pre, post, comb = k._hc_split_sinkhorn_triton(mixes, module.scale, module.base, n,
                                                  module.sinkhorn_iters, module.hc_eps)
    return pre.squeeze(1), post.squeeze(1), comb.squeeze(1)


def split_logits(module: Any, x: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The split route's logits at ``x [B, T, n, d]``: what ``_hc_split_sinkhorn_triton_kernel``
    takes the sigmoids and the softmax of (``mixes·scale + base`` of the torch projection the
    route hands it), ``(pre [B,T,n], post [B,T,n], comb [B,T,n,n])``, comb as the kernel indexes
    it (source, target)."""
    b, t, n, _ = x.shape
    flat = _flat(x).float()
    rsqrt = torch.rsqrt(flat.square().mean(-1, keepdim=True) + module.norm_eps)
    mixes = torch.nn.functional.linear(flat, module.fn) * rsqrt
    pre = mixes[:, :n] * module.scale[0] + module.base[:n]
    post = mixes[:, n:2 * n] * module.scale[1] + module.base[n:2 * n]
    comb = mixes[:, 2 * n:] * module.scale[2] + module.base[2 * n:]
    return pre.reshape(b, t, n), post.reshape(b, t, n), comb.reshape(b, t, n, n)


def _decompose_triton(route: str) -> Callable[[Any, torch.Tensor], Decomposition]:
    def decompose(module: Any, x: torch.Tensor) -> Decomposition:
        b, t, n, d = x.shape
        hidden = _flat(x)
        pre, post, comb = coefficients(module, hidden, n, route)
        collapsed = kernels().mhc_combine(hidden, pre, n, STATE_DTYPE)
        return Decomposition(pre=pre.reshape(b, t, n), post=post.reshape(b, t, n),
                             comb=comb.reshape(b, t, n, n), collapsed=collapsed.reshape(b, t, d))
    return decompose


def _layer_triton(route: str) -> Callable[[Any], LayerStep]:
    def layer_of(module: Any) -> LayerStep:
        def step(x: torch.Tensor, branch: Callable[[torch.Tensor], torch.Tensor]
                 ) -> torch.Tensor:
            b, t, n, d = x.shape
            hidden = _flat(x)
            pre, post, comb = coefficients(module, hidden, n, route)
            layer_input = kernels().mhc_combine(hidden, pre, n, STATE_DTYPE)
            collapsed = layer_input.reshape(b, t, d).to(x.dtype)
            z = check_branch_output(branch(collapsed), collapsed)
            out: torch.Tensor = kernels().hc_post(
                x=z.reshape(b * t, d).to(STATE_DTYPE), residual=hidden, h_post=post,
                h_res=comb.reshape(b * t, n * n), hc_mult=n)
            return out.reshape(b, t, n, d)
        return step
    return layer_of


def head_triton(module: Any, x: torch.Tensor) -> torch.Tensor:
    """SGLang's fused HC head (``kernels/ops/layernorm/mhc_head.py``, ``fused_hc_head``: the
    DeepSeek-V4 LM-head mixer, Triton) at ``x [B, T, n, d]`` -> ``[B, T, d]`` bfloat16, with the
    model's ``hc_head_fn`` / ``hc_head_scale`` / ``hc_head_base`` and ``norm_eps``, ``hc_eps``."""
    b, t, n, d = x.shape
    head = _import("sglang.kernels.ops.layernorm.mhc_head")
    out: torch.Tensor = head.fused_hc_head(
        x.to(STATE_DTYPE).reshape(b * t, n, d).contiguous(), module.head_fn, module.head_scale,
        module.head_base, module.norm_eps, module.hc_eps)
    return out.reshape(b, t, d)


def make_triton(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                device: str = "cpu", seed: int = 0, route: str = "fused",
                head: bool = False) -> Any:
    """Factory (kit target form) of ``sglang:mhc-triton`` (``route="fused"``),
    ``sglang:mhc-triton-split`` (``route="split"``) and ``sglang:mhc-head`` (the split route
    with ``head=True``: ``reduce`` is the fused Triton HC head :func:`head_triton`).

    Raises:
        ImportError: SGLang or Triton is not installed.
        ValueError: the kernels cannot take ``device`` tensors here; ``route`` unknown; bad
            sizes as :func:`make`.
    """
    if route not in ("fused", "split"):
        raise ValueError(f"route: expected 'fused' or 'split', got {route!r}")
    if route == "fused" and (n * d) % 64:
        raise ValueError(f"n·d = {n * d}: SGLang's split-K projection (hc_mix_stats) asserts "
                         "n·d is a multiple of its 64-wide block")
    if route == "fused" and n & (n - 1):
        raise ValueError(f"n = {n}: the fused Sinkhorn kernel (_hc_mix_reduce_sinkhorn_kernel) "
                         "spans the streams with tl.arange(0, HC), which needs a power of two")
    _switched_to_torch()
    triton_mode().require_device(device, "SGLang's Triton mHC kernels")
    what = ("hc_mix_stats_sinkhorn (split-K projection, fused reduce + Sinkhorn)"
            if route == "fused" else "hc_mix_stats + _hc_split_sinkhorn_triton")
    factory: Factory = v4_style_target(
        build_parameters, _decompose_triton(route), comb="source_target",
        conventions=conventions(f"{what}, mhc_combine (Triton), hc_post (torch)", triton=True,
                                head=head),
        compose_dtype="float32", keep_float32=True, published=PUBLISHED,
        reduce=head_triton if head else None, decoder_layer=_layer_triton(route),
        logits=split_logits if route == "split" else None)
    return factory(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)
