"""Mutant: mHC with a "sharpening" temperature τ = 1e-3 on the H_res logits,
``H_res = SinkhornKnopp(H̃_res / τ)``.

Bug class: gradients (public report #9: a temperature/init combination whose gradient is
exactly zero). With the init bias on the diagonal the logits are ~2000 apart, exp underflows
to exactly 0 off the diagonal, H_res is exactly I and every gradient through it is exactly 0:
H_res never leaves the identity in training. The law, the constraints and finite differences
all hold (0 = 0).
Caught by: gradients.mixing_trainable.
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "gradients: temperature/init with an exactly zero gradient (public report #9)"
CAUGHT_BY = ("gradients.mixing_trainable",)
TEMPERATURE = 1e-3


class Sharpened(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return sinkhorn_knopp(logits / TEMPERATURE, self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Sharpened, n, d, layer_index, dtype, device, seed, mhc_conventions())
