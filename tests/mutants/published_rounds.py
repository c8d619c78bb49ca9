"""Mutant: after the softmax, sinkhorn_iters full (axis -1, axis -2) rounds where
DeepSeek-V4 does one axis -2 normalisation and sinkhorn_iters - 1 rounds.

Bug class: published parameterization (the rounds). The module declares
DeepSeek-V4's published layout and offers its tensors (hc_fn, hc_scale, hc_base), but
computes another network from them.
Caught by: published.step (the failure names this divergence).
"""

from __future__ import annotations

import dataclasses

import torch

from hcspec.reference.published import Formula
from tests.mutants._published import make_divergent

BUG_CLASS = "published: rounds: a full round after the softmax"
CAUGHT_BY = ("published.step",)


def departure(f: Formula) -> Formula:
    """The published record with this mutant's change."""
    return dataclasses.replace(f, sinkhorn=dataclasses.replace(f.sinkhorn, count="rounds"))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_divergent(departure, n, d, layer_index, dtype, device, seed)
