"""Hidden split: the RMS norm of vec(X) computed from this rank's columns only (its sum of
squares never all-reduced), as an RMSNorm unaware of the split does. Each rank then scales
the projections by a different factor: ``parallel.forward`` catches it (and the gradients
with it)."""

from __future__ import annotations

import torch

from hcspec.conformance.protocol import HyperConnectionImpl
from hcspec.reference.connection import Weights
from hcspec.reference.sharded import ShardedManifoldHyperConnection, all_reduce_sum
from hcspec.reference.sinkhorn import sinkhorn_knopp
from tests.mutants._parallel._sharded import make_with

BUG_CLASS = "distributed: RMS statistics of the hidden split not all-reduced"
CAUGHT_BY = ("parallel.forward",)


class LocalRMS(ShardedManifoldHyperConnection):
    def _hidden_weights(self, x: torch.Tensor) -> Weights:
        batch, tokens, n, d_local = x.shape
        x_flat = x.reshape(batch, tokens, n * d_local)
        phi = torch.cat([self.phi_pre, self.phi_post, self.phi_res], dim=1)
        mean_square = x_flat.square().mean(dim=-1, keepdim=True)  # the bug: local entries only
        inv_rms = torch.rsqrt(mean_square + 1e-6)
        projected = inv_rms * all_reduce_sum(x_flat @ phi, self.group)
        h_pre = torch.sigmoid(self.alpha_pre * projected[..., :n] + self.b_pre)
        h_post = 2.0 * torch.sigmoid(self.alpha_post * projected[..., n : 2 * n] + self.b_post)
        res = projected[..., 2 * n :].reshape(batch, tokens, n, n)
        return h_pre, h_post, sinkhorn_knopp(self.alpha_res * res + self.b_res)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
    return make_with(LocalRMS, n, d, layer_index=layer_index, dtype=dtype, device=device,
                     seed=seed)
