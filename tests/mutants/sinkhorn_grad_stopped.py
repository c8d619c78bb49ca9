"""Mutant: H_res is computed from detached logits (``sinkhorn_knopp(H̃_res.detach())``), e.g. to
save the memory of 20 rounds of autograd, consistently in forward and weights.

Bug class: gradients (Sinkhorn gradient stopped). The forward is exact; φ_res, b_res and α_res
never receive a gradient, and ∂L/∂x misses the path through H_res(x).
Caught by: gradients.fd_input and gradients.fd_parameters.
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "gradients: Sinkhorn gradient stopped"
CAUGHT_BY = ("gradients.fd_input", "gradients.fd_parameters")


class NoSinkhornGrad(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return sinkhorn_knopp(logits.detach(), self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(NoSinkhornGrad, n, d, layer_index, dtype, device, seed, mhc_conventions())
