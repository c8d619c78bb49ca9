"""Mutant: mHC with an orthostochastic ``H_res`` that takes the absolute values ``|Q|`` of the
Newton–Schulz factor instead of its squares ``Q ∘ Q``.

Bug class: constructions (issue #40). ``|Q|`` is non-negative and equals ``Q ∘ Q`` only where
``Q`` is a signed permutation (at the reference's init ``Q ≈ I``, so the output at init is
almost right); elsewhere a row of ``|Q|`` sums to its 1-norm, between 1 and ``√n`` for a unit
row: far outside the Newton–Schulz defect (spec ``constructions.orthostochastic_exact``).
Caught by: constraints.h_res_exact_axis (rows), constraints.h_res_other_axis (columns) and
variant.h_res (the declared construction at the target's logits).
"""

from __future__ import annotations

import torch

from hcspec.formulas.mhc import orthostochastic
from hcspec.reference.ortho import OrthoHyperConnection
from hcspec.reference.sinkhorn import working_precision
from hcspec.reference.targets import mhc_ortho

BUG_CLASS = "constructions: orthostochastic H_res as |Q| instead of Q∘Q (issue #40)"
CAUGHT_BY = ("constraints.h_res_exact_axis", "constraints.h_res_other_axis", "variant.h_res")


class _AbsOrtho(OrthoHyperConnection):
    def _weights(self, x: torch.Tensor):  # type: ignore[no-untyped-def]
        pre, post, res = self.logits(x)
        # Q ∘ Q computed right, then its square root: |Q| entrywise
        H = orthostochastic(working_precision(res), self.iterations).sqrt().to(res.dtype)
        return torch.sigmoid(pre), 2.0 * torch.sigmoid(post), H


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    module = mhc_ortho(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)
    module.__class__ = _AbsOrtho
    return module
