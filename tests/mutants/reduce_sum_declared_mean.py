"""Mutant: the adapter declares ``reduce="mean"`` but ``reduce`` sums the streams.

Bug class: layout (reduce by sum where the impl documents mean: n× too large at the head).
Caught by: conventions.reduce_scale.
"""

from __future__ import annotations

import torch

from hcspec.conformance.protocol import Conventions
from hcspec.reference import StaticHyperConnection
from tests.mutants._base import build

BUG_CLASS = "layout: reduce by sum where mean is declared"
CAUGHT_BY = ("conventions.reduce_scale",)

DECLARED = Conventions(reduce="mean", notes="declares mean; reduce sums (mutant)")


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(StaticHyperConnection, n, d, layer_index, dtype, device, seed, DECLARED)
