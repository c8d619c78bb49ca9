"""Mutant: a stack that declares DeepSeek-V4.1's design (``pre_mix_from = "previous_input"``:
sublayer k reads with the pre-mix sublayer k − 1 computed from *its* input) carries instead the
pre-mix sublayer k − 1 computes from the state it has just written — the own-input rule applied
with the wrong sublayer's parameters (a fused kernel that computes the pre to carry at the end
of the sublayer, as the reference's single pass does, in a model that reads with the previous
input's). Sublayer 0 reads with the declared ``e_0`` and every sublayer alone is right;
``weights`` reports what was used.

Bug class: stack (a carried pre-mix stale after the streams change, under the previous-input
design). Caught by: stack.carried_matches_recomputed (sublayer 1's h_pre differs from
sublayer(0).weights(…).h_pre on the state entering sublayer 0).
"""

from __future__ import annotations

import torch

from tests.mutants._stack import PreviousInputStack, make_stacked

BUG_CLASS = "stack: carried pre-mix computed from the new state under the previous-input design"
CAUGHT_BY = ("stack.carried_matches_recomputed",)


class NewStatePreStack(PreviousInputStack):
    def _next_pre(self, k: int, written: torch.Tensor, own_pre: torch.Tensor) -> torch.Tensor:
        del own_pre
        return self.sublayer(k).weights(written)[0]  # the state it just wrote, not its input


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_stacked(NewStatePreStack, n, d, layer_index, dtype, device, seed)
