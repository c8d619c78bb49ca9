"""Mutant: a Sinkhorn–Knopp whose path for n > 4 (a second kernel, as tiled implementations
have for wider matrices) runs 2 rounds while 20 are declared; n ≤ 4 is correct.

Bug class: Sinkhorn (a normalisation wrong only for n > 4, and only at logit spreads where 2
rounds have not converged). The constraint family's random cases rarely reach n > 4, and the
scale family's n = 8 cases sat at init, where H_res is nearly the identity and 2 rounds
converge; the scale family's perturbed cases at every expansion rate it runs expose it.
Caught by: scale.constraints.
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: too few rounds only on the path for n > 4"
CAUGHT_BY = ("scale.constraints",)


class FewRoundsAboveFour(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        rounds = 2 if logits.shape[-1] > 4 else self.sinkhorn_iterations
        return sinkhorn_knopp(logits, rounds)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(FewRoundsAboveFour, n, d, layer_index, dtype, device, seed, mhc_conventions(20))
