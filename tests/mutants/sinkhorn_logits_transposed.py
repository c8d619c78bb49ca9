"""Mutant: Sinkhorn–Knopp is applied to H̃_resᵀ — the logits read in the other orientation —
while ``logits(x)`` reports H̃_res in the row convention of ``weights``.

Bug class: orientation of the mixing matrix, as in the public reports Megatron-LM #4957, NeMo
Automodel #2154 and transformers #46172 (which index of H_res is the input stream and which
the output stream). The result is still doubly stochastic, rows exact, and forward and
``weights`` agree, so no property that sees only the weights can tell; at identical logits the
declared variant gives another matrix.
Caught by: variant.h_res (the message names "the declared variant applied to H̃ᵀ").
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: orientation — Sinkhorn–Knopp of H̃_resᵀ (Megatron-LM #4957)"
CAUGHT_BY = ("variant.h_res",)


class LogitsTransposed(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return sinkhorn_knopp(logits.transpose(-1, -2), self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(LogitsTransposed, n, d, layer_index, dtype, device, seed, mhc_conventions(20))
