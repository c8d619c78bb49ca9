"""Mutant: a DeepSeek-V4-style sublayer as serving engines run it (float32 parameters and
weights inside, bfloat16 residual state and output) that runs 2 Sinkhorn–Knopp rounds while
declaring 20, and offers no ``logits``.

Bug class: Sinkhorn (too few iterations) in production precision. Without ``logits`` only the
sums of H_res show it: its exact (column) axis stays normalised, its rows are off by the
truncation. Judged against bfloat16's own budget (16·(n + 1)·eps = 0.625 at n = 4, the law's
256·eps = 2.0 on the stream sum) it passed every property; along the declared dtype chain
(float32 Sinkhorn–Knopp, bfloat16 rounding of the reported weights and the output) the rows
are allowed a few bfloat16 ulps beyond the Birkhoff–Hopf bound for 20 rounds.
Caught by: constraints.h_res_other_axis.
"""

from __future__ import annotations

import torch

from tests.mutants._v4_serving import ServingV4
from tests.mutants._v4_serving import make as _make

BUG_CLASS = ("Sinkhorn: too few iterations (2 run, 20 declared) in a bfloat16-state "
             "DeepSeek-V4 target")
CAUGHT_BY = ("constraints.h_res_other_axis",)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> ServingV4:
    return _make(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed, rounds=2)
