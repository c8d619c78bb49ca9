"""Mutant: starts Sinkhorn–Knopp from DeepSeek-V4's ``softmax(H̃_res) + ε`` (ε = 1e-6, the
softmax counted as the first normalisation) while declaring the mHC paper's exp-first variant.

Bug class: a Sinkhorn variant mislabelled (the public DeepSeek-V4 code starts from a softmax
plus an additive ε, the mHC paper from exp; ports copy one and document the other). Only the
additive ε is kept, so the rows stay exactly normalised and the matrix is doubly stochastic
within the declared rounds' bound: no constraint sees it. At identical logits it differs from
the declared exp-first variant by O(ε).
Caught by: variant.h_res (the message names "the softmax-first variant, not the declared
exp-first").
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: DeepSeek-V4 softmax + ε start declared as the paper's exp"
CAUGHT_BY = ("variant.h_res",)
EPS = 1e-6


class SoftmaxEpsStart(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        m = torch.softmax(logits, dim=-2) + EPS  # the column step of the first round
        m = m / m.sum(dim=-1, keepdim=True)
        for _ in range(self.sinkhorn_iterations - 1):
            m = m / m.sum(dim=-2, keepdim=True)
            m = m / m.sum(dim=-1, keepdim=True)
        return m


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(SoftmaxEpsStart, n, d, layer_index, dtype, device, seed, mhc_conventions(20))
