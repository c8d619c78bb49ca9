"""Mutant: in the single pass, the coefficients and pre-mix carried into sublayer k ≥ 1 are
detached from autograd (computed by an inference-only fused kernel that was left in the
training path). The forward is exact; no gradient reaches the parameters of sublayers 1 … L − 1
through their coefficients, nor the state through them.

Bug class: stack (a carried coefficient without gradient).
Caught by: stack.fd_gradients (w.r.t. x, and w.r.t. sublayer 1's parameters).
"""

from __future__ import annotations

import torch

from hcspec.reference import Weights
from hcspec.reference.connection import read
from hcspec.reference.stack import HyperConnectionStack
from tests.mutants._stack import make_stacked

BUG_CLASS = "stack: carried coefficients detached from autograd"
CAUGHT_BY = ("stack.fd_gradients",)


class DetachedStack(HyperConnectionStack):
    def _pre_mix(self, k: int, x: torch.Tensor) -> tuple[Weights, torch.Tensor]:
        h_pre, h_post, H_res = self.sublayer(k).weights(x)
        if k > 0:
            h_pre, h_post, H_res = h_pre.detach(), h_post.detach(), H_res.detach()
        return (h_pre, h_post, H_res), read(x, h_pre)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return make_stacked(DetachedStack, n, d, layer_index, dtype, device, seed)
