"""Mutant: calls the branch once per stream, ``x_in``-weighted: ``z = Σ_i h_pre,i F(X_i)``.

Bug class: sublayer. Equal to the real thing only for a linear F; it costs n sublayer calls
where HC makes one (the sublayer runs once on a d-vector, never n times).
Caught by: shape.branch_once.
"""

from __future__ import annotations

import torch

from hcspec.reference import DynamicHyperConnection
from tests.mutants._base import build

BUG_CLASS = "sublayer: branch called once per stream"
CAUGHT_BY = ("shape.branch_once",)


class PerStream(DynamicHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        h_pre, h_post, H_res = self.weights(x)
        z = sum(h_pre[..., i, None] * branch(x[..., i, :]) for i in range(self.n))
        mixed = torch.einsum("btij,btjd->btid", H_res, x)
        return mixed + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(PerStream, n, d, layer_index, dtype, device, seed)
