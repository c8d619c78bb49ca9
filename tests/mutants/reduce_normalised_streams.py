"""Mutant: ``reduce`` applies the network's final RMS norm to every stream and then sums —
the final norm moved from after the reduction to before it.

Bug class: layout (public report #11: reduce before vs after the final norm). ``Σ_i Norm(X_i)``
is not ``Norm(Σ_i X_i)``: streams of different size get equal say, and the scale changes.
Caught by: conventions.reduce_scale.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "layout: final norm applied per stream before the reduce (public report #11)"
CAUGHT_BY = ("conventions.reduce_scale",)


class NormThenSum(ManifoldHyperConnection):
    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (self.d,), eps=1e-6).sum(dim=-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(NormThenSum, n, d, layer_index, dtype, device, seed, mhc_conventions())
