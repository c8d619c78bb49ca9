"""Mutant: Sinkhorn–Knopp written for a ``[N, n, n]`` stack normalises the columns over
``dim=1``, which on the ``[B, T, n, n]`` logits is the token axis.

Bug class: Sinkhorn (normalisation over the wrong axes of a ``[B,T,n,n]`` tensor, mixing
tokens). Rows are still normalised last, so each H_res is row-stochastic, but token t's H_res
depends on every other token's logits.
Caught by: independence.token.
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: normalisation over the wrong axes of [B,T,n,n] (mixes tokens)"
CAUGHT_BY = ("independence.token",)


class TokenAxis(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        log_m = logits
        for _ in range(self.sinkhorn_iterations):
            log_m = log_m - torch.logsumexp(log_m, dim=1, keepdim=True)  # meant: columns
            log_m = log_m - torch.logsumexp(log_m, dim=-1, keepdim=True)
        return log_m.exp()


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(TokenAxis, n, d, layer_index, dtype, device, seed, mhc_conventions())
