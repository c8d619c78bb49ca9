"""Mutant: "Sinkhorn" that only normalises columns (a softmax over the column axis).

Bug class: Sinkhorn (columns only). Columns sum to 1, rows do not, so ``H_res 1 ≠ 1``: the axis
the kit expects exact after column-then-row rounds is off.
Caught by: constraints.h_res_exact_axis.
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: columns only"
CAUGHT_BY = ("constraints.h_res_exact_axis",)


class ColumnsOnly(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits, dim=-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(ColumnsOnly, n, d, layer_index, dtype, device, seed, mhc_conventions())
