"""Mutant: a "fast path" computes H_res and the mixing ``H_res X`` in bfloat16 and does not cast
back: ``weights`` returns a bfloat16 H_res, and the bfloat16 mix is silently promoted to the
input dtype when the branch term is added.

Bug class: dtype (H_res silently computed in bfloat16 and not cast back). The output has the
right dtype but only ~3 significant digits.
Caught by: shape.weights and law.probed.
"""

from __future__ import annotations

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "dtype: H_res computed in bfloat16 and not cast back"
CAUGHT_BY = ("shape.weights", "law.probed")


class BFloat16Mix(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        return sinkhorn_knopp(logits.to(torch.bfloat16), self.sinkhorn_iterations)

    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        h_pre, h_post, H_res = self.weights(x)
        z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
        mixed = H_res @ x.to(torch.bfloat16)
        return mixed + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(BFloat16Mix, n, d, layer_index, dtype, device, seed, mhc_conventions())
