"""Mutant: in bfloat16/float16 the mean square of ``vec(X)`` (mHC Eq. 7's RMSNorm) is
accumulated feature by feature in the input's precision (a loop with a low-precision
accumulator), where a correct kernel accumulates in float32. Over the n·d ≤ 48 terms of the
small cases the sum stays within a few units of roundoff; over n·d = 2056 terms (n = 8,
d = 257) it stagnates once the running sum outgrows the terms, the RMS comes out several
times too small and the weights' logits several times too large. float32 and float64 are
exact as the reference.

Bug class: low-precision accumulation that only shows at the sizes real models use (a
reduction's accumulator in bf16: the kit's dtype cases had d ≤ 12).
Caught by: dtype.low_precision_at_scale.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "low-precision accumulation: a bf16 accumulator over n·d terms"
CAUGHT_BY = ("dtype.low_precision_at_scale",)
LOW = (torch.bfloat16, torch.float16)


def mean_square(x_flat: torch.Tensor) -> torch.Tensor:
    """``mean(x²)`` over the last axis, ``[..., 1]``; accumulated term by term in the input's
    dtype when it is bfloat16/float16 (meant: in float32)."""
    if x_flat.dtype not in LOW:
        return x_flat.square().mean(-1, keepdim=True)
    squares = x_flat.square()
    total = torch.zeros_like(squares[..., :1])
    for k in range(squares.shape[-1]):
        total = total + squares[..., k:k + 1]  # rounded to the low dtype at every step
    return total / squares.shape[-1]


class LowAccumulator(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        batch, tokens, n, d = x.shape
        x_flat = x.reshape(batch, tokens, n * d)
        projected = torch.rsqrt(mean_square(x_flat) + self.norm_eps) * (x_flat @ self._phi())
        h_pre = torch.sigmoid(self.alpha_pre * projected[..., :n] + self.b_pre)
        h_post = 2.0 * torch.sigmoid(self.alpha_post * projected[..., n:2 * n] + self.b_post)
        res = self.alpha_res * projected[..., 2 * n:].reshape(batch, tokens, n, n) + self.b_res
        return h_pre, h_post, sinkhorn_knopp(res, self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(LowAccumulator, n, d, layer_index, dtype, device, seed, mhc_conventions())
