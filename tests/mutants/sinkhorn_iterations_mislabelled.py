"""Mutant: the kernel runs a hard-coded 20 Sinkhorn–Knopp rounds while the module declares 10
(its configured ``sinkhorn_iterations``, which the kernel ignores).

Bug class: wrong iteration count (implementations disagree on t_max and on what one
"iteration" counts; a kernel with its own constant drifts from the configured value). More
rounds than declared keep every constraint inside its bound for the declared 10 rounds, so no
constraint sees it; at identical logits the declared 10 rounds give another matrix. (Fewer
rounds than declared — sinkhorn_too_few_iterations — the Birkhoff–Hopf bound of
constraints.h_res_other_axis catches first.)
Caught by: variant.h_res (the message names "20 rounds, not the declared 10 rounds").
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: 20 rounds run, 10 declared"
CAUGHT_BY = ("variant.h_res",)
KERNEL_ROUNDS = 20


class HardCodedRounds(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return sinkhorn_knopp(logits, KERNEL_ROUNDS)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    impl = build(HardCodedRounds, n, d, layer_index, dtype, device, seed, mhc_conventions(10))
    impl.sinkhorn_iterations = 10  # type: ignore[attr-defined]  # the configured, ignored value
    return impl
