"""Mutant: the residual (mixing) path is detached from autograd: ``H_res X.detach()``.

Bug class: gradients. The forward is exact; the backward loses the bypass term ``H_resᵀ G'``,
so ``∂L/∂X = h_pre g_inᵀ`` only — the gradient highway HC exists to keep is gone.
Caught by: gradients.fd_input and gradients.closed_form.
"""

from __future__ import annotations

import torch

from hcspec.reference import StaticHyperConnection
from tests.mutants._base import build

BUG_CLASS = "gradients: residual path detached"
CAUGHT_BY = ("gradients.fd_input", "gradients.closed_form")


class Detached(StaticHyperConnection):
    def forward(self, x: torch.Tensor, branch):  # type: ignore[no-untyped-def,override]
        h_pre, h_post, H_res = self.weights(x)
        z = branch(torch.einsum("btn,btnd->btd", h_pre, x))
        mixed = torch.einsum("btij,btjd->btid", H_res, x.detach())
        return mixed + h_post.unsqueeze(-1) * z.unsqueeze(-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(Detached, n, d, layer_index, dtype, device, seed)
