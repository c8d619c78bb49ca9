"""Mutant: accepts ``sinkhorn_iterations=0`` silently, so H_res is ``exp(H̃_res)`` with no
normalisation at all.

Bug class: Sinkhorn (public report #6: zero iterations accepted, unnormalised result). The
matrix is positive, so a non-negativity check passes; its rows sum to anything.
Caught by: constraints.h_res_exact_axis.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: zero iterations accepted silently (public report #6)"
CAUGHT_BY = ("constraints.h_res_exact_axis",)


class ZeroRounds(MHCWithProjection):
    def __init__(self, n: int, d: int, layer_index: int = 0, **kwargs):  # type: ignore[no-untyped-def]
        ManifoldHyperConnection.__init__(self, n, d, layer_index, **kwargs)
        self.rounds_run = 0  # a config loader's 0, past the constructor's check (reports 20)

    def project(self, logits: torch.Tensor) -> torch.Tensor:
        log_m = logits
        for _ in range(self.rounds_run):
            log_m = log_m - torch.logsumexp(log_m, dim=-2, keepdim=True)
            log_m = log_m - torch.logsumexp(log_m, dim=-1, keepdim=True)
        return log_m.exp()


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(ZeroRounds, n, d, layer_index, dtype, device, seed, mhc_conventions(None))
