"""Mutant: H_post = 2σ(α_post·(x'φ_post)) + b_post — the static bias added outside the sigmoid
instead of inside it (mHC Eq. 7–8 put b inside).

Bug class: ranges (public report #5: H_post = 2σ(dynamic)·scale + static is unbounded once the
parameters leave the init; seen from −3 to 5). At init b_post = 0 and H_post ∈ (0, 2).
Caught by: constraints.h_post_range.
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions, mhc_logits

BUG_CLASS = "ranges: H_post = 2σ(dynamic) + static, unbounded (public report #5)"
CAUGHT_BY = ("constraints.h_post_range",)


class BiasOutside(MHCWithProjection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        pre, post, res = mhc_logits(self, x)
        h_post = 2 * torch.sigmoid(post - self.b_post) + self.b_post
        return (torch.sigmoid(pre), h_post, sinkhorn_knopp(res, self.sinkhorn_iterations))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(BiasOutside, n, d, layer_index, dtype, device, seed, mhc_conventions())
