"""Mutant: a custom backward for the mixing that, for float32 inputs, rounds the incoming
gradient to bfloat16 "to save memory" before using it; float64 (where finite differences run)
is untouched.

Bug class: gradients (gradient wrong only in float32: a cast inside the backward). The error
is ~4e-3 relative — invisible to a float64-only gradient check, large for float32 training.
Caught by: dtype.float32_gradients.
"""

from __future__ import annotations

from typing import Any

import torch

from hcspec.reference import DynamicHyperConnection
from tests.mutants._base import build

BUG_CLASS = "gradients: wrong only in float32 (a cast inside the backward)"
CAUGHT_BY = ("dtype.float32_gradients",)


class CompressedGradMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, H: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(H, X)
        return H @ X

    @staticmethod
    def backward(ctx: Any, G: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        H, X = ctx.saved_tensors
        if G.dtype == torch.float32:
            G = G.to(torch.bfloat16).to(torch.float32)
        return G @ X.transpose(-1, -2), H.transpose(-1, -2) @ G


class CastInBackward(DynamicHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        h_pre, h_post, H_res = self.weights(x)
        z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
        return CompressedGradMix.apply(H_res, x) + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(CastInBackward, n, d, layer_index, dtype, device, seed)
