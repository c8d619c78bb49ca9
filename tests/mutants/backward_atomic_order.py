"""Mutant: the backward of the stream mixing ``H_res X`` accumulates ``∂L/∂X_j = Σ_i H_ij g_i``
in an order that changes from call to call (as atomic adds scheduled by the hardware do), so
two backwards of the same input differ in the last bits while every forward is bitwise equal.

Bug class: determinism (public report: backward kernels that accumulate with atomics —
``index_add``/``scatter_add`` on CUDA, split-K reductions — give run-to-run different
gradients; fused mHC backward kernels accumulate the stream gradients this way).
``state.deterministic_eval`` compares forwards only.
Caught by: determinism.forward_backward.
"""

from __future__ import annotations

from typing import Any

import torch

from hcspec.reference import ManifoldHyperConnection
from tests.mutants._base import build, mhc_conventions

BUG_CLASS = "determinism: backward accumulated in a run-dependent order"
CAUGHT_BY = ("determinism.forward_backward",)


class _Mix(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, H: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(H, x)
        return H @ x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        H, x = ctx.saved_tensors
        grad_x = torch.zeros_like(x)
        for i in torch.randperm(H.shape[-2]).tolist():  # meant: a fixed order
            grad_x = grad_x + H[..., i, :].unsqueeze(-1) * g[..., i, :].unsqueeze(-2)
        return g @ x.transpose(-1, -2), grad_x


class AtomicBackward(ManifoldHyperConnection):
    def forward(self, x, branch):  # type: ignore[no-untyped-def,override]
        x = self._check_state(x)
        h_pre, h_post, H_res = self._weights(x)
        z = branch((h_pre.unsqueeze(-2) @ x).squeeze(-2))
        return _Mix.apply(H_res, x) + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(AtomicBackward, n, d, layer_index, dtype, device, seed, mhc_conventions())
