"""Mutant: in the single pass, the mixing matrix carried into sublayer k ≥ 1 is a softmax over
each row of its logits — row-stochastic, not doubly stochastic (a fused kernel that skips the
Sinkhorn–Knopp rounds of the next sublayer) — while sublayer 0 and every sublayer alone are
right; ``weights`` reports what was used.

Bug class: stack (the carried H_res leaves the Birkhoff polytope): the columns no longer sum to
1, so the stream sum drifts from sublayer 1 on.
Caught by: stack.stream_sum_preserved (after sublayers 0 … 1) and
stack.carried_matches_recomputed (sublayer 1's H_res).
"""

from __future__ import annotations

import torch

from hcspec.reference import Weights
from hcspec.reference.connection import read
from hcspec.reference.manifold import ManifoldHyperConnection
from hcspec.reference.stack import HyperConnectionStack
from tests.mutants._stack import make_stacked

BUG_CLASS = "stack: carried H_res only row-normalised"
CAUGHT_BY = ("stack.stream_sum_preserved", "stack.carried_matches_recomputed")


class RowsOnlyStack(HyperConnectionStack):
    def _pre_mix(self, k: int, x: torch.Tensor) -> tuple[Weights, torch.Tensor]:
        sub = self.sublayer(k)
        h_pre, h_post, H_res = sub.weights(x)
        if k > 0:
            assert isinstance(sub, ManifoldHyperConnection)
            H_res = torch.softmax(sub.logits(x)[2], dim=-1)
        return (h_pre, h_post, H_res), read(x, h_pre)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_stacked(RowsOnlyStack, n, d, layer_index, dtype, device, seed)
