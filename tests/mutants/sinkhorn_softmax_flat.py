"""Mutant: a softmax over all n² entries of H̃_res in place of Sinkhorn–Knopp.

Bug class: Sinkhorn (softmax in place of Sinkhorn). Non-negative and summing to 1 overall, so
a check of ``H ≥ 0`` and ``ΣH = 1`` passes; each row sums to about 1/n, so the mixing shrinks
the state n-fold per layer.
Caught by: constraints.h_res_exact_axis and constraints.stream_sum_preserved.
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: softmax over all n² entries in place of Sinkhorn"
CAUGHT_BY = ("constraints.h_res_exact_axis", "constraints.stream_sum_preserved")


class FlatSoftmax(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits.flatten(-2), dim=-1).reshape(logits.shape)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(FlatSoftmax, n, d, layer_index, dtype, device, seed, mhc_conventions())
