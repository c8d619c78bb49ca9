"""The rules of gradient comparisons, each with the budget it is written in: finite
differences against autograd (the algorithm and its measured terms are
:mod:`hcspec.conformance.machinery.finite_differences`'), float32 gradients against
float64, and the trainability of the mixing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import torch

from hcspec.conformance.rules.base import Allowance, Precision, Rule, eps

# --- gradients: finite differences ---------------------------------------------------------------
# The steps, the extrapolation and the measured cancellation, residual and resolution terms are
# the algorithm's (hcspec.conformance.machinery.finite_differences, which gives them to the
# rule as inputs); the budgets of the difference itself are these. float64, step 1e-6:
# truncation error O(h²·f⁽³⁾) ≈ 1e-12 relative to the derivative. float32 inside, step 3e-3 of
# the state's magnitude with Richardson extrapolation (measured on hyper-connections 0.4.11
# ManifoldConstrainedHyperConnections, float32 inside, float64 input; 6 seeds × n ∈ {2, 4, 8}
# × d ∈ {5, 12, 24} × state scale {0.1, 1, 10} × parameter noise {0, 0.3, 1}, 3 directions
# each): worst 2.7e-3 relative to max(1, |autograd|, state scale); w.r.t. the parameters worst
# 5.9e-3 relative to max(1, |autograd|) over the grid, and 1.2e-2 on one ci case at state
# scale 10 with |autograd| = 0.48 (1.2e-3 relative to the scale). We allow 1e-2 (≈ 4× the
# worst measured), still 10–100× below a wrong gradient (a detached residual or a transposed
# mix changes the directional derivative by O(0.1–1)).
FD_DIRECTIONAL: Final = 1e-6
"""Scaled error allowed between a float64 central-difference directional derivative (step
1e-6) and autograd's before cancellation: ~5000× the truncation error, and 1e5 below an O(1)
wrong gradient."""
FD_DIRECTIONAL_COARSE: Final = 1e-2
"""The same for an impl whose effective dtype is float32 or coarser (see the comment above)."""


def fd_directional(dtype: torch.dtype) -> float:
    """Scaled error allowed between finite differences and autograd's directional derivative
    for an impl whose effective dtype is ``dtype`` (see the comment above)."""
    return FD_DIRECTIONAL if dtype == torch.float64 else FD_DIRECTIONAL_COARSE


def _fd(p: Precision, g: Mapping[str, Any]) -> Allowance:
    denominator = float(g["denominator"])
    extra = (float(g.get("cancellation", 0.0)) + float(g.get("rounding", 0.0))
             + float(g.get("resolution", 0.0)))
    base = fd_directional(p.output)
    return Allowance(base, base + extra / denominator)


FD: Final = Rule(
    "fd_directional", "finite differences vs autograd over max(1, |autograd|[, scale]): "
    "1e-6 (float64) / 1e-2 (coarser) plus the measured cancellation, fit residual and "
    "output resolution over the denominator",
    "truncation O(h²) (Richardson/fit O(h⁴)) and the rounding of the loss at the step",
    ("denominator", "cancellation?", "rounding?", "resolution?"), _fd)


# --- float32 gradients vs float64 --------------------------------------------------------------
# Compared as one vector (∂L/∂x and every ∂L/∂θ), in relative 2-norm: rounding errors of correct
# float32 code concentrate in a few ill-conditioned entries, while a wrong float32 backward (a
# bfloat16 cast of the incoming gradient: ~2^-9 relative on every entry) moves the whole vector.
# Budget, two parts:
# * a floor for well-conditioned cases: a gradient entry sums ≤ k = B·T·max(n, d) ≤ 768 terms
#   in the kit's strategies, whose rounding errors add like a random walk, √k·eps32 ≈ 3e-6; we
#   allow 1024·eps32 ≈ 1.2e-4, ~10× below the ~1e-3 that one bfloat16 rounding of the incoming
#   gradient gives;
# * the case's own conditioning: correct float32 code behaves like exact code run on inputs
#   moved by a few unit roundoffs (backward stability), so the kit measures the sensitivity s —
#   how far the float64 gradients move when x and θ move by one eps32, relative, with random
#   signs (the max over GRADIENT_SENSITIVITY_SAMPLES draws) — and allows
#   GRADIENT_SENSITIVITY_FACTOR·s. A per-stream LayerNorm over d = 2 (dynamic HC) at state
#   scale 10 returns ±1 after a cancellation: measured error 3.2e-4 with s = 8.4e-5 (ratio 3.8,
#   the worst seen on the reference, found by the soak); on well-conditioned cases the ratio is
#   ≈ 0.5, and the bfloat16-cast mutant's is 5.7e3 (error 1.2e-3, s = 2e-7).
# * the kit's own branch: its float32 run computes tanh(x W₁) W₂ in float32, and near
#   saturation (d = 1, state scale 10) 1 − tanh² cancels, so the branch's float32 gradient alone
#   can be wrong by O(1) relative; where the residual path carries no gradient nothing dilutes
#   it (seen: error 3.9e-4 > 1.2e-4 on a static HC with a detached residual, n = 2, d = 1). The
#   kit measures it — the float64 gradients recomputed with only the branch in float32 — and
#   allows GRADIENT_BRANCH_FACTOR times that relative error; the target's own float32 rounding
#   stays under the two budgets above.
GRADIENT_FLOAT32_EPS_FACTOR: Final = 1024.0
GRADIENT_SENSITIVITY_FACTOR: Final = 32.0
GRADIENT_SENSITIVITY_SAMPLES: Final = 3
GRADIENT_BRANCH_FACTOR: Final = 4.0


def gradient_float32(sensitivity: float = 0.0, branch_error: float = 0.0) -> float:
    """Relative 2-norm tolerance of float32 gradients against float64 gradients, given the
    case's measured ``sensitivity`` (relative change of the float64 gradients under a one-eps32
    relative move of the inputs and parameters; 0 gives the well-conditioned floor) and
    ``branch_error`` (relative change of the float64 gradients when only the kit's branch
    computes in float32)."""
    return max(GRADIENT_FLOAT32_EPS_FACTOR * eps(torch.float32),
               GRADIENT_SENSITIVITY_FACTOR * sensitivity,
               GRADIENT_BRANCH_FACTOR * branch_error)


def _gradient_float32(p: Precision, g: Mapping[str, Any]) -> Allowance:
    return Allowance(eps(torch.float32), gradient_float32(
        float(g.get("sensitivity", 0.0)), float(g.get("branch_error", 0.0))))


GRADIENT_FLOAT32: Final = Rule(
    "gradient_float32", "max(1024·eps32, 32 × the case's measured conditioning, 4 × the "
    "measured error of the kit's branch in float32), relative 2-norm",
    "backward stability: correct float32 code is exact code on inputs moved by a few eps32",
    ("sensitivity?", "branch_error?"), _gradient_float32)

# --- trainability of the mixing -------------------------------------------------------------------
TRAINABLE_RELATIVE: Final = 1e-6
"""Smallest ‖∂L/∂θ‖ / (‖G'‖·‖X‖) accepted for ``L = ⟨G', H_res X⟩``. The reference gives
≥ 1e-3 at init (mHC: α = 0.01 scales the φ part, b_res still moves H_res at O(0.1)); a mixing
that ignores its parameters gives exactly 0, a saturated Sinkhorn–Knopp exp(−Δ) with Δ in the
hundreds — both below 1e-100. The check records ``TRAINABLE_RELATIVE / relative`` against 1."""


def _trainable(p: Precision, g: Mapping[str, Any]) -> Allowance:
    return Allowance(0.0, 1.0)


TRAINABLE: Final = Rule(
    "trainable", "relative gradient through the mixing ≥ 1e-6 (the ratio 1e-6 / relative ≤ 1)",
    "a mixing that ignores its parameters gives 0, a saturated Sinkhorn–Knopp < 1e-100", (),
    _trainable)
