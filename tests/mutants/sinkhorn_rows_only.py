"""Mutant: "Sinkhorn" that only normalises rows (a row softmax of the logits).

Bug class: Sinkhorn. Rows sum to 1 exactly, columns do not: H_res is row-stochastic, not
doubly stochastic, so the stream sum is no longer preserved.
Caught by: constraints.h_res_other_axis.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions, mhc_logits

BUG_CLASS = "Sinkhorn: rows only (softmax over rows in place of Sinkhorn)"
CAUGHT_BY = ("constraints.h_res_other_axis",)


class RowsOnly(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        pre, post, res = mhc_logits(self, x)
        return torch.sigmoid(pre), 2 * torch.sigmoid(post), torch.softmax(res, dim=-1)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(RowsOnly, n, d, layer_index, dtype, device, seed, mhc_conventions())
