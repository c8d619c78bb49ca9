"""Mutant: the adapter believes the state is ``[B, n, T, d]`` (streams before tokens) and
reinterprets the kit's ``[B, T, n, d]`` with ``reshape`` instead of moving the axis.

Bug class: layout (streams on the wrong axis). With T = 1 the two layouts coincide; with T ≥ 2
each token's "streams" are pieces of several tokens, so tokens leak into each other and the
output is no longer a per-token mix of the token's own streams.
Caught by: independence.token and law.probed.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "layout: streams on the wrong axis"
CAUGHT_BY = ("independence.token", "law.probed")


class WrongAxis(ManifoldHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        batch, tokens, n, d = x.shape
        theirs = x.reshape(batch, n, tokens, d)  # wrong: a reinterpretation, not a permute
        out = super().forward(theirs.permute(0, 2, 1, 3), branch)
        return out.permute(0, 2, 1, 3).reshape(batch, tokens, n, d)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(WrongAxis, n, d, layer_index, dtype, device, seed, mhc_conventions())
