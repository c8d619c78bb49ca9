"""Mutant: ``reduce`` averages the streams while the adapter declares (and HC specifies) the sum
``h_L = 1ᵀ X_L``.

Bug class: layout (reduce by mean where the impl documents sum; public report #11: an n× scale
at the head).
Caught by: conventions.reduce_scale.
"""

from __future__ import annotations

import torch

from hcspec.reference import DynamicHyperConnection
from tests.mutants._base import build

BUG_CLASS = "layout: reduce by mean where sum is declared (public report #11)"
CAUGHT_BY = ("conventions.reduce_scale",)


class MeanReduce(DynamicHyperConnection):
    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(MeanReduce, n, d, layer_index, dtype, device, seed)
