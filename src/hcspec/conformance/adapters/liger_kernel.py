"""Adapter for Liger-Kernel's mHC (PyPI ``liger-kernel``, import name ``liger_kernel``):
``liger_kernel.transformers.mhc.LigerMHC``, written against version :data:`WRITTEN_FOR`.

``LigerMHC`` wraps one sublayer with mHC (mHC arXiv:2512.24880 §4, Eq. 7–9 and 14–19) in
Triton kernels: a fused matmul + RMS scale for the coefficient logits, one program per token
for the sigmoids and Sinkhorn–Knopp, and blocked kernels for the pre-aggregation and the
post + residual mix, each with its own backward kernel. The kernels run natively on CUDA, or
on the CPU through Triton's interpreter when ``TRITON_INTERPRET=1`` is set before they are
imported (:mod:`hcspec.conformance.adapters._triton`); the factory rejects a device the
kernels cannot take here, and :func:`triton_mode` says which mode applies.

What the adapter translates or declares (read from the package source; all of it is in the
impl's :class:`~hcspec.conformance.protocol.Conventions` and the report):

* **Layout.** ``LigerMHC`` takes ``[..., n, C]`` (streams on axis −2), the kit's layout; no
  folding.
* **Branch injection.** The wrapped ``layer`` is a parameter-free slot that calls the kit's
  branch on ``x_in = h_preᵀ X`` of the raw streams (declared ``branch_input="x_in"``).
* **Orientation.** ``h_res[o, i]`` multiplies input stream ``i`` into output stream ``o``:
  the kit's row form, no transpose.
* **Coefficients** (mHC Eq. 14–15): ``mix = (vec(X) φ) · rsqrt(mean(vec(X)²) + rms_eps)`` over
  the whole flattened ``n·C`` token (no norm gain), then ``h_pre = σ(α_pre·mix + b) +
  pre_eps``, ``h_post = post_mult·σ(α_post·mix + b)`` (``post_mult = 2``), residual logits
  ``α_res·mix + b``. Init: ``φ ~ N(0, 0.02²)`` from the global RNG, ``b = 0``, ``α = 1``.
* **Sinkhorn–Knopp** (Eq. 19): a row softmax, ``+ sinkhorn_eps`` on every entry, a column
  normalisation by ``(column sum + sinkhorn_eps)``; then ``tmax − 1`` rounds of row then
  column normalisation, each dividing by ``(sum + sinkhorn_eps)``: declared
  ``sinkhorn_variant="softmax"``, ``sinkhorn_iterations=tmax`` counted
  ``"rounds_from_softmax"``, ``sinkhorn_additive_eps = sinkhorn_denominator_eps =
  sinkhorn_eps``, the columns normalised last (``sinkhorn_exact_axis="columns"``), exact up to
  the ``sinkhorn_eps`` in the denominator. ``h_pre_eps = pre_eps`` and ``h_post_multiplier =
  post_mult`` are declared from the module.
* **Precision.** Every kernel loads into float32 and accumulates in float32; the coefficients
  are float32 tensors, ``x_in`` and the output are cast to the input dtype (declared
  ``compute_dtype=torch.float32``). ``φ`` is built in the input dtype (the package's pairing:
  bfloat16/float16 ``x`` with a ``φ`` of the same dtype takes the tensor-core ``tl.dot``;
  float32 ``x`` needs ``allow_fp32=True`` and ``tl.dot`` runs in the GPU's default float32
  precision, TF32 on recent NVIDIA GPUs, which the interpreter does not reproduce).
* **float64.** LigerMHC rejects it (its forward asserts bfloat16/float16/float32). The
  factory's float64 impl is the float32 kernel path between casts: parameters held in
  float64 (the kernels read them as float32), the state cast to float32 on the way in, the
  branch called on ``x_in`` cast to float64 and its output cast back, the output cast to
  float64 — so the kit's float64 checks (finite differences, the spec's closed-form backward)
  reach the Triton backward kernels, with float32 tolerances (``compute_dtype``).
* **bfloat16 under the interpreter.** Triton's interpreter multiplies the raw bit patterns of
  bfloat16 ``tl.dot`` operands (github.com/triton-lang/triton/issues/11584), which the
  bfloat16 tensor-core path uses: under the interpreter the factory rejects bfloat16 (the
  kit then checks float16 only); on CUDA it is built.
* **What the package cannot take.** An ``n`` that is not a power of two: the
  kernels index the streams with ``tl.arange(0, n)``, which Triton allows only for powers of
  two; the package builds such a module and fails at the first forward
  (docs/findings/liger_kernel.md), so the factory rejects it up front, naming the reason.
* **No expand/reduce.** The package has no stream expansion or reduction: the capabilities
  are absent and their properties not applicable.

``weights(x)`` calls the package's ``liger_mhc_coeffs`` with the module's own parameters and
options, exactly the call ``LigerMHC.forward`` makes (the coefficients are the output of that
autograd function, differentiable through its Triton backward kernels).
"""

