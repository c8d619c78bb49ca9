"""Mutant: Sinkhorn–Knopp applied to an ``n×1`` slice of H̃_res and broadcast back to ``n×n``.

Bug class: Sinkhorn (public report #2). On an n×1 matrix the row step makes every entry 1, so
H_res is all ones: every output stream is the sum of the inputs and the state grows ×n per
layer.
Caught by: constraints.h_res_exact_axis and constraints.nonexpansive.
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: applied to an n×1 slice, H_res all ones (public report #2)"
CAUGHT_BY = ("constraints.h_res_exact_axis", "constraints.nonexpansive")


class ColumnSlice(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        log_m = logits[..., :1]  # [..., n, 1]: meant logits[..., :, :]
        for _ in range(self.sinkhorn_iterations):
            log_m = log_m - torch.logsumexp(log_m, dim=-2, keepdim=True)
            log_m = log_m - torch.logsumexp(log_m, dim=-1, keepdim=True)
        return log_m.exp().expand(logits.shape)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(ColumnSlice, n, d, layer_index, dtype, device, seed, mhc_conventions())
