"""Mutant: reads the streams with h_post and writes the branch output back with h_pre (the two
n-vectors swapped in forward), while ``weights`` reports them correctly.

Bug class: layout. HC's ``A_m`` (read, n×1) and ``B`` (write, 1×n) have transposed shapes in the
paper's matrix, so a mix-up type-checks once both are flattened to n-vectors.
Caught by: law.reported and law.reported_matches_probed.
"""

from __future__ import annotations

import torch

from hcspec.reference import DynamicHyperConnection, apply_connection
from tests.mutants._base import build

BUG_CLASS = "layout: h_pre and h_post swapped"
CAUGHT_BY = ("law.reported", "law.reported_matches_probed")


class Swapped(DynamicHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        h_pre, h_post, H_res = self.weights(x)
        return apply_connection(x, branch, h_post, h_pre, H_res)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Swapped, n, d, layer_index, dtype, device, seed)