from __future__ import annotations

from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.adapters._capture import (
    WrapsModule,
    check_branch_output,
    check_state,
    seeded,
)
from hcspec.conformance.adapters._triton import TritonMode, kernel_mode
from hcspec.conformance.adapters.declarations.liger_kernel import WRITTEN_FOR
from hcspec.conformance.protocol import Branch, Conventions, Kind, Weights

INPUT_DTYPES: Final[tuple[torch.dtype, ...]] = (torch.float32, torch.bfloat16, torch.float16)
"""The input dtypes LigerMHC accepts (float32 with ``allow_fp32=True``)."""

FACTORY_DTYPES: Final[tuple[torch.dtype, ...]] = (torch.float64, *INPUT_DTYPES)
"""The dtypes the factory builds: LigerMHC's own, and float64 around its float32 path."""


def triton_mode() -> TritonMode:
    """Where LigerMHC's Triton kernels run in this process (imports the package's kernels,
    which fixes interpreted vs compiled).

    Raises:
        ImportError: liger-kernel (or Triton) is not installed.
    """
    from liger_kernel.ops import mhc

    return kernel_mode(mhc._mhc_split_sinkhorn_fwd_kernel)


class _BranchSlot(nn.Module):
    """The ``layer`` handed to LigerMHC: a module without parameters (LigerMHC casts ``x_in``
    to the layer's first parameter's dtype; with none it keeps the input dtype) that calls
    the branch set for the current call. The branch is not registered as a child."""

    def __init__(self) -> None:
        super().__init__()
        self.fn: Branch | None = None
        self.dtype: torch.dtype | None = None

    def set(self, fn: Branch | None, dtype: torch.dtype | None = None) -> None:
        """Use ``fn`` for the next call (None: none), called on ``x_in`` cast to ``dtype``
        (the state's dtype: float64 around the float32 path) and its output cast back."""
        object.__setattr__(self, "fn", fn)
        self.dtype = dtype

    def forward(self, x_in: torch.Tensor) -> torch.Tensor:
        if self.fn is None:
            raise RuntimeError("liger-kernel adapter: the layer was called outside forward")
        inp = x_in if self.dtype is None else x_in.to(self.dtype)
        return check_branch_output(self.fn(inp), inp).to(x_in.dtype)


def _is_power_of_two(n: int) -> bool:
    return n & (n - 1) == 0


