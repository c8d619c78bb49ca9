"""Mutant: from layer index 8 on, the mixing matrix is ``exp(H̃_res − row max)`` — Sinkhorn–Knopp
skipped (a per-layer table of kernel settings whose deep entries run zero rounds) —
consistently in forward and ``weights``.

Bug class: growth at depth, modelled on an MLX port of DeepSeek-V4's mHC whose Metal kernel
path let the hidden-state std grow from 0.07 to 376 over 43 layers while the reference path
stayed near 11. The unnormalised matrix has row sums above 1 (each row's largest entry is 1 after
the shift, the other entries add to it), so each deep layer amplifies the state and the
growth compounds. Only the layers the kit's other families never build (they draw layer
indices 0 … 7) take the defective path, so every per-layer property passes.
Caught by: depth.mhc_bounded.
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "depth: deep layers skip Sinkhorn–Knopp (the state grows with depth)"
CAUGHT_BY = ("depth.mhc_bounded",)
FIRST_DEFECTIVE_LAYER = 8


class DeepLayersUnnormalised(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        if self.layer_index >= FIRST_DEFECTIVE_LAYER:
            return torch.exp(logits - logits.amax(dim=-1, keepdim=True))
        return sinkhorn_knopp(logits, self.sinkhorn_iterations)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(DeepLayersUnnormalised, n, d, layer_index, dtype, device, seed,
                 mhc_conventions(20))
