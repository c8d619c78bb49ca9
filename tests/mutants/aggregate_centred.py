"""Mutant: the branch input is aggregated around the stream mean,
``x_in = h_preᵀ(X − X̄) + (1ᵀh_pre) X̄`` (a centring meant to reduce cancellation), which
equals ``h_preᵀX`` in exact arithmetic but not in floating point: a one-hot ``h_pre = e_k``
no longer copies stream k exactly.

Bug class: exact cases. No public report names this one; it stands for kernels that rearrange
the weighted sum of the streams (centring, blocking, fused reductions in another order). The
error is a few ulps, within the law's tolerance, so only the exact properties see it.
Caught by: exact.one_hot_copy.
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from hcspec.reference.connection import apply_connection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "exact cases: branch input aggregated around the stream mean"
CAUGHT_BY = ("exact.one_hot_copy",)


class Centred(ManifoldHyperConnection):
    def forward(self, x, branch):  # type: ignore[no-untyped-def,override]
        x = self._check_state(x)
        h_pre, h_post, H_res = self._weights(x)
        mean = x.mean(-2, keepdim=True)
        centred = (h_pre.unsqueeze(-2) @ (x - mean)).squeeze(-2)
        x_in = centred + h_pre.sum(-1, keepdim=True) * mean.squeeze(-2)  # meant: h_preᵀ X
        ones = torch.ones_like(h_pre)
        return apply_connection(x, lambda _: branch(x_in), ones / ones.shape[-1], h_post,
                                H_res)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Centred, n, d, layer_index, dtype, device, seed, mhc_conventions())
