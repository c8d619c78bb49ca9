"""Mutant: runs 19 Sinkhorn–Knopp rounds while declaring the paper's 20 (a loop bound off by
one: ``range(iters - 1)`` where ``range(iters)`` was meant, the slip of a kernel that peels
its first round).

Bug class: Sinkhorn (one round fewer than declared). Rows stay exact (the last step), and the
column error of 19 rounds lies inside the Birkhoff–Hopf bound for 20, so no constraint sees it;
at identical logits the declared 20 rounds give another matrix: in float64 at the kit's
perturbed cases (perturb 1.0, n = 4) H_res moves by 2.5e-6 against the law's 2.2e-11, and by
1e-3 to 4e-3 where Sinkhorn–Knopp converges slowly (logit spread ≳ 3; 2.6e-3 at variant.SLOW).
Judged in bfloat16 (8 × 2⁻⁸ = 0.031) it would show only at the most spread logits (0.17 at
parameters ×4, n = 4); docs/conformance.md, the variant family, has the figures.
Caught by: variant.h_res (the message names "19 rounds, not the declared 20").
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: one round short (19 run, 20 declared)"
CAUGHT_BY = ("variant.h_res",)
DECLARED_ROUNDS = 20


class OneRoundShort(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return sinkhorn_knopp(logits, DECLARED_ROUNDS - 1)  # meant: DECLARED_ROUNDS


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(OneRoundShort, n, d, layer_index, dtype, device, seed,
                 mhc_conventions(DECLARED_ROUNDS))
