"""Mutant: each Sinkhorn–Knopp round normalises the rows first and the columns last, while the
adapter declares the default (column then row, rows exact).

Bug class: Sinkhorn (public report #7: truncated Sinkhorn is exact only on the axis normalised
last). The columns come out exact and the rows carry the convergence error, so the declared
exact axis is not exact.
Caught by: constraints.h_res_exact_axis.
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: rows then columns while rows are declared exact (public report #7)"
CAUGHT_BY = ("constraints.h_res_exact_axis",)


class RowsFirst(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        log_m = logits
        for _ in range(self.sinkhorn_iterations):
            log_m = log_m - torch.logsumexp(log_m, dim=-1, keepdim=True)
            log_m = log_m - torch.logsumexp(log_m, dim=-2, keepdim=True)
        return log_m.exp()


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(RowsFirst, n, d, layer_index, dtype, device, seed, mhc_conventions())
