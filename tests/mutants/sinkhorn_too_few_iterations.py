"""Mutant: runs 3 Sinkhorn–Knopp rounds while declaring the paper's 20.

Bug class: Sinkhorn (too few iterations for the tolerance). Rows stay exact (the last step);
the column error of 3 rounds exceeds the Birkhoff–Hopf bound for 20 rounds at moderate logits.
Caught by: constraints.h_res_other_axis.
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: too few iterations (3 run, 20 declared)"
CAUGHT_BY = ("constraints.h_res_other_axis",)


class ThreeRounds(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return sinkhorn_knopp(logits, 3)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(ThreeRounds, n, d, layer_index, dtype, device, seed, mhc_conventions(20))
