"""Mutant: plain-domain Sinkhorn–Knopp (with a max subtraction) that divides by ``sum + ε``
with ε = 1e-3, "for safety".

Bug class: Sinkhorn (ε so large that the sums drift). Every normalised sum is ``s/(s + ε)``:
rows sum to about 1 − 1e-3 instead of 1 to rounding.
Caught by: constraints.h_res_exact_axis.
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: ε so large that sums drift"
CAUGHT_BY = ("constraints.h_res_exact_axis",)
EPS = 1e-3


class LargeEps(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        m = torch.exp(logits - logits.amax(dim=(-2, -1), keepdim=True))
        for _ in range(self.sinkhorn_iterations):
            m = m / (m.sum(dim=-2, keepdim=True) + EPS)
            m = m / (m.sum(dim=-1, keepdim=True) + EPS)
        return m


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(LargeEps, n, d, layer_index, dtype, device, seed, mhc_conventions())
