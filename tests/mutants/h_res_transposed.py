"""Mutant: mixes with H_resᵀ instead of H_res, while ``weights`` reports H_res.

Bug class: layout (orientation of the mixing matrix; HC's A_r is H_resᵀ in the row form, an
easy transpose to get wrong). At the static init H_res = I hides it; the kit's perturbed cases
expose it.
Caught by: law.reported (the output disagrees with the reported weights) and
law.reported_matches_probed.
"""

from __future__ import annotations

import torch

from hcspec.reference import StaticHyperConnection, apply_connection
from tests.mutants._base import build

BUG_CLASS = "layout: H_resᵀ for H_res"
CAUGHT_BY = ("law.reported", "law.reported_matches_probed")


class TransposedMixing(StaticHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        h_pre, h_post, H_res = self.weights(x)
        return apply_connection(x, branch, h_pre, h_post, H_res.transpose(-1, -2))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(TransposedMixing, n, d, layer_index, dtype, device, seed)
