"""Mutant: the streams leak into each other, X' = X + 0.1 (roll_s(X) − X) + h_post F(x_in)ᵀ.

Bug class: gated read/write (H_res ≠ I). Qwen4-exp has no mixing matrix: each stream passes
unchanged. Caught by: gated.unmixed (with F ≡ 0, X' ≠ X).
"""

from __future__ import annotations

import torch

from hcspec.formulas import gated as formula
from tests.mutants._gated import _Divergent

BUG_CLASS = "gated: streams mixed (H_res ≠ I)"
CAUGHT_BY = ("gated.unmixed",)


class _Mixed(_Divergent):
    def forward(self, x: torch.Tensor, branch: formula.Branch) -> torch.Tensor:
        out = super().forward(x, branch)
        return out + 0.1 * (x.roll(1, dims=-2) - x)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = _Mixed(n, d)
    return module.to(dtype=dtype, device=device)
