"""Mutant: projects H̃_res with an orthogonalisation instead of Sinkhorn–Knopp: five
Newton–Schulz steps towards the orthogonal polar factor Q of ``exp(H̃_res)``, then
``H = Q ∘ Q`` (squared entries of an orthogonal matrix are doubly stochastic).

Bug class: Sinkhorn (public report #6: a projection that is doubly stochastic only near its
init). Near the init logits (a dominant diagonal) five steps converge and H is doubly
stochastic to ~1e-6; at random logits they do not, and the row sums are off by up to ~0.9.
Caught by: constraints.h_res_exact_axis.
"""

from __future__ import annotations

import torch

from tests.mutants._base import MHCWithProjection, build, mhc_conventions

BUG_CLASS = "Sinkhorn: orthogonalisation-based projection, exact only near init (report #6)"
CAUGHT_BY = ("constraints.h_res_exact_axis",)
STEPS = 5


class NewtonSchulz(MHCWithProjection):
    def project(self, logits: torch.Tensor) -> torch.Tensor:
        m = torch.exp(logits - logits.amax(dim=(-2, -1), keepdim=True))
        q = m / torch.linalg.matrix_norm(m, keepdim=True)
        for _ in range(STEPS):
            q = 1.5 * q - 0.5 * q @ q.transpose(-1, -2) @ q
        return q * q


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(NewtonSchulz, n, d, layer_index, dtype, device, seed, mhc_conventions())
