"""Mutant: the weights are projected from the raw flattened state: the RMSNorm factor
``rsqrt(mean(vec(X)²) + eps)`` that should scale the projection (mHC Eq. 7) is left out, so
the weights change when the state is scaled (``weights(2X) ≠ weights(X)``). The law still
holds with the reported weights, the mixing is still doubly stochastic and the ranges hold:
only a property that scales the state sees it.

Bug class: fused pre-mix kernels that compute ``vec(X) φ`` and apply the RMS factor in a
separate step (DeepSeek-V4's ``mixes = x_flat @ fn`` then ``· rsqrt(mean(x²) + eps)``); a path
that skips the second step still gives plausible weights at the magnitudes of an
initialised model.
Caught by: conventions.weights_scale_invariant.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "weights from the unnormalised state: not scale invariant"
CAUGHT_BY = ("conventions.weights_scale_invariant",)


class Unnormalised(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        batch, tokens, n, d = x.shape
        projected = x.reshape(batch, tokens, n * d) @ self._phi()  # meant: · rsqrt(ms + eps)
        h_pre = torch.sigmoid(self.alpha_pre * projected[..., :n] + self.b_pre)
        h_post = 2.0 * torch.sigmoid(self.alpha_post * projected[..., n:2 * n] + self.b_post)
        res = self.alpha_res * projected[..., 2 * n:].reshape(batch, tokens, n, n) + self.b_res
        return h_pre, h_post, sinkhorn_knopp(res, self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Unnormalised, n, d, layer_index, dtype, device, seed, mhc_conventions())
