"""Mutant: the mean square of ``vec(X)`` (mHC Eq. 7's RMSNorm) is summed in the input's
precision, ``x.square().sum()`` in float16, then divided by n·d: the *sum* of n·d squares
overflows float16's largest value (65504) once ``n·d·RMS² > 65504``, the RMS becomes inf and
the normalised projections 0 — at n = 8, d = 257 from an RMS of about 5.6 on. At state scale
1 (the only scale the kit drew at n·d = 2056) the sum is about 2056 and exact enough; a
correct float16 impl computes it in float32 (or divides before summing). bfloat16 and
float32/float64 are as the reference.

Bug class: a low-precision reduction that overflows only at the magnitudes real states reach
(a float16 sum of squares over n·d terms).
Caught by: dtype.low_precision_at_scale (its cases reach the largest state scale float16
holds with headroom).
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "magnitude: a float16 sum of squares over n·d terms overflows"
CAUGHT_BY = ("dtype.low_precision_at_scale",)


class Float16SumOfSquares(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        batch, tokens, n, d = x.shape
        x_flat = x.reshape(batch, tokens, n * d)
        if x.dtype == torch.float16:  # summed in float16, divided afterwards
            mean_square = x_flat.square().sum(-1, keepdim=True).float() / (n * d)
        else:  # float32 or finer (bfloat16: float32), as the reference
            work = x_flat.float() if x.dtype == torch.bfloat16 else x_flat
            mean_square = work.square().mean(-1, keepdim=True)
        inv_rms = torch.rsqrt(mean_square + self.norm_eps).to(x.dtype)
        projected = inv_rms * (x_flat @ self._phi())
        h_pre = torch.sigmoid(self.alpha_pre * projected[..., :n] + self.b_pre)
        h_post = 2.0 * torch.sigmoid(self.alpha_post * projected[..., n:2 * n] + self.b_post)
        res = self.alpha_res * projected[..., 2 * n:].reshape(batch, tokens, n, n) + self.b_res
        return h_pre, h_post, sinkhorn_knopp(res, self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Float16SumOfSquares, n, d, layer_index, dtype, device, seed, mhc_conventions())
