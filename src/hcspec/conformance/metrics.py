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


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """``max|got − want| / max|want|`` in float64: :func:`scaled_error` without its floor of 1,
    for a tensor whose every entry is computed to the full relative precision of its dtype (a
    chain of products, quotients and exponentials of exact inputs, no cancelling sum), so that
    its rounding error is proportional to its own magnitude however small that is (the gates
    ``σ(z) + eps`` at saturated logits: entries ~1e-6, where the absolute scaled error could
    not tell ``eps`` present from absent). ``inf`` as :func:`scaled_error`, and where ``want``
    is all zero but ``got`` is not; 0 for two all-zero (or empty) tensors.

    Shapes: any, equal. Both sides are copied to float64 on the CPU (any dtype, any device).
    """
    if got.shape != want.shape:
        return math.inf
    b = want.detach().to("cpu", torch.float64)
    magnitude = float(b.abs().max()) if b.numel() else 0.0
    if magnitude == 0.0 or not math.isfinite(magnitude):
        a = got.detach().to("cpu", torch.float64)
        return 0.0 if bool((a == b).all()) else math.inf
    return scaled_error(got, want) * max(1.0, magnitude) / magnitude


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


def birkhoff_hopf_convergence(H: torch.Tensor, iterations: int,
                              earlier: int = 0) -> torch.Tensor:
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

    ``earlier``: the bound that many normalisations before the last one (``earlier = 1``: on
    the sums the last normalisation divided by, the exact axis's before its division, one
    contraction fewer: ``expm1(tanh(Δ/4)^{max(2T − 3, 0)}·Δ)``).

    Shapes: ``H [..., n, n]`` -> ``[...]`` float64 (``inf`` where Δ is infinite).

    Raises:
        ValueError: ``iterations < 1`` or ``earlier < 0``.
    """
    if iterations < 1 or earlier < 0:
        raise ValueError(f"iterations, earlier: expected >= 1, >= 0, got {iterations}, "
                         f"{earlier}")
    delta = projective_diameter(H)
    kappa = torch.tanh(delta / 4)
    drift = torch.where(
        torch.isfinite(delta), kappa.pow(max(2 * (iterations - 1) - earlier, 0)) * delta, delta
    )
    return torch.expm1(drift)


def newton_schulz_defect(logits: torch.Tensor, iterations: int
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(defect, amplification)`` per token of the orthostochastic ``H_res = X_T ∘ X_T``,
    ``X_T`` after ``T = iterations`` Newton–Schulz steps ``X ← 1.5 X − 0.5 X Xᵀ X`` from
    ``X₀ = L/‖L‖_F`` (:func:`hcspec.formulas.mhc.orthostochastic`) at ``logits = L``.

    Exact arithmetic: every step maps ``X = U diag(s) Vᵀ`` to ``U diag(f(s)) Vᵀ`` with the
    scalar cubic ``f(s) = 1.5 s − 0.5 s³``, so the singular values of ``X_T`` are ``f^T`` of
    those of ``X₀`` (``svdvals(L)/‖L‖_F ∈ [0, 1]``), and ``‖X_T X_Tᵀ − I‖₂ = max_i |s_i² − 1|``:
    the ``defect``, which bounds every ``|row sum − 1|`` and ``|column sum − 1|`` of ``H_res``
    (spec ``constructions.orthostochastic_inexact``; ``f(1 − e) = 1 − 1.5e² + 0.5e³``, so the
    defect roughly squares each step once ``s`` is near 1, and ``s`` grows ×1.5 per step while
    small: an ill-conditioned ``L`` leaves it near 1, a vacuous bound).

    Rounding: each step's two ``n``-term matrix products move every singular value by at most
    about ``(n + 1)·eps`` (Weyl: by the norm of the product's error, ``‖X‖₂ ≤ 1``), and a move
    made at step ``j`` reaches ``s_T`` multiplied by ``Π_{l>j} |f'(s_l)|`` (``f'(s) = 1.5(1 −
    s²)``, 0 at convergence: rounding does not accumulate once converged, and at most ×1.5
    per step before). So the defect moves by at most ``amplification·(n + 1)·eps`` of the
    compute dtype, ``amplification = max_i 2 s_{i,T} Σ_{j ≤ T} Π_{j < l ≤ T} |f'(s_{i,l−1})|``
    (2 for a converged factor; the constraint rules multiply it by ``(n + 1)·eps``).

    Shapes: ``logits [..., n, n]`` -> two ``[...]`` float64 tensors on the CPU. A zero or
    non-finite ``L`` gives ``inf`` for both.

    Raises:
        ValueError: ``iterations < 1``.
    """
    if iterations < 1:
        raise ValueError(f"iterations: expected >= 1, got {iterations}")
    L = logits.detach().to("cpu", torch.float64)
    norm = torch.linalg.matrix_norm(L)
    bad = ~(torch.isfinite(L).all(dim=-1).all(dim=-1) & (norm > 0))
    s = torch.linalg.svdvals(torch.where(bad[..., None, None], torch.eye(L.shape[-1],
                                         dtype=L.dtype), L))
    s = s / torch.where(bad, 1.0, norm)[..., None]
    carried = torch.zeros_like(s)
    for _ in range(iterations):
        carried = carried * (1.5 * (1.0 - s * s)).abs() + 1.0
        s = 1.5 * s - 0.5 * s * s * s
    defect = (s * s - 1.0).abs().amax(dim=-1)
    amplification = (2.0 * s * carried).amax(dim=-1)
    inf = torch.full_like(defect, math.inf)
    return torch.where(bad, inf, defect), torch.where(bad, inf, amplification)
