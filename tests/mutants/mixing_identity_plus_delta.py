"""Mutant: the residual mixing is applied as ``X + (H_res − I) X`` (the mixing stored and
applied as an offset from the identity), which equals ``H_res X`` in exact arithmetic but not
in floating point: where H_res is a permutation, ``X_i + (X_j − X_i)`` is ``X_j`` only up to a
rounding error, so streams are not copied exactly.

Bug class: exact cases. No public report names this one; it stands for implementations that
keep the residual mixing as the identity plus a learned offset and add the offset's product to
the residual. The error is within the law's tolerance, so only the exact properties see it.
Caught by: exact.permutation_mixing and exact.cancelling_streams (the cancelled stream is
mixed through the same offset).
"""

from __future__ import annotations

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "exact cases: mixing applied as X + (H_res − I) X"
CAUGHT_BY = ("exact.permutation_mixing", "exact.cancelling_streams")


class IdentityPlusDelta(ManifoldHyperConnection):
    def forward(self, x, branch):  # type: ignore[no-untyped-def,override]
        x = self._check_state(x)
        h_pre, h_post, H_res = self._weights(x)
        z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
        eye = torch.eye(self.n, dtype=x.dtype, device=x.device)
        mixed = x + (H_res - eye) @ x  # meant: H_res @ x
        return mixed + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(IdentityPlusDelta, n, d, layer_index, dtype, device, seed, mhc_conventions())
