"""Mutant: runs Sinkhorn–Knopp in bfloat16 ("it is only a 4×4 matrix") and casts the result back
to the input dtype.

Bug class: Sinkhorn / dtype (public report #8: the constraint error is ~4e-3 where float32
gives ~1e-7 and float64 ~1e-16).
Caught by: constraints.h_res_exact_axis.
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: computed in bfloat16 (public report #8)"
CAUGHT_BY = ("constraints.h_res_exact_axis",)


class BFloat16Sinkhorn(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        log_m = logits.to(torch.bfloat16)
        for _ in range(self.sinkhorn_iterations):
            log_m = log_m - torch.logsumexp(log_m, dim=-2, keepdim=True)
            log_m = log_m - torch.logsumexp(log_m, dim=-1, keepdim=True)
        return log_m.exp().to(logits.dtype)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(BFloat16Sinkhorn, n, d, layer_index, dtype, device, seed, mhc_conventions())
