"""Mutant: mixes with comb X where DeepSeek-V4 mixes combᵀ X
(transformers 5.8.0, nano-deepseek-v4 0.2.0).

Bug class: published parameterization (orientation). The module declares
DeepSeek-V4's published layout and offers its tensors (hc_fn, hc_scale, hc_base), but
computes another network from them.
Caught by: published.step (the failure names this divergence).
"""

from __future__ import annotations

import dataclasses

import torch

from hcspec.reference.published import Formula
from tests.mutants._published import make_divergent

BUG_CLASS = "published: orientation, comb X for combᵀ X"
CAUGHT_BY = ("published.step",)


def departure(f: Formula) -> Formula:
    """The published record with this mutant's change."""
    return dataclasses.replace(f, transposed=False)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_divergent(departure, n, d, layer_index, dtype, device, seed)
