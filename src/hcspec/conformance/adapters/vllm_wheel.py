"""Adapters for vLLM's mHC kernels from the released wheel (vLLM 0.33.0,
``vllm/model_executor/kernels/mhc/``). TARGETS ``vllm:mhc-torch`` (the wheel's ``torch.py``;
without the wheel, the file of ``$HC_VLLM_CHECKOUT``: :mod:`.vllm_mhc`), ``vllm:mhc-triton``
(its ``triton.py`` kernels) and ``vllm:mhc-cpu`` (its ``cpu.py``, over the compiled CPU ops).

**Which code, and how it is composed.** vLLM's layer classes
(``model_executor/layers/mhc.py``: ``MHCPreOp``, ``MHCPostOp``, ``HCHeadOp``) are
``CustomOp`` s whose ``forward_native`` / ``forward_cpu`` / ``forward_hip`` call exactly the
kernel functions used here (``mhc_pre_torch``, ``mhc_post_torch``; ``mhc_pre_cpu``,
``mhc_post_cpu``; ``hc_head_triton``), with the arguments the DeepSeek-V4 models pass
(:mod:`._engine_mhc`). Importing that module imports vLLM's serving stack (its
``CustomOp`` reads the engine config: FastAPI, the structured-output backends, ...), which
the lane does not install; so the targets call the kernel functions the ops dispatch to,
imported from the wheel's own package ``vllm.model_executor.kernels.mhc`` (which imports
without the stack). One sublayer step is composed as vLLM's DeepSeek-V4 decoder layer does:
``post, comb, layer_input = mhc_pre(residual)``, ``x = F(layer_input)``,
``residual' = mhc_post(x, residual, post, comb)`` (``X'_j = post_j x + Σ_i comb[i, j] X_i``,
``H_res = combᵀ``); the post function is the engine's, so the orientation is the engine's.

* ``vllm:mhc-torch``: ``mhc_pre_torch`` / ``mhc_post_torch`` (float32 inside, bfloat16 state,
  branch input and output). ``pre`` for ``weights`` is the engine's ``mhc_pre_delayed_torch``
  (the same formulas, returning ``pre``): a disagreement with the collapse fails ``law.reported``.
* ``vllm:mhc-triton``: vLLM's Triton kernels where the engine has them. vLLM 0.33.0 has no
  Triton Sinkhorn: ``post`` and ``comb`` are ``mhc_pre_torch``'s (as on ROCm without AITER);
  ``pre`` is ``mhc_pre_mix_triton`` (``_mhc_pre_mix_kernel``: the pre gate recovered from a
  split-K GEMM output, here the projection split in two along ``n·d`` as AITER's
  ``mhc_pre_big_fuse`` leaves it), the branch input ``hc_collapse_triton``
  (``_hc_head_reduce_store_kernel``), and ``reduce`` the HC head ``hc_head_reduce_triton_kernel``
  (``rmsnorm_nw`` + the same store kernel), as ``HCHeadOp.forward_hip`` calls it. On the CPU
  the kernels need ``TRITON_INTERPRET=1`` before the import (:mod:`._triton`).
* ``vllm:mhc-cpu``: ``mhc_pre_cpu`` / ``mhc_post_cpu`` / ``hc_head_fused_cpu`` over
  ``torch.ops._C.hc_pre_fused_cpu`` etc., which only vLLM's CPU build registers (its
  ``vllm/_C.abi3.so``); the PyPI wheel is the CUDA build (``_C_stable_libtorch.abi3.so``, no
  ``_C``), so the target is unavailable there with the loader's error (:func:`cpu_unavailable`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

import torch

from hcspec.conformance.adapters._capture import check_branch_output
from hcspec.conformance.adapters._engine_mhc import (
    HC_EPS,
    POST_MULT,
    PUBLISHED,
    RMS_EPS,
    SINKHORN_ITERS,
    STATE_DTYPE,
    build_parameters,
    flat_tokens,
)
from hcspec.conformance.adapters._triton import TritonMode, kernel_mode
from hcspec.conformance.adapters.deepseek_v4_style import (
    Decomposition,
    LayerStep,
    v4_style_target,
)
from hcspec.conformance.protocol import Conventions, Factory, ReduceScale

WRITTEN_FOR: Final = "0.33.0"
"""The vLLM release these adapters were read against."""

_PACKAGE: Final = "vllm.model_executor.kernels.mhc"

SPLIT_K: Final = 2
"""How many slices of ``n·d`` the Triton target's projection is split into before
``mhc_pre_mix_triton`` reduces them (AITER's split-K GEMM leaves several)."""


_LOADED: dict[str, ModuleType] = {}


def kernels(name: str) -> ModuleType:
    """``vllm.model_executor.kernels.mhc.<name>`` from the installed wheel (imported once, then
    a dictionary look-up, which ``torch.compile`` traces through).

    Raises:
        ImportError: vLLM (or what the module imports) is not installed.
    """
    module = _LOADED.get(name)
    if module is None:
        module = _LOADED[name] = importlib.import_module(f"{_PACKAGE}.{name}")
    return module


def _pre_args(module: Any) -> dict[str, Any]:
    return {"rms_eps": module.norm_eps, "hc_pre_eps": module.hc_eps,
            "hc_sinkhorn_eps": module.hc_eps, "hc_post_mult_value": module.post_mult,
            "sinkhorn_repeat": module.sinkhorn_iters}


def conventions(path: str, notes: str, *, reduce: ReduceScale = "mean") -> Conventions:
    """What a vLLM target declares: DeepSeek-V4's settings from the config
    (:mod:`._engine_mhc`), bfloat16 state, float32 coefficients."""
    return Conventions(
        compute_dtype=torch.float32, output_dtype=STATE_DTYPE, reduce=reduce,
        sinkhorn_iterations=SINKHORN_ITERS, sinkhorn_variant="softmax",
        sinkhorn_iterations_count="rounds_from_softmax", sinkhorn_additive_eps=HC_EPS,
        sinkhorn_denominator_eps=HC_EPS, sinkhorn_exact_axis="rows", h_pre_eps=HC_EPS,
        contiguous_input=True, published="deepseek-v4",
        notes=(f"vLLM {WRITTEN_FOR} wheel, {path}: state cast to bfloat16 (the model's "
               "residual dtype), mixes and coefficients float32; pre = σ + 1e-6, post = 2σ, "
               "comb = softmax(-1) + 1e-6, a column normalisation, then 19 (row, column) "
               f"rounds with 1e-6 in the denominators; H_res = combᵀ; {notes}"))


# --- vllm:mhc-torch ------------------------------------------------------------------------------
def decompose_torch(module: Any, x: torch.Tensor) -> Decomposition:
    """``mhc_pre_torch`` at ``x [B, T, n, d]`` (post, comb, the bfloat16 branch input) and
    ``mhc_pre_delayed_torch``'s ``pre`` (its fourth output) at the same residual."""
    t = kernels("torch")
    b, tt, n, d = x.shape
    residual = flat_tokens(x)
    post, comb, layer_input = t.mhc_pre_torch(residual, module.fn, module.scale, module.base,
                                              **_pre_args(module))
    pre = t.mhc_pre_delayed_torch(residual, module.fn, module.scale, module.base,
                                  **_pre_args(module))[3]
    return Decomposition(pre=pre.reshape(b, tt, n), post=post.reshape(b, tt, n),
                         comb=comb.reshape(b, tt, n, n),
                         collapsed=layer_input.reshape(b, tt, d))


def _step(pre: Callable[[Any, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
          post: Callable[..., torch.Tensor]) -> Callable[[Any], LayerStep]:
    """``layer_of(module)``: the decoder layer's sublayer step with the engine's ``pre`` and
    ``post`` functions (``pre(module, residual) -> (post, comb, layer_input)``)."""
    def layer_of(module: Any) -> LayerStep:
        def step(x: torch.Tensor, branch: Callable[[torch.Tensor], torch.Tensor]
                 ) -> torch.Tensor:
            residual = flat_tokens(x)
            post_mix, comb, layer_input = pre(module, residual)
            collapsed = layer_input.reshape(*x.shape[:2], x.shape[-1]).to(x.dtype)
            z = check_branch_output(branch(collapsed), collapsed)
            out = post(z.reshape(-1, x.shape[-1]), residual, post_mix, comb)
            return out.reshape(x.shape)
        return step
    return layer_of


def _pre_torch(module: Any, residual: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = kernels("torch").mhc_pre_torch(
        residual, module.fn, module.scale, module.base, **_pre_args(module))
    return out


def _post_torch(x: torch.Tensor, residual: torch.Tensor, post: torch.Tensor,
                comb: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = kernels("torch").mhc_post_torch(x, residual, post, comb)
    return out


def _torch_factory() -> Factory:
    return v4_style_target(
        build_parameters, decompose_torch, comb="source_target",
        conventions=conventions(f"{_PACKAGE}.torch (mhc_pre_torch, mhc_post_torch)",
                                "no head in torch.py (reduce: the mean)"),
        compose_dtype="float32", keep_float32=True, published=PUBLISHED,
        decoder_layer=_step(_pre_torch, _post_torch))


def make_torch(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
               device: str = "cpu", seed: int = 0) -> Any:
    """Factory (kit target form) of the installed wheel's ``torch.py`` (``vllm:mhc-torch`` uses
    it when vLLM is installed: :func:`hcspec.conformance.adapters.vllm_mhc.make_wheel_first`).

    Raises:
        ImportError: vLLM (or what ``torch.py`` imports) is not installed.
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    kernels("torch")
    return _torch_factory()(n, d, layer_index=layer_index, dtype=dtype, device=device,
                            seed=seed)


# --- vllm:mhc-triton -----------------------------------------------------------------------------
def interpreter_context() -> None:
    """Let vLLM keep Triton on a machine without a GPU, for ``TRITON_INTERPRET=1``.

    ``vllm/triton_utils/importing.py`` (0.33.0, the block that sets ``HAS_TRITON``) replaces
    ``triton`` by a placeholder, whose ``jit`` returns a stub, unless exactly one GPU driver is
    active; its one exception is a launcher's process with ``CUDA_VISIBLE_DEVICES`` set and
    empty ("a distributed environment"), where no driver may be active yet. That is the
    smallest context the engine itself offers for the interpreter: with ``TRITON_INTERPRET=1``,
    no CUDA device and ``CUDA_VISIBLE_DEVICES`` unset, this sets it to the empty string before
    vLLM's Triton utilities are first imported (nothing else reads it on such a machine).

    Raises:
        ValueError: vLLM's Triton utilities were already imported with the placeholder.
    """
    interpret = os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true")
    if not interpret or torch.cuda.is_available():
        return
    if "vllm.triton_utils" not in sys.modules:
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
        return
    if not sys.modules["vllm.triton_utils"].HAS_TRITON:
        raise ValueError("vLLM's Triton utilities were imported before the interpreter's "
                         "context was set (triton is vLLM's placeholder in this process): "
                         "run vllm:mhc-triton in a process of its own")


def triton_mode() -> TritonMode:
    """Where the wheel's Triton mHC kernels run in this process (imports them)."""
    return kernel_mode(kernels("triton")._mhc_pre_mix_kernel)


def pre_mix_triton(module: Any, residual: torch.Tensor) -> torch.Tensor:
    """``pre [N, n]`` from ``mhc_pre_mix_triton`` given the projection split in
    :data:`SPLIT_K` slices of ``n·d`` (``gemm_out [k, N, n(n+2)]`` and ``sqrsum [k, N]``, float32,
    as AITER's split-K GEMM hands them over)."""
    tr = kernels("triton")
    n, d = residual.shape[-2:]
    flat = residual.reshape(residual.shape[0], n * d).float()
    parts = [(xs @ fs.t(), xs.square().sum(-1)) for xs, fs in
             zip(flat.tensor_split(SPLIT_K, dim=1), module.fn.tensor_split(SPLIT_K, dim=1),
                 strict=True)]
    gemm = torch.stack([p[0] for p in parts]).contiguous()
    sqrsum = torch.stack([p[1] for p in parts]).contiguous()
    out: torch.Tensor = tr.mhc_pre_mix_triton(gemm, sqrsum, module.scale, module.base, n,
                                              n * d, module.norm_eps, module.hc_eps)
    return out


def _pre_triton(module: Any, residual: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    post, comb, _ = _pre_torch(module, residual)
    pre = pre_mix_triton(module, residual)
    layer_input: torch.Tensor = kernels("triton").hc_collapse_triton(residual, pre)
    return post, comb, layer_input


def decompose_triton(module: Any, x: torch.Tensor) -> Decomposition:
    """``post``, ``comb`` from ``mhc_pre_torch``, ``pre`` from ``mhc_pre_mix_triton`` and the
    branch input from ``hc_collapse_triton``, at ``x [B, T, n, d]``."""
    b, t, n, d = x.shape
    residual = flat_tokens(x)
    post, comb, _ = _pre_torch(module, residual)
    pre = pre_mix_triton(module, residual)
    collapsed = kernels("triton").hc_collapse_triton(residual, pre)
    return Decomposition(pre=pre.reshape(b, t, n), post=post.reshape(b, t, n),
                         comb=comb.reshape(b, t, n, n), collapsed=collapsed.reshape(b, t, d))


def head_triton(module: Any, x: torch.Tensor) -> torch.Tensor:
    """The HC head ``hc_head_reduce_triton_kernel`` at ``x [B, T, n, d]`` (``[B, T, d]``,
    bfloat16), with the head's ``norm_eps`` and ``hc_eps`` as ``HCHeadOp`` passes them."""
    b, t, _, d = x.shape
    residual = flat_tokens(x)
    out = torch.empty(b * t, d, dtype=STATE_DTYPE, device=x.device)
    kernels("triton").hc_head_reduce_triton_kernel(
        residual, module.head_fn, module.head_scale, module.head_base, out, module.norm_eps,
        module.hc_eps)
    return out.reshape(b, t, d)


def _triton_factory() -> Factory:
    return v4_style_target(
        build_parameters, decompose_triton, comb="source_target",
        conventions=conventions(
            f"{_PACKAGE}.triton (mhc_pre_mix_triton split-K pre gate, hc_collapse_triton, "
            "hc_head_reduce_triton_kernel) with mhc_pre_torch's post and comb (vLLM has no "
            "Triton Sinkhorn) and mhc_post_torch", "reduce = the Triton HC head (learned)",
            reduce="learned"),
        compose_dtype="float32", keep_float32=True, published=PUBLISHED, reduce=head_triton,
        decoder_layer=_step(_pre_triton, _post_torch))


def make_triton(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                device: str = "cpu", seed: int = 0) -> Any:
    """Factory (kit target form) of ``vllm:mhc-triton``.

    Raises:
        ImportError: vLLM or Triton is not installed.
        ValueError: the kernels cannot take ``device`` tensors here (compiled for CUDA, or
            neither CUDA nor ``TRITON_INTERPRET=1``); bad sizes as the other factories.
    """
    interpreter_context()
    triton_mode().require_device(device, "vLLM's Triton mHC kernels")
    return _triton_factory()(n, d, layer_index=layer_index, dtype=dtype, device=device,
                             seed=seed)


# --- vllm:mhc-tilelang (a GPU only) --------------------------------------------------------------
def _pre_tilelang(module: Any, residual: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = kernels("tilelang").mhc_pre_tilelang(
        residual, module.fn, module.scale, module.base, **_pre_args(module))
    return out


def _post_tilelang(x: torch.Tensor, residual: torch.Tensor, post: torch.Tensor,
                   comb: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = kernels("tilelang").mhc_post_tilelang(x, residual, post, comb)
    return out


def decompose_tilelang(module: Any, x: torch.Tensor) -> Decomposition:
    """``mhc_pre_tilelang`` at ``x`` (post, comb, branch input); ``pre`` from
    ``mhc_pre_delayed_torch`` (the TileLang pre does not return it)."""
    b, t, n, d = x.shape
    residual = flat_tokens(x)
    post, comb, layer_input = _pre_tilelang(module, residual)
    pre = kernels("torch").mhc_pre_delayed_torch(residual, module.fn, module.scale,
                                                 module.base, **_pre_args(module))[3]
    return Decomposition(pre=pre.reshape(b, t, n), post=post.reshape(b, t, n),
                         comb=comb.reshape(b, t, n, n), collapsed=layer_input.reshape(b, t, d))


def make_tilelang(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                  device: str = "cuda", seed: int = 0) -> Any:
    """Factory (kit target form) of ``vllm:mhc-tilelang``: ``mhc_pre_tilelang`` /
    ``mhc_post_tilelang`` (what ``MHCPreOp.forward_cuda`` and ``MHCPostOp.forward_cuda`` call);
    TileLang kernels, a CUDA device only (``tools/gpu_check.sh``).

    Raises:
        ImportError: vLLM or TileLang is not installed.
        ValueError: ``device`` is not a CUDA device.
    """
    if torch.device(device).type != "cuda":
        raise ValueError("vllm:mhc-tilelang: TileLang kernels need a CUDA device "
                         "(run it with --device cuda; tools/gpu_check.sh does)")
    factory = v4_style_target(
        build_parameters, decompose_tilelang, comb="source_target",
        conventions=conventions(f"{_PACKAGE}.tilelang (mhc_pre_tilelang, mhc_post_tilelang)",
                                "TileLang kernels (CUDA)"),
        compose_dtype="float32", keep_float32=True, published=PUBLISHED,
        decoder_layer=_step(_pre_tilelang, _post_tilelang))
    return factory(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)


# --- vllm:mhc-cpu --------------------------------------------------------------------------------
CPU_OPS: Final = ("hc_pre_fused_cpu", "hc_post_fused_cpu", "hc_head_fused_cpu")


def cpu_unavailable() -> str | None:
    """Why ``mhc_pre_cpu``'s compiled ops cannot run here, or None (the loader's error)."""
    try:
        importlib.import_module("vllm._C")
    except ImportError as exc:
        return (f"vLLM's compiled CPU ops ({', '.join(CPU_OPS)}) are registered by vllm._C, "
                f"which this vLLM build lacks ({exc}); the PyPI wheel is the CUDA build: the "
                "CPU build of vLLM (VLLM_TARGET_DEVICE=cpu, or the vllm-cpu images) runs it")
    except OSError as exc:
        return f"vllm._C does not load here: {exc}"
    missing = [op for op in CPU_OPS if not hasattr(torch.ops._C, op)]
    if missing:
        return f"vllm._C loads but registers no {', '.join(missing)} (not a CPU build)"
    return None


def _pre_cpu(module: Any, residual: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = kernels("cpu").mhc_pre_cpu(
        residual, module.fn, module.scale, module.base, **_pre_args(module))
    return out


def _post_cpu(x: torch.Tensor, residual: torch.Tensor, post: torch.Tensor,
              comb: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = kernels("cpu").mhc_post_cpu(x, residual, post, comb)
    return out


def decompose_cpu(module: Any, x: torch.Tensor) -> Decomposition:
    """``mhc_pre_cpu`` at ``x`` (post, comb, branch input); ``pre`` from
    ``mhc_pre_delayed_torch`` (the CPU op does not return it)."""
    b, t, n, d = x.shape
    residual = flat_tokens(x)
    post, comb, layer_input = _pre_cpu(module, residual)
    pre = kernels("torch").mhc_pre_delayed_torch(residual, module.fn, module.scale,
                                                 module.base, **_pre_args(module))[3]
    return Decomposition(pre=pre.reshape(b, t, n), post=post.reshape(b, t, n),
                         comb=comb.reshape(b, t, n, n), collapsed=layer_input.reshape(b, t, d))


def make_cpu(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0) -> Any:
    """Factory (kit target form) of ``vllm:mhc-cpu``.

    Raises:
        ImportError: the compiled CPU ops are not there (:func:`cpu_unavailable`'s reason).
    """
    reason = cpu_unavailable()
    if reason is not None:
        raise ImportError(reason)
    factory = v4_style_target(
        build_parameters, decompose_cpu, comb="source_target",
        conventions=conventions(f"{_PACKAGE}.cpu (mhc_pre_cpu, mhc_post_cpu)",
                                "one merged hc_eps, post multiplier fixed at 2"),
        compose_dtype="float32", keep_float32=True, published=PUBLISHED,
        decoder_layer=_step(_pre_cpu, _post_cpu))
    return factory(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)


__all__ = ["POST_MULT", "RMS_EPS", "cpu_unavailable", "make_cpu", "make_tilelang", "make_torch",
           "make_triton"]
