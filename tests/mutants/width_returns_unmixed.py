"""Mutant: the width connection returns the streams from *before* mixing,
``X' = X + h_post zᵀ``: H_res is computed, reported and trained, but has no effect.

Bug class: layout (public report #1; lived a year in a popular package). At the static init
H_res = I, so nothing at init shows it. The kit's recipe: n = 4, d = 8, B = 1, T = 3, stream i
constant i + 1, H_res steered to a cyclic permutation, branch ≡ 0 — the streams must come out
permuted, and here they come out unchanged.
Caught by: law.permutation_mixing, law.reported and gradients.mixing_trainable.
"""

from __future__ import annotations

import torch

from hcspec.reference import StaticHyperConnection
from tests.mutants._base import build

BUG_CLASS = "layout: width connection returns pre-mixing streams (public report #1)"
CAUGHT_BY = ("law.permutation_mixing", "law.reported", "gradients.mixing_trainable")


class Unmixed(StaticHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        h_pre, h_post, _ = self.weights(x)
        z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
        return x + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Unmixed, n, d, layer_index, dtype, device, seed)
