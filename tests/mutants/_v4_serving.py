"""A DeepSeek-V4-style mHC sublayer as serving engines run it, written for the kit's tests: float32
parameters and float32 weights inside, a bfloat16 residual state and output.

The weights follow the DeepSeek-V4 formulas (mHC arXiv:2512.24880 Eq. 7–9 in DeepSeek-V4's
form): from the unweighted RMS norm of the flattened state ``vec X`` (in float32),
``H_pre = σ(α_pre·φ_pre x + b_pre) + ε``, ``H_post = 2σ(α_post·φ_post x + b_post)`` and
``H_res = Sinkhorn–Knopp(softmax(α_res·φ_res x + b_res) + ε)`` with the softmax counted as the
first normalisation and ε in every denominator (:func:`hcspec.reference.sinkhorn.sinkhorn_variant`
with ``start="softmax", count="rounds_from_softmax", exact_axis="columns"``), the rows of the
softmax being the target streams (``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` in the kit's row
form). The residual state is rounded to bfloat16 on entry, the composition runs in float32,
and the output, the branch input and the reported weights are rounded to bfloat16. There is
no ``logits``: only the constraint family sees the Sinkhorn–Knopp step.

``rounds`` is how many rounds the module runs; the declaration always says 20, so
``rounds=2`` is the bug of :mod:`tests.mutants.sinkhorn_bf16_state_two_rounds`. With
``float32_weights`` (:class:`ServingV4F32`) the module reports its weights unrounded in float32,
declaring ``weights_dtype=float32``, and offers ``logits`` (as SGLang's Triton targets do):
``rounds=19`` is :mod:`tests.mutants.sinkhorn_f32_weights_one_round_short`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

from hcspec.conformance.protocol import Conventions
from hcspec.reference.sinkhorn import SinkhornSpec, sinkhorn_variant

EPS = 1e-6
"""DeepSeek-V4's ``hc_eps``: added to H_pre and to the softmax, and in every denominator."""
DECLARED_ROUNDS = 20
STATE = torch.bfloat16

CONVENTIONS = Conventions(
    compute_dtype=torch.float32, output_dtype=STATE, sinkhorn_iterations=DECLARED_ROUNDS,
    sinkhorn_variant="softmax", sinkhorn_iterations_count="rounds_from_softmax",
    sinkhorn_exact_axis="columns", sinkhorn_additive_eps=EPS, sinkhorn_denominator_eps=EPS,
    h_pre_eps=EPS,
    notes=("DeepSeek-V4 formulas as a serving engine runs them: float32 parameters and weights, "
           "bfloat16 residual state and output; σ + ε pre, 2σ post, softmax + ε then "
           "Sinkhorn–Knopp with ε in the denominators (20 rounds declared)"),
)


class ServingV4(nn.Module):
    """One sublayer; see the module docstring.

    Shapes: ``forward(x [B,T,n,d], branch) -> [B,T,n,d]`` bfloat16; ``weights(x) -> (h_pre
    [B,T,n], h_post [B,T,n], H_res [B,T,n,n])`` bfloat16. Any floating ``x`` is accepted and
    rounded to bfloat16 first.
    """

    kind = "mhc"

    def __init__(self, n: int, d: int, rounds: int = DECLARED_ROUNDS) -> None:
        super().__init__()
        self.n, self.d, self.rounds = n, d, rounds
        self.conventions = CONVENTIONS
        self.phi = nn.Parameter(torch.randn((2 + n) * n, n * d, dtype=torch.float32) * 0.02)
        self.bias = nn.Parameter(torch.zeros((2 + n) * n, dtype=torch.float32))
        self.alpha = nn.Parameter(torch.ones(3, dtype=torch.float32))

    def _weights32(self, xb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = self.n
        v = xb.flatten(-2).to(torch.float32)
        v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + EPS)
        mix = v @ self.phi.T + 0.0
        a = self.alpha
        pre = torch.sigmoid(a[0] * mix[..., :n] + self.bias[:n]) + EPS
        post = 2 * torch.sigmoid(a[1] * mix[..., n:2 * n] + self.bias[n:2 * n])
        res = (a[2] * mix[..., 2 * n:] + self.bias[2 * n:]).unflatten(-1, (n, n))
        H = sinkhorn_variant(res, SinkhornSpec("softmax", "rounds_from_softmax", "columns", EPS,
                                               EPS, self.rounds))
        return pre, post, H

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pre, post, H = self._weights32(x.to(STATE))
        return pre.to(STATE), post.to(STATE), H.to(STATE)

    def forward(self, x: torch.Tensor, branch: Any) -> torch.Tensor:  # type: ignore[override]
        xb = x.to(STATE)
        pre, post, H = self._weights32(xb)
        x32 = xb.to(torch.float32)
        collapsed = (pre.unsqueeze(-2) @ x32).squeeze(-2).to(STATE)
        z = branch(collapsed.to(x.dtype)).to(torch.float32)
        out = H @ x32 + post.unsqueeze(-1) * z.unsqueeze(-2)
        return out.to(STATE)


class ServingV4F32(ServingV4):
    """:class:`ServingV4` reporting ``weights`` in float32 (declared ``weights_dtype``) and
    offering ``logits(x)``: ``(H̃_pre [B,T,n], H̃_post [B,T,n], H̃_res [B,T,n,n])`` float32,
    what σ, 2σ and the softmax-first Sinkhorn–Knopp take."""

    def __init__(self, n: int, d: int, rounds: int = DECLARED_ROUNDS) -> None:
        super().__init__(n, d, rounds)
        self.conventions = dataclasses.replace(CONVENTIONS, weights_dtype=torch.float32)

    def logits(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = self.n
        v = x.to(STATE).flatten(-2).to(torch.float32)
        v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + EPS)
        mix = v @ self.phi.T + 0.0
        a = self.alpha
        return (a[0] * mix[..., :n] + self.bias[:n],
                a[1] * mix[..., n:2 * n] + self.bias[n:2 * n],
                (a[2] * mix[..., 2 * n:] + self.bias[2 * n:]).unflatten(-1, (n, n)))

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self._weights32(x.to(STATE))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0, rounds: int = DECLARED_ROUNDS,
         float32_weights: bool = False) -> ServingV4:
    """The kit's factory: parameters drawn under ``seed`` in float32 whatever ``dtype`` (the
    declared ``compute_dtype``), on ``device``; :class:`ServingV4F32` when
    ``float32_weights``."""
    cls = ServingV4F32 if float32_weights else ServingV4
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = cls(n, d, rounds)
    return module.to(device=device)
