"""Mutant: mHC with an orthostochastic ``H_res`` (``Q ∘ Q``, ``Q`` by Newton–Schulz
iterations of ``H̃_res``) that runs 9 iterations while it declares 10 (an off-by-one in the
loop).

Bug class: constructions (issue #40). ``H_res`` stays non-negative and its sums stay near 1,
but its factor's orthogonality defect ``‖QQᵀ − I‖₂`` is that of 9 steps: near convergence a
step takes the defect ``e`` to about ``0.75 e²``, so the sums miss 1 by orders of magnitude more
than the declared 10 steps allow at the target's own logits (spec
``constructions.orthostochastic_inexact``).
Caught by: constraints.h_res_exact_axis (the rows against the 10-step defect of the target's
logits) and variant.h_res (the declared construction applied to the target's logits).
"""

from __future__ import annotations

import torch

from hcspec.reference.targets import mhc_ortho

BUG_CLASS = "constructions: orthostochastic H_res with one Newton–Schulz step dropped (issue #40)"
CAUGHT_BY = ("constraints.h_res_exact_axis", "variant.h_res")


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return mhc_ortho(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed,
                     iterations=9)
