"""Mutant: a correct forward (20 log-domain Sinkhorn–Knopp rounds) whose backward is the
implicit (fixed-point) gradient of the Sinkhorn limit instead of the gradient of the 20
rounds it ran — undeclared.

Bug class: implicit Sinkhorn gradient, as DeepSeek's TileKernels (issue #2) and a TileLang port
compute it: differentiating ``H = diag(u) exp(H̃) diag(v)`` at its fixed point gives the
gradient of the limit, which differs from the truncated forward's by the iterate's distance to
the limit. Written here from the math (elimination with the gauge β_{n−1} = 0), not from their
code. The forward and the weights are exact, so only gradient checks see it.
Caught by: variant.sinkhorn_gradient (the message names the implicit gradient). In a full run
gradients.fd_input fails first (finite differences of the truncated forward), with the hint
that names the same cause.
"""

from __future__ import annotations

from typing import Any

import torch

from hcspec.reference import sinkhorn_knopp
from tests.mutants._base import MHCWithProjection, build, mhc_conventions


def implicit_backward(P: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """``P ⊙ (G − α1ᵀ − 1βᵀ)`` with ``α = r − Pβ`` and ``(I − PᵀP) β = c − Pᵀ r`` solved for
    ``β_0 … β_{n−2}`` with ``β_{n−1} = 0`` (``r, c`` the row/column sums of ``P ⊙ G``)."""
    n = P.shape[-1]
    if n == 1:
        return torch.zeros_like(G)
    R = P * G
    r, c = R.sum(-1), R.sum(-2)
    Pt = P.transpose(-1, -2)
    system = torch.eye(n, dtype=P.dtype, device=P.device) - Pt @ P
    rhs = c - (Pt @ r.unsqueeze(-1)).squeeze(-1)
    beta = torch.linalg.solve(system[..., : n - 1, : n - 1], rhs[..., : n - 1])
    beta = torch.cat([beta, torch.zeros_like(beta[..., :1])], dim=-1)
    alpha = r - (P @ beta.unsqueeze(-1)).squeeze(-1)
    return P * (G - alpha.unsqueeze(-1) - beta.unsqueeze(-2))


class ImplicitSinkhorn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, iterations: int) -> torch.Tensor:
        P = sinkhorn_knopp(logits, iterations)
        ctx.save_for_backward(P)
        return P

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (P,) = ctx.saved_tensors
        return implicit_backward(P, grad), None


class ImplicitBackward(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = ImplicitSinkhorn.apply(logits, self.sinkhorn_iterations)
        return out


BUG_CLASS = "gradients: implicit (fixed-point) Sinkhorn backward, undeclared"
CAUGHT_BY = ("variant.sinkhorn_gradient",)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(ImplicitBackward, n, d, layer_index, dtype, device, seed, mhc_conventions(20))
