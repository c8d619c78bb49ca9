"""Mutant: mixes with comb X where DeepSeek-V4 mixes combᵀ X, but only at n ≥ 5 (a kernel
that picks another code path, and reads the tile transposed, past four streams).

Bug class: published parameterization at large expansion rates. Below n = 5 the module is
the published DeepSeek-V4 step; from n = 5 on its orientation is transposed. H_res stays
doubly stochastic and the module agrees with its own reported weights, so only a comparison
with the published formulas at n ≥ 5 shows it.
Caught by: published.step (its cases reach the profile's oracle_max_n).
"""

from __future__ import annotations

import dataclasses

import torch

from hcspec.reference.published import Formula
from tests.mutants._published import make_divergent

BUG_CLASS = "published: orientation transposed only at n >= 5"
CAUGHT_BY = ("published.step",)


def departure(f: Formula) -> Formula:
    """The published record read untransposed (``comb X``), used from n = 5 on."""
    return dataclasses.replace(f, transposed=False)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_divergent(departure if n >= 5 else None, n, d, layer_index, dtype, device, seed)
