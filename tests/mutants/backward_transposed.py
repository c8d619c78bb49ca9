"""Mutant: the mixing ``H_res X`` is a custom autograd function (a "fused kernel") whose
backward returns ``H_res G'`` for ∂L/∂X instead of ``H_resᵀ G'``.

Bug class: gradients (a custom backward that returns the transpose). The forward is exact; the
bypass gradient is wrong whenever H_res is not symmetric (away from the init H_res = I).
Caught by: gradients.fd_input and gradients.closed_form.
"""

from __future__ import annotations

from typing import Any

import torch

from hcspec.reference import StaticHyperConnection
from tests.mutants._base import build

BUG_CLASS = "gradients: custom backward returns the transpose"
CAUGHT_BY = ("gradients.fd_input", "gradients.closed_form")


class FusedMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, H: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(H, X)
        return H @ X

    @staticmethod
    def backward(ctx: Any, G: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        H, X = ctx.saved_tensors
        return G @ X.transpose(-1, -2), H @ G  # wrong: should be H.transpose(-1, -2) @ G


class FusedStatic(StaticHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        h_pre, h_post, H_res = self.weights(x)
        z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
        return FusedMix.apply(H_res, x) + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(FusedStatic, n, d, layer_index, dtype, device, seed)
