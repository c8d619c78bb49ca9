"""Adapter for SGLang 0.5.23's HY-V4 iHC (gated streams, no mixing matrix), from the released
wheel: TARGET ``sglang:ihc``.

**What runs.** The Triton kernels of ``sglang/kernels/ops/layernorm/hy4_ihc.py`` that HY-V4's
layer (``srt/models/hunyuan_v4.py``, ``HYV4HCPreLayer`` / ``HYV4HCLayer.post``) calls on a CUDA
state: ``fused_hy4_ihc_pre`` (``_hy4_ihc_pre_stage1``: the split-K projection ``hc_fn · vec(X)``
and ``Σ X²``; ``_hy4_ihc_pre_stage2``: ``pre = σ(scale₀·mix·rsqrt(mean X² + ε) + base) + eps``,
``post = magnitude·σ(…) + eps``, ``x_in = Σ_s pre_s X_s``) and ``fused_hy4_ihc_post``
(``_hy4_ihc_post_kernel``: ``X'_s = post_s F(x_in) + X_s``). ``reduce`` is
``fused_hy4_ihc_head`` (without the optional ``hpc`` package it is the file's own torch
computation, the layer's ``HYV4HCHeadLayer``). The layer classes themselves are not imported
(``hunyuan_v4.py`` imports transformers 5.19.0 and the serving runtime, which do not load next to
a CPU torch 2.13): the adapter makes the layer's three calls, ``pre`` -> branch -> ``post``, with
``IHCState``'s order (``read_attn_input``, ``apply_attn_post``). ``hpc`` (its CUDA ops for
``hidden_size`` 4096 / 6144) needs a GPU.

On a CPU the kernels need ``TRITON_INTERPRET=1`` before the import (:mod:`._triton`).

``weights``: ``post`` is the pre kernel's own output; ``pre`` is read from the same kernel by a
second call whose post half of the parameters is the pre half (``hc_fn``'s first ``n`` rows,
``hc_scale[0]``, ``hc_base[:n]``) with magnitude 1, so that its ``post`` output is
``σ(pre logits) + eps``; ``H_res = I``. Parameters float32 (the layer's ``params_dtype``); the
state in the kit's ``dtype`` (the model's is bfloat16), the projection and gates in float32.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.adapters._capture import PackageChanged
from hcspec.conformance.adapters._triton import TritonMode, kernel_mode
from hcspec.conformance.protocol import Branch, Conventions

WRITTEN_FOR: Final = "0.5.23"
"""The SGLang release this adapter was read against."""

MODULE: Final = "sglang.kernels.ops.layernorm.hy4_ihc"
"""The kernels' module."""

HC_EPS: Final = 1e-6
"""``hc_eps`` of the adapter's config."""

NORM_EPS: Final = 1e-6
"""``rms_norm_eps`` of the adapter's config."""

MAGNITUDE: Final = 2.0
"""``hc_magnitude`` (HY-V4's: ``post = 2σ(·) + eps``)."""

_LOADED: dict[str, ModuleType] = {}
"""Imported modules by name (a test puts a mutant here)."""


def kernels() -> Any:
    """``sglang.kernels.ops.layernorm.hy4_ihc`` from the installed wheel (imported once; a module
    in ``_LOADED`` under :data:`MODULE` takes its place).

    Raises:
        ImportError: SGLang or Triton is not installed. PackageChanged: the module changed.
    """
    module = _LOADED.get(MODULE)
    if module is None:
        module = _LOADED[MODULE] = importlib.import_module(MODULE)
    for name in ("fused_hy4_ihc_pre", "fused_hy4_ihc_post", "fused_hy4_ihc_head"):
        if not hasattr(module, name):
            raise PackageChanged(f"{MODULE} has no {name} (written for SGLang {WRITTEN_FOR})")
    return module


def triton_mode() -> TritonMode:
    """Where the iHC kernels run in this process (:func:`._triton.kernel_mode`).

    Raises:
        ImportError: SGLang or Triton is not installed.
    """
    return kernel_mode(kernels()._hy4_ihc_pre_stage2)


