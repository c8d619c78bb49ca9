"""Mutant: in bfloat16 the mean square of ``vec(X)`` (mHC Eq. 7's RMSNorm) is accumulated
sequentially in bfloat16 by two accumulators, one per half of the streams (at n = 8,
d = 257: 4·257 = 1028 terms each, a loop with a low-precision running sum), and the two
totals are added in float32. Each running sum stagnates once it outgrows its terms: the RMS
comes out a little small, systematically. In ``dtype.low_precision_at_scale``'s cases the
bfloat16 output is 1.8–7.9 × the measured floor off float32 where a correct impl stays at
0.5–0.7 × (the reference): under the former 8 × floor allowance it passed. float16, float32
and float64 compute the mean square in float32 (correct).

Bug class: a systematic precision loss a few times the floor (the allowance of a measured
floor must not hide it).
Caught by: dtype.low_precision_at_scale.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "precision: bf16 running sums of the RMS (a few × the floor)"
CAUGHT_BY = ("dtype.low_precision_at_scale",)


def mean_square(x: torch.Tensor) -> torch.Tensor:
    """``mean(vec(x)²)`` of ``x [B, T, n, d]`` as ``[B, T, 1]``: for a bfloat16 ``x`` two
    bfloat16 running sums over the halves of ``vec(x)`` (meant: float32), added in float32;
    otherwise in float32 or ``x``'s dtype, whichever is finer (as the reference)."""
    n, d = x.shape[-2:]
    flat = x.flatten(-2)
    if x.dtype != torch.bfloat16 or (n * d) % 2:  # float32 or finer, as the reference
        work = x.float() if x.dtype == torch.float16 else x
        return work.square().flatten(-2).mean(-1, keepdim=True)
    squares = flat.square().unflatten(-1, (2, n * d // 2))  # [B, T, 2, n·d/2]
    total = torch.zeros_like(squares[..., :1])
    for k in range(squares.shape[-1]):
        total = total + squares[..., k:k + 1]  # rounded to bfloat16 at every step
    return total.float().sum(-2) / (n * d)


class HalvesAccumulator(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        batch, tokens, n, d = x.shape
        x_flat = x.reshape(batch, tokens, n * d)
        inv_rms = torch.rsqrt(mean_square(x) + self.norm_eps).to(x.dtype)  # float32 inside
        projected = inv_rms * (x_flat @ self._phi())
        h_pre = torch.sigmoid(self.alpha_pre * projected[..., :n] + self.b_pre)
        h_post = 2.0 * torch.sigmoid(self.alpha_post * projected[..., n:2 * n] + self.b_post)
        res = self.alpha_res * projected[..., 2 * n:].reshape(batch, tokens, n, n) + self.b_res
        return h_pre, h_post, sinkhorn_knopp(res, self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(HalvesAccumulator, n, d, layer_index, dtype, device, seed, mhc_conventions())
