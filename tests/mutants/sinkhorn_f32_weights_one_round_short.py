"""Mutant: a DeepSeek-V4-style sublayer as serving engines run it (float32 parameters and
coefficients, bfloat16 residual state and output; SGLang's Triton Sinkhorn port hands its
float32 comb to the mixing unrounded) that runs 19 Sinkhorn–Knopp rounds while declaring 20
(the loop bound of a kernel that peels its first round, off by one), and reports its weights
in float32 with their logits, declaring ``weights_dtype=float32``.

Bug class: Sinkhorn (one round fewer than declared) in production precision. The rows stay
inside the Birkhoff–Hopf bound for 20 rounds, and the output moves by less than bfloat16's
budget, so only a comparison of the float32 comb with the declared 20 rounds at the target's
own logits sees it: at the kit's perturbed cases (logit spread ≈ 5 at n = 4) 19 rounds move
H_res by ~1e-3 against the float32 law's 3e-5. Judged in bfloat16 (the weights rounded to the
state's dtype, 8 × 2⁻⁸ = 0.031) it survives: one bfloat16 ulp at the kit's cases, and at most
0.008 at n = 4 over the logits a local search tried (docs/conformance.md, the variant family).
Caught by: variant.h_res (the message names "19 rounds_from_softmax, not the declared 20").
"""

from __future__ import annotations

from typing import Any

import torch

from tests.mutants._v4_serving import DECLARED_ROUNDS, ServingV4
from tests.mutants._v4_serving import make as _make

BUG_CLASS = ("Sinkhorn: one round short (19 run, 20 declared) in a float32-coefficient, "
             "bfloat16-state DeepSeek-V4 target")
CAUGHT_BY = ("variant.h_res",)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> Any:
    return _make(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed,
                 rounds=DECLARED_ROUNDS - 1, float32_weights=True)


def make_declared(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                  device: str = "cpu", seed: int = 0) -> ServingV4:
    """The same target running the declared 20 rounds (the control: variant.h_res passes)."""
    return _make(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed,
                 float32_weights=True)