class LigerMHCAdapter(WrapsModule):
    """``liger_kernel.transformers.mhc.LigerMHC`` (mHC in Triton kernels) as a kit impl.

    Shapes: ``forward(x [B,T,n,d], branch) -> [B,T,n,d]`` in ``x``'s dtype (float64 — the
    float32 path between casts —, float32, bfloat16 or float16) on ``x``'s device;
    ``weights(x) -> (h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])`` already in the row
    form, cast from the package's float32 to ``x``'s dtype. Computes in float32 inside (every
    kernel accumulates in float32).

    Raises:
        ImportError: liger-kernel or Triton is not installed.
        ValueError: ``n``/``d``/``tmax`` not positive ints, ``n`` not a power of two,
            ``dtype`` not one of :data:`FACTORY_DTYPES` (or bfloat16 under the
            interpreter), or a ``device`` the kernels cannot take
            in this process (:class:`~hcspec.conformance.adapters._triton.TritonMode`).

    ``parameters``, ``buffers`` and the training mode are the wrapped ``LigerMHC``'s
    (:class:`WrapsModule`): φ ``[n·d, n² + 2n]`` (in the factory's dtype), ``b [n² + 2n]``
    and the scalars ``α_pre``, ``α_post``, ``α_res`` (float32); it behaves the same in both modes.
    """

    kind: Kind = "mhc"

    def __init__(self, n: int, d: int, *, dtype: torch.dtype, device: str, tmax: int = 20,
                 sinkhorn_eps: float = 1e-6) -> None:
        from liger_kernel.transformers.mhc import LigerMHC

        for name, value in (("n", n), ("d", d), ("tmax", tmax)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if not _is_power_of_two(n):
            raise ValueError(
                f"n={n}: LigerMHC {WRITTEN_FOR}'s kernels index the streams with "
                "tl.arange(0, n), which Triton allows only for powers of two (the package "
                "builds the module and fails at the first forward)")
        if dtype not in FACTORY_DTYPES:
            raise ValueError(
                f"dtype {dtype}: LigerMHC takes float32 (allow_fp32=True), bfloat16 or float16 "
                "inputs (the adapter also offers float64 around its float32 path)")
        self.mode = triton_mode()
        self.mode.require_device(device, "LigerMHC")
        if dtype == torch.bfloat16 and self.mode.name == "interpreter":
            raise ValueError(
                "bfloat16: Triton's interpreter multiplies the raw bfloat16 bit patterns in "
                "tl.dot (github.com/triton-lang/triton/issues/11584), which LigerMHC's "
                "bfloat16 tensor-core path uses; the bfloat16 path can only be checked on CUDA")
        self.n, self.d = n, d
        self.dtype = dtype
        self._slot = _BranchSlot()
        self.module: Any = LigerMHC(
            self._slot, hc=n, c=d, tmax=tmax, sinkhorn_eps=sinkhorn_eps, phi_dtype=dtype,
            allow_fp32=True).to(device=device)
        if dtype == torch.float64:
            self.module.to(dtype=torch.float64)
        self.conventions = Conventions(
            branch_input="x_in", compute_dtype=torch.float32, sinkhorn_iterations=tmax,
            sinkhorn_exact_axis="columns", sinkhorn_variant="softmax",
            sinkhorn_iterations_count="rounds_from_softmax",
            sinkhorn_additive_eps=sinkhorn_eps, sinkhorn_denominator_eps=sinkhorn_eps,
            h_pre_eps=self.module.pre_eps, h_post_multiplier=self.module.post_mult,
            notes=(f"liger-kernel LigerMHC(tmax={tmax}, sinkhorn_eps={sinkhorn_eps}, "
                   f"phi_dtype={str(dtype).removeprefix('torch.')}, allow_fp32=True): "
                   "[B, T, n, d] as is; h_res[o, i] is the row form; coefficients from "
                   "vec(X) φ · rsqrt(mean(vec(X)²) + 1e-6) over n·d (no gain), h_pre = σ, "
                   "h_post = 2σ; Sinkhorn–Knopp = row softmax, +eps, then column/row/column "
                   "normalisations by (sum + eps), columns last; float32 inside, output in "
                   f"the input dtype; Triton mode: {self.mode.name} ({self.mode.reason}); "
                   "no expand/reduce; n a power of two"),
        )

    # --- the protocol ---------------------------------------------------------------------
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """One mHC step of LigerMHC: ``x [B, T, n, d] -> X' [B, T, n, d]``; ``branch`` is
        called exactly once on ``x_in [B, T, d]`` (in ``x``'s dtype).

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``, or the branch returns another shape.
        """
        check_state(x, self.n, self.d)
        self._slot.set(branch, x.dtype)
        try:
            out: torch.Tensor = self.module(self._to_kernel(x))
        finally:
            self._slot.set(None)
        return out.to(x.dtype)

    def weights(self, x: torch.Tensor) -> Weights:
        """The coefficients LigerMHC uses at ``x [B, T, n, d]``: ``(h_pre [B,T,n], h_post
        [B,T,n], H_res [B,T,n,n])`` in ``x``'s dtype, differentiable w.r.t. ``x`` and the
        parameters (through the package's backward kernels).

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``.
        """
        from liger_kernel.transformers.functional import liger_mhc_coeffs

        check_state(x, self.n, self.d)
        m = self.module
        h_pre, h_post, h_res = liger_mhc_coeffs(
            self._to_kernel(x), m.phi, m.b, m.alpha_pre, m.alpha_post, m.alpha_res,
            allow_fp32=m.allow_fp32,
            tmax=m.tmax, rms_eps=m.rms_eps, pre_eps=m.pre_eps, sinkhorn_eps=m.sinkhorn_eps,
            post_mult=m.post_mult)
        return h_pre.to(x.dtype), h_post.to(x.dtype), h_res.to(x.dtype)

    def _to_kernel(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` in a dtype the kernels take (float64 -> float32, differentiably)."""
        return x.to(torch.float32) if x.dtype == torch.float64 else x


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0, **options: Any) -> LigerMHCAdapter:
    """Factory (kit target form) for ``liger_kernel.transformers.mhc.LigerMHC``;
    ``layer_index`` is accepted and ignored (no layer-dependent init), ``seed`` seeds φ's
    random init without touching the caller's random state; ``options``: ``tmax``,
    ``sinkhorn_eps``.

    Raises:
        ImportError: liger-kernel or Triton is not installed. ValueError: see the adapter
            class.
    """
    del layer_index
    with seeded(seed, device):
        return LigerMHCAdapter(n, d, dtype=dtype, device=device, **options)


def make_customop(n: int, d: int, **kwargs: Any) -> Any:
    """Factory (kit target form) for ``liger_kernel:mhc-customop``: :func:`make`'s adapter with
    its forward through the custom ops the adapter registers for Liger's three autograd
    Functions (:mod:`hcspec.conformance.adapters._liger_ops`), for the custom-op family.
    Keywords as :func:`make`.

    Raises:
        ImportError: liger-kernel or Triton is not installed. ValueError: as :func:`make`.
    """
    from hcspec.conformance.adapters import _liger_ops

    return _liger_ops.LigerMHCCustomOps(make(n, d, **kwargs))
