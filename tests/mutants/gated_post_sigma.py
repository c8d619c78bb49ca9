"""Mutant: h_post = σ(W vec(N)/n) where Qwen4-exp has 2σ(·).

Bug class: gated read/write (σ instead of 2σ in the write).
The module declares the published qwen4-exp layout and offers its tensors, but computes
another network from them.
Caught by: gated.write (the failure names this variant).
"""

from __future__ import annotations

import torch

from hcspec.formulas.gated import GatedFormula
from tests.mutants._gated import make_gated

BUG_CLASS = "gated: σ instead of 2σ in the write"
CAUGHT_BY = ("gated.write",)
FORMULA = GatedFormula(post_multiplier=1.0)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_gated(FORMULA, n, d, dtype, device, seed)
