"""The error metrics the checks compare with, and the measured quantities the tolerance rules
are written in (:mod:`hcspec.conformance.rules` applies them; this module decides nothing).

Comparisons use a *scaled error* (:func:`scaled_error`): ``max|got − want| / max(1, scale)``,
where ``scale`` is the magnitude of the quantities that were summed to produce ``want`` (e.g.
``max|X|`` and ``max|h_post zᵀ|``). Floating-point error of a sum is proportional to the sum of
the magnitudes of its terms, not to the result, so dividing by that magnitude makes one
tolerance per dtype valid across input scales.

Imports torch only (no kit module), so the rules and every layer of the kit can use it.
"""

from __future__ import annotations

import math

import torch

from hcspec.conformance.outputs import capture


def scaled_error(got: torch.Tensor, want: torch.Tensor, scale: float | None = None) -> float:
    """``max|got − want| / max(1, scale)`` in float64 (``scale`` defaults to ``max|want|``);
    ``inf`` when either side is non-finite where the other is finite, or shapes differ. While
    a failing case is replayed (:mod:`hcspec.conformance.outputs.capture`) the two tensors are kept.

    Shapes: any, equal. Both sides are copied to float64 on the CPU (any dtype, any device);
    an empty pair gives 0.
    """
    if got.shape != want.shape:
        return math.inf
    a = got.detach().to("cpu", torch.float64)
    b = want.detach().to("cpu", torch.float64)
    if a.numel() == 0:
        return 0.0
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return math.inf
    if scale is None:
        scale = float(b.abs().max())
    error = float((a - b).abs().max()) / max(1.0, scale)
    capture.note_comparison(a, b, scale, error)  # kept only while a failure is replayed
    return error


def projective_diameter(H: torch.Tensor) -> torch.Tensor:
    """Hilbert projective diameter Δ of each positive ``n×n`` matrix in ``H [..., n, n]``.

    ``Δ(H) = max_{i,j,k,l} log(H_ik H_jl / (H_il H_jk))``. It is invariant under scaling rows and
    columns by positive factors, so Δ of Sinkhorn–Knopp's *output* equals Δ of ``exp(logits)``:
    the kit measures the logit spread from the result alone, without seeing the logits.
    Returns ``[...]`` float64 on ``H``'s device; ``inf`` where an entry is ≤ 0 or non-finite.
    """
    A = H.detach().to(torch.float64)
    bad = ~(A > 0).all(dim=-1).all(dim=-1) | ~torch.isfinite(A).all(dim=-1).all(dim=-1)
    logs = torch.log(A.clamp_min(torch.finfo(torch.float64).tiny))
    diff = logs.unsqueeze(-2) - logs.unsqueeze(-3)  # [..., i, j, k] = log H_ik − log H_jk
    spread = diff.amax(dim=-1) - diff.amin(dim=-1)
    delta = spread.amax(dim=-1).amax(dim=-1)
    return torch.where(bad, torch.full_like(delta, math.inf), delta)


def birkhoff_hopf_convergence(H: torch.Tensor, iterations: int) -> torch.Tensor:
    """Upper bound on ``|sum − 1|`` along the axis Sinkhorn–Knopp did *not* normalise last,
    in exact arithmetic: ``expm1(tanh(Δ/4)^{2(T−1)}·Δ)`` for ``T = iterations`` rounds at the
    measured projective diameter ``Δ`` (:func:`projective_diameter`). The rule
    :data:`hcspec.conformance.rules.SINKHORN_OTHER_AXIS` adds the rounding.

    Justification (Birkhoff–Hopf; Franklin & Lorenz 1989). Write ``K = exp(logits)`` and the
    iterate after column-then-row round t as ``diag(r_t) K diag(c_t)``. Each round maps
    ``c ↦ 1/(Kᵀ (1/(K c)))``: two positive linear maps, each a contraction of Hilbert's projective
    metric ``d_H`` by ``κ = tanh(Δ/4)``, and two inversions, which are isometries. The first
    round's ``c_1 = 1/(Kᵀ 1)`` lies within ``Δ`` of the fixed point, so after T rounds
    ``d_H(c_T, c*) ≤ κ^{2(T−1)} Δ``, and every column sum of the row-normalised result lies in
    ``[e^{−δ}, e^{δ}]`` with ``δ = d_H(c_T, c*)`` (column j's sum is ``(c_T/c*)_j`` times
    ``(Kᵀr_T)_j/(Kᵀr*)_j``; both factors lie in ``[m, M]`` resp. ``[1/M, 1/m]`` with
    ``log(M/m) = δ``). Hence ``|colsum − 1| ≤ expm1(κ^{2(T−1)} Δ)``. (Row-then-column order:
    the same with ``K`` and ``Kᵀ`` exchanged.) Rounding does not accumulate over rounds: the
    iteration is a contraction, so the rounded iterate stays within ~(n + 1)·eps/(1 − κ²) of
    the exact one, inside the exact axis's 16·(n + 1)·eps while κ² ≤ 15/16 (Δ ≤ ~8); beyond
    that, at the paper's T = 20, the convergence term κ^{38}·Δ ≥ 0.2 dominates anyway.

    Measured against a correct float64 log-domain Sinkhorn (2000 random logit matrices for each
    n ∈ {2, 4, 8}, logit std ∈ {0.01, 0.3, 1, 2, 3, 10}, T ∈ {1, 2, 5, 10, 20}): never violated
    (with the rounding term added). The bound is tight where it matters (n = 4, std 1, T = 20:
    bound ≈ 4e-4, measured ≈ 3e-4) and becomes vacuous for large logit spreads (std 3: ~1e5),
    where the kit checks robustness instead (finite, non-negative, no all-zero row or column).

    Shapes: ``H [..., n, n]`` -> ``[...]`` float64 (``inf`` where Δ is infinite).

    Raises:
        ValueError: ``iterations < 1``.
    """
    if iterations < 1:
        raise ValueError(f"iterations: expected >= 1, got {iterations}")
    delta = projective_diameter(H)
    kappa = torch.tanh(delta / 4)
    drift = torch.where(
        torch.isfinite(delta), kappa.pow(2 * (iterations - 1)) * delta, delta
    )
    return torch.expm1(drift)
