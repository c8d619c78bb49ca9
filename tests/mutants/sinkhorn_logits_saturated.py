"""Mutant: Sinkhorn–Knopp of ``exp(3·tanh(H̃_res/3))``: the logits squashed into (−3, 3)
before the projection (a "stabilising" clamp), while ``logits(x)`` reports them unsquashed.

Bug class: constructions (issue #40): ``H_res`` no longer spans the Birkhoff polytope's
interior. It stays doubly stochastic to the rounding (every constraint passes), and where the
logits are small (the init, light perturbations) ``3·tanh(L/3) ≈ L`` so it is almost the
declared Sinkhorn; but no logits bring it nearer a permutation than the fixed point of
``exp(3·P)``: at n = 3 its entries stay ``2/(e³ + 2) = 0.09`` from the vertex where the
declared formula at logits ``6·P`` is ``0.005`` away.
Caught by: constraints.h_res_vertices (the logits steered to ``6·P`` at each permutation).
"""

from __future__ import annotations

import torch

from hcspec.reference.sinkhorn import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "constructions: Sinkhorn of saturated logits cannot reach a vertex (issue #40)"
CAUGHT_BY = ("constraints.h_res_vertices",)


class SaturatedLogits(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return sinkhorn_knopp(3.0 * torch.tanh(logits / 3.0), self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(SaturatedLogits, n, d, layer_index, dtype, device, seed,
                 mhc_conventions())
