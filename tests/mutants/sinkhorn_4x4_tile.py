"""Mutant: a Sinkhorn–Knopp kernel written for a 4×4 tile: each normalisation sums only the
first four entries of its row or column, so for n > 4 the sums are wrong (n ≤ 4 is exact).

Bug class: hard-coded expansion rate (public report: an MLX Metal Sinkhorn kernel written
for 4×4 that needs a guard for hc_mult ≠ 4; Megatron's Triton ops require a power-of-two
hc_mult). The other families draw n ≤ 4 and never see it.
Caught by: scale.constraints (H_res row sums at n = 5, 6, 8).
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "expansion rate: Sinkhorn–Knopp kernel written for a 4×4 tile"
CAUGHT_BY = ("scale.constraints",)
TILE = 4


class FourByFour(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        log_m = logits
        for _ in range(self.sinkhorn_iterations):  # meant: logsumexp over all n entries
            log_m = log_m - torch.logsumexp(log_m[..., :TILE, :], dim=-2, keepdim=True)
            log_m = log_m - torch.logsumexp(log_m[..., :TILE], dim=-1, keepdim=True)
        return log_m.exp()


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(FourByFour, n, d, layer_index, dtype, device, seed, mhc_conventions())
