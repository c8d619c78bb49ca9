"""Mutant: in the single pass, the coefficients and pre-mix carried into sublayer k ≥ 1 are
computed from the state *entering* sublayer k − 1 — before its update — instead of the state
it has just written (a fused kernel that reads its input buffer once and computes the next
pre-mix from it); ``weights`` reports what was used.

Bug class: stack (a carried pre-mix stale after the streams change).
Caught by: stack.carried_matches_recomputed (sublayer 1's coefficients differ from
sublayer(1).weights on the state entering it) and stack.unrolled_weights (sublayer 1 reads the
old streams, not the unrolled combination of h₀ and z₀ that its reported h_pre gives).
"""

from __future__ import annotations

import torch

from hcspec.reference import Weights
from hcspec.reference.connection import read
from hcspec.reference.stack import HyperConnectionStack
from tests.mutants._stack import make_stacked

BUG_CLASS = "stack: carried pre-mix stale after the streams change"
CAUGHT_BY = ("stack.carried_matches_recomputed", "stack.unrolled_weights")


class StaleStack(HyperConnectionStack):
    def _pre_mix(self, k: int, x: torch.Tensor) -> tuple[Weights, torch.Tensor]:
        # the state entering the previous sublayer (x itself for sublayer 0)
        stale = x if k == 0 else self._entering
        self._entering = x
        weights = self.sublayer(k).weights(stale)
        return weights, read(stale, weights[0])


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_stacked(StaleStack, n, d, layer_index, dtype, device, seed)
