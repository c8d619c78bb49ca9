"""Mutant: Sinkhorn–Knopp in the plain domain, ``M = exp(logits)`` then alternate divisions.

Bug class: Sinkhorn numerics. Correct for moderate logits, but exp overflows to inf for large
ones and inf/inf gives NaN (mHC needs the log domain or a max subtraction).
Caught by: constraints.extreme_logits.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions, mhc_logits

BUG_CLASS = "Sinkhorn: plain-domain exp overflows (public report #7)"
CAUGHT_BY = ("constraints.extreme_logits",)


def plain_sinkhorn(logits: torch.Tensor, iterations: int) -> torch.Tensor:
    m = torch.exp(logits)
    for _ in range(iterations):
        m = m / m.sum(dim=-2, keepdim=True)
        m = m / m.sum(dim=-1, keepdim=True)
    return m


class PlainDomain(ManifoldHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        pre, post, res = mhc_logits(self, x)
        return (torch.sigmoid(pre), 2 * torch.sigmoid(post),
                plain_sinkhorn(res, self.sinkhorn_iterations))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(PlainDomain, n, d, layer_index, dtype, device, seed, mhc_conventions())
