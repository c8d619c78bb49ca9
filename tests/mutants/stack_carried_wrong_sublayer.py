"""Mutant: in the single pass, the coefficients carried into sublayer k ≥ 1 are computed with
sublayer k − 1's parameters (the fused kernel at the end of sublayer k − 1 reads its own
projection φ instead of the next sublayer's), from the right state; ``weights`` reports what
was used.

Bug class: stack (a carried coefficient from the wrong sublayer). Sublayer 0 and every
sublayer alone are right, so only a stack can show it.
Caught by: stack.carried_matches_recomputed (sublayer 1's h_pre differs from
sublayer(1).weights on its input).
"""

from __future__ import annotations

import torch

from hcspec.reference import Weights
from hcspec.reference.connection import read
from hcspec.reference.stack import HyperConnectionStack
from tests.mutants._stack import make_stacked

BUG_CLASS = "stack: carried coefficient from the wrong sublayer"
CAUGHT_BY = ("stack.carried_matches_recomputed",)


class WrongSublayerStack(HyperConnectionStack):
    def _pre_mix(self, k: int, x: torch.Tensor) -> tuple[Weights, torch.Tensor]:
        weights = self.sublayer(max(k - 1, 0)).weights(x)
        return weights, read(x, weights[0])


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_stacked(WrongSublayerStack, n, d, layer_index, dtype, device, seed)
