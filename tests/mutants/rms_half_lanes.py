"""Mutant: the branch input's RMS norm reduces over half the lanes once the hidden size is past
one 64-wide wavefront (the squares of the upper half are dropped but the mean still divides by
d), so the branch receives ``x_in`` about √2 too large.

Bug class: kernels that switch path with size (public report: vLLM's fused mHC pre-kernel
reduced its RMS over half the lanes on 64-wide wavefronts; the branch input was √2 too large
and a benchmark fell from 91 % to 24 %). Below 64 features the norm is right, so the small
cases of the other families never see it.
Caught by: scale.law (the branch input at d = 65, 96, 100, 129, 257).
"""

from __future__ import annotations

import torch

from hcspec.conformance.protocol import Conventions
from hcspec.reference import ManifoldHyperConnection
from hcspec.reference.connection import apply_connection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "size path: RMS over half the lanes past a 64-wide wavefront"
CAUGHT_BY = ("scale.law",)
WAVEFRONT = 64
EPS = 1e-12


def rms_norm(x_in: torch.Tensor) -> torch.Tensor:
    """``x_in / rms(x_in)``; past :data:`WAVEFRONT` features only the lower half is reduced."""
    d = x_in.shape[-1]
    lanes = x_in[..., : d // 2] if d > WAVEFRONT else x_in  # meant: every lane
    mean_square = lanes.square().sum(-1, keepdim=True) / d
    return x_in * torch.rsqrt(mean_square + EPS)


class HalfLanes(ManifoldHyperConnection):
    def forward(self, x, branch):  # type: ignore[no-untyped-def,override]
        x = self._check_state(x)
        h_pre, h_post, H_res = self._weights(x)
        return apply_connection(x, lambda x_in: branch(rms_norm(x_in)), h_pre, h_post, H_res)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    conventions = Conventions(**{**mhc_conventions().__dict__, "branch_input": "rms_norm",
                                 "norm_eps": EPS})
    return build(HalfLanes, n, d, layer_index, dtype, device, seed, conventions)
