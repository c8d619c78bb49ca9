"""Mutant: G = tanh(U silu(D vec(N)/n)) where Qwen4-exp has σ: the gate leaves (0, 1).

Bug class: gated read/write (the gate's activation). The module declares the published
qwen4-exp layout, reports its own (consistent) element-wise read, and computes another network.
Caught by: gated.ranges (the gate recovered from the reported read is negative).
"""

from __future__ import annotations

import torch

from hcspec.formulas.gated import GatedFormula
from tests.mutants._gated import make_gated

BUG_CLASS = "gated: the gate's activation tanh, not σ (G outside (0, 1))"
CAUGHT_BY = ("gated.ranges",)
FORMULA = GatedFormula(gate_activation="tanh")


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_gated(FORMULA, n, d, dtype, device, seed)
