"""Mutant: writes the new state into the input tensor (an in-place "memory optimisation") when
autograd is not tracking it, and returns it.

Bug class: state. The caller's tensor — often still needed, e.g. as another sublayer's input
or for a residual comparison — silently changes.
Caught by: state.input_unchanged.
"""

from __future__ import annotations

import torch

from hcspec.reference import DynamicHyperConnection
from tests.mutants._base import build

BUG_CLASS = "state: input modified in place"
CAUGHT_BY = ("state.input_unchanged",)


class InPlace(DynamicHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        out = super().forward(x, branch)
        if x.requires_grad or not torch.is_grad_enabled() or not out.requires_grad:
            return out
        with torch.no_grad():
            x.copy_(out)
        return x


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(InPlace, n, d, layer_index, dtype, device, seed)
