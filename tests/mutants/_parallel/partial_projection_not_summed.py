"""Hidden split: the projections ``vec(X) φ`` of this rank's columns used as they are, never
summed over the ranks (the RMS statistics are all-reduced correctly). Each rank computes its
own H_pre, H_post, H_res from a part of the state: ``parallel.forward`` catches it."""

from __future__ import annotations

import torch

from hcspec.conformance.protocol import HyperConnectionImpl
from hcspec.reference.connection import Weights
from hcspec.reference.sharded import ShardedManifoldHyperConnection, all_reduce_sum
from hcspec.reference.sinkhorn import sinkhorn_knopp
from tests.mutants._parallel._sharded import make_with

BUG_CLASS = "distributed: partial projection of the hidden split not summed"
CAUGHT_BY = ("parallel.forward",)


class PartialProjection(ShardedManifoldHyperConnection):
    def _hidden_weights(self, x: torch.Tensor) -> Weights:
        batch, tokens, n, d_local = x.shape
        x_flat = x.reshape(batch, tokens, n * d_local)
        phi = torch.cat([self.phi_pre, self.phi_post, self.phi_res], dim=1)
        square_sum = all_reduce_sum(x_flat.square().sum(dim=-1, keepdim=True), self.group)
        inv_rms = torch.rsqrt(square_sum / (n * self.d) + 1e-6)
        projected = inv_rms * (x_flat @ phi)  # the bug: this rank's partial sum only
        h_pre = torch.sigmoid(self.alpha_pre * projected[..., :n] + self.b_pre)
        h_post = 2.0 * torch.sigmoid(self.alpha_post * projected[..., n : 2 * n] + self.b_post)
        res = projected[..., 2 * n :].reshape(batch, tokens, n, n)
        return h_pre, h_post, sinkhorn_knopp(self.alpha_res * res + self.b_res)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
    return make_with(PartialProjection, n, d, layer_index=layer_index, dtype=dtype,
                     device=device, seed=seed)
