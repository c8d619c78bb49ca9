"""Mutant: feeds the branch the concatenation of the n streams, ``[B, T, n·d]``, and keeps the
first d features of what comes back, instead of the aggregate ``x_in = h_preᵀ X [B, T, d]``.

Bug class: sublayer (branch fed the concatenation of streams; the sublayer runs
on a d-vector, never on an n·d concatenation). The kit's branch refuses an input whose last axis
is not d, so the failure names the shape it received.
Caught by: shape.output and shape.branch_once.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "sublayer: branch fed the concatenation of streams"
CAUGHT_BY = ("shape.output", "shape.branch_once")


class Concatenated(ManifoldHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        _h_pre, h_post, H_res = self.weights(x)
        z = branch(x.flatten(-2))[..., : self.d]
        return H_res @ x + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Concatenated, n, d, layer_index, dtype, device, seed, mhc_conventions())