class SGLangIHC(nn.Module):
    """HY-V4's iHC through SGLang's kernels; state ``[B,T,n,d]`` is the kernels' ``[T, n, d]``
    with ``[B,T]`` flattened to tokens."""

    kind = "mhc"

    def __init__(self, n: int, d: int, generator: torch.Generator) -> None:
        super().__init__()
        self.n, self.d = n, d
        f32 = torch.float32
        std = (n * d) ** -0.5
        self.hc_fn = nn.Parameter(std * torch.randn(2 * n, n * d, generator=generator, dtype=f32))
        self.hc_scale = nn.Parameter(1 + 0.1 * torch.randn(2, generator=generator, dtype=f32))
        self.hc_base = nn.Parameter(0.5 * torch.randn(2 * n, generator=generator, dtype=f32))
        self.hc_head_fn = nn.Parameter(std * torch.randn(n, n * d, generator=generator,
                                                         dtype=f32))
        self.hc_head_scale = nn.Parameter(1 + 0.1 * torch.randn(1, generator=generator,
                                                                dtype=f32))
        self.hc_head_base = nn.Parameter(0.5 * torch.randn(n, generator=generator, dtype=f32))
        self.conventions = Conventions(
            compute_dtype=torch.float32, reduce="learned", residual_mixing="identity",
            h_pre_eps=HC_EPS, h_post_eps=HC_EPS, contiguous_input=True,
            notes=(f"SGLang {WRITTEN_FOR} wheel, kernels/ops/layernorm/hy4_ihc.py: "
                   "fused_hy4_ihc_pre (Triton, two stages) -> branch -> fused_hy4_ihc_post "
                   "(Triton) as HYV4HCLayer calls them; no mixing matrix (H_res = I); pre = σ + "
                   "eps, post = 2σ + eps from hc_fn·vec(X)·rsqrt(mean vec(X)² + ε); reduce = "
                   "fused_hy4_ihc_head; parameters float32"))

    def _pre(self, rows: torch.Tensor, fn: torch.Tensor, scale: torch.Tensor,
             base: torch.Tensor, magnitude: float) -> tuple[torch.Tensor, torch.Tensor]:
        out: tuple[torch.Tensor, torch.Tensor] = kernels().fused_hy4_ihc_pre(
            rows, fn.float(), scale.float(), base.float(), magnitude, NORM_EPS, HC_EPS)
        return out

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``x [B,T,n,d] -> [B,T,n,d]``: pre kernel, branch, post kernel."""
        lead = x.shape[:-2]
        rows = x.reshape(-1, self.n, self.d)
        y, post = self._pre(rows, self.hc_fn, self.hc_scale, self.hc_base, MAGNITUDE)
        out = branch(y.reshape(*lead, self.d)).reshape(-1, self.d)
        written: torch.Tensor = kernels().fused_hy4_ihc_post(out.to(x.dtype), rows, post)
        return written.reshape(*lead, self.n, self.d)

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(h_pre [B,T,n], h_post [B,T,n], I [B,T,n,n])`` from the pre kernel (see the module
        docstring for how ``h_pre`` is read): the kernels' float32 values in ``x``'s dtype."""
        lead = x.shape[:-2]
        n = self.n
        rows = x.reshape(-1, n, self.d)
        _, post = self._pre(rows, self.hc_fn, self.hc_scale, self.hc_base, MAGNITUDE)
        pre_half = self.hc_fn[:n]
        _, pre = self._pre(rows, torch.cat([pre_half, pre_half]).contiguous(),
                           torch.stack([self.hc_scale[0], self.hc_scale[0]]),
                           torch.cat([self.hc_base[:n], self.hc_base[:n]]), 1.0)
        eye = torch.eye(n, dtype=x.dtype, device=x.device).expand(*lead, n, n)
        return (pre.reshape(*lead, n).to(x.dtype), post.reshape(*lead, n).to(x.dtype), eye)

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """``h [B,T,d] -> [B,T,n,d]``: the layer's ``prepare_input`` (``n`` copies)."""
        return h.unsqueeze(-2).expand(*h.shape[:-1], self.n, self.d).contiguous()

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """``fused_hy4_ihc_head``: ``[B,T,n,d] -> [B,T,d]``."""
        out: torch.Tensor = kernels().fused_hy4_ihc_head(
            x.reshape(-1, self.n, self.d), self.hc_head_fn.float(), self.hc_head_scale.float(),
            self.hc_head_base.float(), NORM_EPS, HC_EPS)
        return out.reshape(*x.shape[:-2], self.d)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> SGLangIHC:
    """Factory for SGLang 0.5.23's HY-V4 iHC kernels (parameters float32, the layer's, drawn
    under ``seed``; ``dtype`` is the state's, which the kit passes; the kernels are handed the
    parameters as float32, which they assert, whatever the module was cast to).

    Raises:
        ImportError: SGLang or Triton is not installed. PackageChanged: the module changed.
        RuntimeError: the Triton kernels cannot run here (no CUDA, no interpreter).
    """
    del layer_index, dtype
    mode = triton_mode()
    if mode.name == "unavailable":
        raise RuntimeError(mode.reason)
    generator = torch.Generator().manual_seed(seed)
    return SGLangIHC(n, d, generator).to(device=device)
