"""Mutant: plain-domain Sinkhorn–Knopp that guards against overflow by subtracting the
*matrix-wide* maximum before ``exp`` and against division by zero with a tiny ε.

Bug class: Sinkhorn (public report #7: exp underflow gives an all-zero row or column). Fine at
moderate logits; once one logit is ~750 above a whole row, that row underflows to exactly 0
and stays 0 (0/ε): a stream is silently dropped from the mixing.
Caught by: constraints.extreme_logits.
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: exp underflow drops a stream (public report #7)"
CAUGHT_BY = ("constraints.extreme_logits",)
TINY = 1e-30


class Underflow(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        m = torch.exp(logits - logits.amax(dim=(-2, -1), keepdim=True))
        for _ in range(self.sinkhorn_iterations):
            m = m / (m.sum(dim=-2, keepdim=True) + TINY)
            m = m / (m.sum(dim=-1, keepdim=True) + TINY)
        return m


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Underflow, n, d, layer_index, dtype, device, seed, mhc_conventions())
