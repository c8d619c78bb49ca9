"""The mHC bounds of a run of sublayers, shared by the depth and stack families: each
sublayer as run (:class:`Layer`) and the stream-sum drift and norm that the declared doubly
stochastic ``H_res`` of the layers allow, accumulated over the run (:func:`mhc_bounds`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hcspec.conformance import metrics, rules
from hcspec.conformance.machinery import precision
from hcspec.conformance.machinery.base import Context
from hcspec.conformance.machinery.common import by_exact_axis


@dataclass
class Layer:
    """One sublayer of the stack, as run: its input state, output and branch output (float64),
    and its reported weights when the impl offers them."""

    X: torch.Tensor
    out: torch.Tensor
    z: torch.Tensor
    weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None


def _allowances(ctx: Context, H: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token ``[B, T]``: how far the row and the column sums of ``H`` may be from 1 under
    the declaration (the exact axis to rounding plus n·ε of a declared denominator ε, the
    other within the Birkhoff–Hopf bound of the declared rounds). In bfloat16/float16 the
    rounding is that of the compute dtype (the declared one, else the working dtype) plus the
    output's rounding (:func:`hcspec.conformance.rules.output_rounding`)."""
    c = ctx.conventions
    n = H.shape[-1]
    computed, rounding = ctx.precision.output, 0.0
    if precision.low_precision(ctx):  # Sinkhorn–Knopp in the compute dtype, then rounded
        computed = rules.effective_dtype(ctx.dtype, c.compute_dtype)
        rounding = rules.output_rounding(computed, ctx.precision.output)
    sk = c.formula.sinkhorn
    exact = (rules.exact_axis(computed, n, False) + rounding + n * sk.denominator_eps)
    other = rules.sinkhorn_other_axis_bound(H, sk.effective_iterations, computed, False)
    other = other * (1 + rounding) + rounding + n * sk.denominator_eps
    exact_t = torch.full_like(other, exact)
    return by_exact_axis(sk.exact_axis, exact_t, other)  # → (rows, columns)


def _layer_rounding(ctx: Context, layer: Layer) -> tuple[float, torch.Tensor]:
    """``(tolerance, scale [B, T, 1])`` of one sublayer's rounding on the scaled error: the
    law's fixed budget times ``max(1, max|X_l|)`` per token in float64/float32; in
    bfloat16/float16 :func:`hcspec.conformance.rules.law_measured` of the error of the
    closed form computed in the run's precision on this layer's state, weights and branch
    output (:class:`~hcspec.conformance.machinery.precision.SpecAtPrecision`), times the
    per-token scale of the law's terms (``max|X_l|``, ``max|h_post| · max|z_l|``)."""
    assert layer.weights is not None
    h_pre, h_post, H = layer.weights
    scale = layer.X.abs().amax(dim=(-2, -1)).clamp_min(1.0)[..., None]
    if not precision.low_precision(ctx):
        return rules.LAW.apply(ctx.precision).allowance, scale
    z = layer.z

    def replay(t: torch.Tensor) -> torch.Tensor:
        return z.to(device=t.device, dtype=t.dtype)

    got = precision.spec_at_precision(ctx, h_pre, h_post, H).forward(layer.X, replay)
    want = H @ layer.X + h_post.unsqueeze(-1) * z.unsqueeze(-2)
    terms = torch.maximum(layer.X.abs().amax(dim=(-2, -1)),
                          h_post.abs().amax(dim=-1) * z.abs().amax(dim=-1))
    reference = metrics.scaled_error(got, want, float(terms.max()))
    return (rules.LAW.apply(ctx.precision, oracle=reference).allowance,
            torch.maximum(scale, terms.clamp_min(1.0)[..., None]))


def mhc_bounds(ctx: Context, stack: list[Layer]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token and feature ``[B, T, d]``: the largest drift of the stream sum ``1ᵀX_L`` from
    ``1ᵀX_0 + Σ_l (1ᵀh_post,l) z_l`` and the largest ``‖X_L,k‖₂`` that the declared
    doubly stochastic ``H_res`` of the layers allow, accumulated over the stack (per layer: the
    column allowance times ``Σ_j |X_l,jk|`` for the sum; ``√((1 + row)(1 + column))`` times the
    norm plus ``‖h_post‖₂ |z_k|`` for the norm), each plus the law's rounding per layer."""
    drift = torch.zeros_like(stack[0].X[..., 0, :])
    norm = stack[0].X.norm(dim=-2)
    for layer in stack:
        assert layer.weights is not None
        _, h_post, H = layer.weights
        rows, cols = _allowances(ctx, H)
        law, scale = _layer_rounding(ctx, layer)
        drift = drift + cols[..., None] * layer.X.abs().sum(dim=-2) + law * scale
        gain = torch.sqrt((1 + rows) * (1 + cols))[..., None]
        norm = gain * norm + h_post.norm(dim=-1)[..., None] * layer.z.abs() + law * scale
    return drift, norm
