"""Mutant: H_pre = tanh(H̃_pre) in place of σ(H̃_pre) (mHC Eq. 8).

Bug class: ranges (H_pre allowed negative). tanh is HC's dynamic activation, so the mix-up is
natural; mHC needs H_pre ≥ 0 so that the read is a non-negative combination of the streams.
Caught by: constraints.h_pre_range.
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions, mhc_logits

BUG_CLASS = "ranges: H_pre = tanh, allowed negative"
CAUGHT_BY = ("constraints.h_pre_range",)


class TanhPre(MHCWithProjection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        pre, post, res = mhc_logits(self, x)
        return (torch.tanh(pre), 2 * torch.sigmoid(post),
                sinkhorn_knopp(res, self.sinkhorn_iterations))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(TanhPre, n, d, layer_index, dtype, device, seed, mhc_conventions())
