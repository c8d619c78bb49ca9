"""Mutant: streams folded into the batch as ``[B·n, T, d]`` (b-major, as many packages store
them), but the impl splits the folded axis back as ``[n, B]`` instead of ``[B, n]``.

Bug class: layout. With B = 1 the two orders agree; with B ≥ 2 each batch element's "streams"
are taken from several batch elements, so elements leak into each other.
Caught by: independence.batch (and the law properties).
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "layout: streams folded into the batch as [n·B] vs [B·n]"
CAUGHT_BY = ("independence.batch",)


class WrongUnfold(ManifoldHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        batch, tokens, n, d = x.shape
        folded = x.permute(0, 2, 1, 3).reshape(batch * n, tokens, d)  # correct fold: [B·n]
        streams = folded.reshape(n, batch, tokens, d).permute(1, 2, 0, 3)  # wrong: [n, B]
        out = super().forward(streams, branch)
        refolded = out.permute(2, 0, 1, 3).reshape(batch * n, tokens, d)  # same wrong order
        return refolded.reshape(batch, n, tokens, d).permute(0, 2, 1, 3)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(WrongUnfold, n, d, layer_index, dtype, device, seed, mhc_conventions())
