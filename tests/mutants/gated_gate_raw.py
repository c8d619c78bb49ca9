"""Mutant: G = σ(U silu(D vec(X)/n)) from the raw streams X where Qwen4-exp gates from N(X).

Bug class: gated read/write (the gate computed from the raw streams instead of the normalised ones).
The module declares the published qwen4-exp layout and offers its tensors, but computes
another network from them.
Caught by: gated.read (the failure names this variant).
"""

from __future__ import annotations

import torch

from hcspec.formulas.gated import GatedFormula
from tests.mutants._gated import make_gated

BUG_CLASS = "gated: the gate computed from the raw streams instead of the normalised ones"
CAUGHT_BY = ("gated.read",)
FORMULA = GatedFormula(gate_input="raw")


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_gated(FORMULA, n, d, dtype, device, seed)
