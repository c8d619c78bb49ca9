"""Mutant: calls the branch with the tokens folded into the batch, ``[B·T, d]``, where the
protocol (and any attention sublayer) needs ``[B, T, d]``.

Bug class: sublayer (public report #3). A token-wise FFN cannot tell; an attention branch
would attend over a batch of one-token sequences. The kit's branch refuses a rank other than 3.
Caught by: shape.output and shape.branch_once.
"""

from __future__ import annotations

import torch

from hcspec.reference import StaticHyperConnection
from tests.mutants._base import build

BUG_CLASS = "sublayer: branch receives [B·T, d] (public report #3)"
CAUGHT_BY = ("shape.output", "shape.branch_once")


class FoldedTokens(StaticHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        batch, tokens, _n, d = x.shape
        h_pre, h_post, H_res = self.weights(x)
        x_in = (h_pre.unsqueeze(-2) @ x).squeeze(-2)
        z = branch(x_in.reshape(batch * tokens, d)).reshape(batch, tokens, d)
        return H_res @ x + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(FoldedTokens, n, d, layer_index, dtype, device, seed)
