"""Mutant: declares DeepSeek-V4's Sinkhorn–Knopp eps (``sinkhorn_denominator_eps = 1e-6``)
but divides by ``sum + 1e-4``: every normalised sum is ``s/(s + 1e-4)``, so the rows miss 1
by about 1e-4, fifty times the 2δ = 2e-6 that the declared eps allows.

Bug class: Sinkhorn (sums drift by more than the declared eps implies). A correct impl with
the declared δ = 1e-6 misses by about 1e-6 and passes.
Caught by: constraints.h_res_exact_axis.
"""

from __future__ import annotations

import dataclasses

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: sums drift beyond the declared denominator eps"
CAUGHT_BY = ("constraints.h_res_exact_axis",)
DECLARED, USED = 1e-6, 1e-4


class EpsBeyondDeclared(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        m = torch.exp(logits - logits.amax(dim=(-2, -1), keepdim=True))
        for _ in range(self.sinkhorn_iterations):
            m = m / (m.sum(dim=-2, keepdim=True) + USED)
            m = m / (m.sum(dim=-1, keepdim=True) + USED)
        return m


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    conventions = dataclasses.replace(mhc_conventions(), sinkhorn_denominator_eps=DECLARED)
    return build(EpsBeyondDeclared, n, d, layer_index, dtype, device, seed, conventions)
