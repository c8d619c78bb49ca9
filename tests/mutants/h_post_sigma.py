"""Mutant: H_post = σ(H̃_post) instead of 2σ(H̃_post) (mHC Eq. 8), consistently in forward and
weights.

Bug class: ranges. Still inside [0, 2], so a range check alone passes; the write-back can never
exceed 1 (half of HC's B = 1 init), which the span property detects.
Caught by: constraints.h_post_span.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection, sinkhorn_knopp
from tests.mutants._base import build, mhc_conventions, mhc_logits

BUG_CLASS = "ranges: H_post = σ, not 2σ (public report #5)"
CAUGHT_BY = ("constraints.h_post_span",)


class SigmaPost(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        pre, post, res = mhc_logits(self, x)
        return (torch.sigmoid(pre), torch.sigmoid(post),
                sinkhorn_knopp(res, self.sinkhorn_iterations))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(SigmaPost, n, d, layer_index, dtype, device, seed, mhc_conventions())
