"""Mutant: data-dependent Python control flow in forward — a "safety" rescale taken only when
``float(x.abs().max())`` exceeds a threshold, so the branch of the Python ``if`` depends on the
tensor's values.

Bug class: compile (public report #12). Eager results are correct, but
``torch.compile(fullgraph=True)`` cannot trace a Python ``if`` on a tensor value (a graph
break), so the layer cannot be compiled as one graph.
Caught by: compile.fullgraph.
"""

from __future__ import annotations

import torch

from hcspec.reference import DynamicHyperConnection
from tests.mutants._base import build

BUG_CLASS = "compile: data-dependent Python control flow (public report #12)"
CAUGHT_BY = ("compile.fullgraph",)
THRESHOLD = 1e30


class ValueBranching(DynamicHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        if float(x.detach().abs().max()) > THRESHOLD:  # never true at the kit's magnitudes
            return super().forward(x / THRESHOLD, branch) * THRESHOLD
        return super().forward(x, branch)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(ValueBranching, n, d, layer_index, dtype, device, seed)
