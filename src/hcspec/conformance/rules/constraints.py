"""The rules of the mixing's constraints, each with the budget it is written in:
Sinkhorn–Knopp's exactly normalised axis, the other axis (Birkhoff–Hopf), the
Sinkhorn–Knopp gradient, the bounds a check derives from the declaration (the depth
stack's, a declared additive ε) and a figure only reported."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import torch

from hcspec.conformance import metrics
from hcspec.conformance.rules.base import FLOOR_MULTIPLE, Allowance, Precision, Rule, eps
from hcspec.conformance.rules.forward import law, law_allowance


# --- doubly stochastic: the exactly normalised axis ---------------------------------------------
# Sinkhorn–Knopp's last step divides each row (or column) by its sum, so that sum is 1 up to the
# rounding of an n-term sum and a division: (n + 1)·eps. We allow 16·(n + 1)·eps for the
# log-domain variants (logsumexp and exp each add a few eps). When H_res is only available by
# probing (pseudo-inverse), the probe's error dominates and :func:`law` applies instead.
def exact_axis(dtype: torch.dtype, n: int, probed: bool) -> float:
    """Tolerance on ``|sum − 1|`` along the axis that Sinkhorn–Knopp normalised last."""
    if probed:
        return law(dtype) * max(1, n)
    return 16.0 * (n + 1) * eps(dtype)


SUM_FLOOR = 0.5
"""The smallest sum a normalisation divides by in the regime the constraints compare where
no convergence bound is given (the other axis, vacuous bounds): ``s ≥ ½``, so a denominator
eps δ leaves ``s/(s + δ)`` within ``δ/SUM_FLOOR = 2δ`` of 1."""


def sinkhorn_eps_center(p: Precision) -> float:
    """How far below 1 the declared formula's fixed point puts the sums along the exact axis:
    ``δ`` for a declared denominator eps δ (``p.sinkhorn_eps``), else 0. At the fixed point of
    ``M ← M/(M 1 + δ)`` alternating with ``M ← M/(1ᵀM + δ)`` both axes share one sum σ, and
    ``σ = σ/(σ + δ)`` gives ``σ = 1 − δ`` (docs/conformance.md, "Declared eps"): the exact
    axis is compared with ``1 − δ``, not 1."""
    return max(p.sinkhorn_eps, 0.0)


def sinkhorn_eps_deviation(p: Precision, axis: str, convergence: float = 1.0) -> float:
    """How far a declared denominator eps δ (``p.sinkhorn_eps``) moves Sinkhorn–Knopp's sums
    from where the checks compare them (docs/conformance.md, "Declared eps"), 0 without one.

    ``"exact"`` (compared with ``1 − δ``, :func:`sinkhorn_eps_center`): the last division
    leaves ``s/(s + δ)``, whose distance from ``1 − δ`` is ``δ·|s − (1 − δ)|/(s + δ)``; the
    sums ``s`` it divided by are the other axis's one normalisation earlier, within
    ``convergence`` ``c`` of 1 (the Birkhoff–Hopf bound one contraction earlier,
    ``metrics.birkhoff_hopf_convergence(..., earlier=1)``; ``s ≥ 1/(1 + c)``), so
    ``δ·c·(1 + c)`` with ``c`` capped at 1 (:data:`SUM_FLOOR`): at most ``2δ``, 0 at a
    converged token. ``"other"`` (compared with 1): the deviation of its own normalisation
    one step earlier (``2δ``) plus the last division's ``2δ`` carried through the other sums:
    ``4δ (1 + min(c, 1))``. An additive eps (``softmax + eps``) moves no sum: every
    normalisation divides it out."""
    delta = p.sinkhorn_eps
    if delta <= 0.0:
        return 0.0
    c = min(max(convergence, 0.0), 1.0)
    if axis == "exact":
        return delta * c * (1.0 + c)
    return 2.0 * (delta / SUM_FLOOR) * (1.0 + c)


def summation_allowance(p: Precision, n: int, terms: int) -> Allowance:
    """The sums of an exact construction that adds ``terms`` weighted matrices (mHC-lite:
    ``K`` permutations, spec ``constructions.birkhoff_exact``), whose unit sums only the
    rounding can move. Every row sum adds all ``K`` weights once (each permutation puts its
    weight once in every row and column), after a softmax that divides by a ``K``-term sum,
    then the row's ``n`` entries: recursive summation's worst case (Higham, Thm 4.4:
    ``(m − 1)·u·Σ|x|`` for ``m`` terms, ``u = eps/2``, ``Σ a_k = 1``) gives
    ``(2(K − 1) + n)·u ≤ (K + n)·eps`` in the compute dtype, plus the output's rounding: the
    allowance, never below :func:`exact_axis_allowance`'s. The floor (what a correct impl
    shows) is the random-walk size ``√K·eps + (n + 1)·eps``: rounding errors of both signs
    add in quadrature (measured: a float32 sum of 8! = 40320 weighted permutations misses by
    5–40 eps pairwise, by 566 eps = 6.75e-5 summed in blocks; the allowance is 40328 eps =
    4.8e-3)."""
    base = exact_axis_allowance(p, n, False)
    e = eps(p.compute if p.low else p.output)
    rounding = p.rounding if p.low else 0.0
    floor = math.sqrt(terms) * e + (n + 1) * e + rounding
    return Allowance(max(base.floor, floor), max(base.allowance, (terms + n) * e + rounding))


def exact_axis_allowance(p: Precision, n: int, probed: bool,
                         convergence: float = 1.0) -> Allowance:
    """:data:`EXACT_AXIS` for ``n`` streams: float32/float64 (or probed): ``16·(n + 1)·eps``
    (probed: the law's ``n``-fold); below float32, along the chain: the floor
    ``(n + 1)·eps(compute) + eps(output)`` (the last normalisation in the compute dtype, then
    every entry rounded to the output by up to eps/2 of itself: the sum by eps/2, counted
    twice) and :data:`FLOOR_MULTIPLE` times it — at most ``16·(n + 1)·eps(compute)`` from the
    compute dtype's side, so an impl computing in bfloat16 itself keeps its own budget.
    A declared denominator eps adds :func:`sinkhorn_eps_deviation` at ``convergence`` (the
    Birkhoff–Hopf bound on the sums the last normalisation divided by; the sums themselves are
    compared with ``1 − δ``); to the floor, half of it."""
    deviation = sinkhorn_eps_deviation(p, "exact", convergence)
    if probed or not p.low:
        return Allowance((n + 1) * eps(p.output) + deviation / 2,
                         exact_axis(p.output, n, probed) + deviation)
    floor = (n + 1) * eps(p.compute) + p.rounding
    return Allowance(floor + deviation / 2, max(FLOOR_MULTIPLE * floor,
                     exact_axis(p.compute, n, False) + p.rounding) + deviation)


def _exact_axis(p: Precision, g: Mapping[str, Any]) -> Allowance:
    terms = int(g.get("terms", 0))
    if terms and not g.get("probed", False):
        return summation_allowance(p, int(g["n"]), terms)
    rounding = exact_axis_allowance(p, int(g["n"]), bool(g.get("probed", False)),
                                    float(g.get("previous", 1.0)))
    # an orthostochastic H_res: every sum misses 1 by up to the Newton–Schulz defect (a
    # theorem's bound, attained when a singular vector is a coordinate vector), then rounds
    defect = float(g.get("defect", 0.0))
    return Allowance(rounding.floor + defect, rounding.allowance + defect)


EXACT_AXIS: Final = Rule(
    "exact_axis", "16·(n + 1)·eps on Sinkhorn–Knopp's last axis (probed: the law's × n); "
    "bfloat16/float16 along the chain: 4 × ((n + 1)·eps(compute) + eps(output)), at least "
    "16·(n + 1)·eps(compute) + eps(output); a declared denominator eps δ: the sums compared "
    "with 1 − δ (the declared formula's fixed point), plus δ·c(1 + c) for the Birkhoff–Hopf "
    "bound c ≤ 1 one normalisation earlier (`previous`; not given: 1, so 2δ)",
    "the last step divides by the sum (by s + δ: s/(s + δ) is δ|s − (1 − δ)|/(s + δ) from "
    "1 − δ, and s ≥ 1/(1 + c)): "
    "(n + 1) roundings of the compute dtype, then one rounding of each entry to the output; "
    "an exact construction of `terms` summed matrices (mHC-lite's K permutations): the "
    "worst case of recursive summation (K + n)·eps, floor √K·eps + (n + 1)·eps; an "
    "orthostochastic H_res (no exact axis): plus its Newton–Schulz `defect` ‖QQᵀ − I‖₂ "
    "(constructions.orthostochastic_inexact) at the target's logits, with the rounding the "
    "iterations amplify",
    ("n", "probed?", "terms?", "defect?", "previous?"), _exact_axis)


# --- doubly stochastic: the other axis (Birkhoff–Hopf bound) -------------------------------------
def sinkhorn_other_axis_bound(
    H: torch.Tensor, iterations: int, dtype: torch.dtype, probed: bool
) -> torch.Tensor:
    """Upper bound on ``|sum − 1|`` along the axis Sinkhorn–Knopp did *not* normalise last:
    the convergence bound :func:`hcspec.conformance.metrics.birkhoff_hopf_convergence` (its
    docstring gives the derivation and the measurements) plus the :func:`exact_axis`
    tolerance of ``dtype`` for the rounding.

    Shapes: ``H [..., n, n]`` -> ``[...]`` float64 (``inf`` where Δ is infinite).

    Raises:
        ValueError: ``iterations < 1``.
    """
    return (metrics.birkhoff_hopf_convergence(H, iterations)
            + exact_axis(dtype, H.shape[-1], probed))


def mixing_allowance(p: Precision, n: int) -> Allowance:
    """The rounding of ``1ᵀ(H_res X)`` relative to ``Σ|X|`` beyond H_res's own sums: the
    law's budget in float32/float64; below float32 along the chain: the state rounded to the
    output (eps/2), ``H_res X`` in the compute dtype (``n·eps(compute)``) and the result
    rounded to the output (eps/2): floor ``eps(output) + n·eps(compute)``, allowance
    :data:`FLOOR_MULTIPLE` times it."""
    if not p.low:
        return Allowance(eps(p.output), law(p.output))
    floor = eps(p.output) + n * eps(p.compute)
    return Allowance(floor, FLOOR_MULTIPLE * floor)


def _other_axis(p: Precision, g: Mapping[str, Any]) -> Allowance:
    exact = _exact_axis(p, g)
    convergence = float(g["convergence"])
    # the declared eps: the other axis's deviation replaces the exact axis's
    deviation = (sinkhorn_eps_deviation(p, "other", convergence)
                 - sinkhorn_eps_deviation(p, "exact", 1.0))
    allowance = convergence + exact.allowance + deviation
    # a correct impl may be off by the truncation itself
    floor = convergence + exact.floor + deviation / 2
    if g.get("norm"):  # ‖H_res‖₂ ≤ √(‖H_res‖₁‖H_res‖_∞): the gain beyond 1
        # both: an orthostochastic H_res misses 1 on both axes by its defect (`convergence`)
        first = exact.allowance + (convergence if g.get("both") else 0.0)
        allowance = math.sqrt((1 + allowance) * (1 + first)) - 1
    if g.get("mixing"):  # through the mixing: its own rounding on top
        mixing = mixing_allowance(p, int(g["n"]))
        return Allowance(floor + mixing.floor, allowance + mixing.allowance)
    return Allowance(floor, allowance)


def sinkhorn_convergence(H: torch.Tensor, iterations: int) -> torch.Tensor:
    """The convergence part of the Birkhoff–Hopf bound per token (``[...]`` float64, ``inf``
    where Δ is): :func:`sinkhorn_other_axis_bound` without its rounding term, which
    :data:`SINKHORN_OTHER_AXIS` adds along the dtype chain."""
    return sinkhorn_other_axis_bound(H, iterations, torch.float64, False) - (
        exact_axis(torch.float64, H.shape[-1], False))


def other_axis_allowances(p: Precision, convergence: torch.Tensor, n: int, probed: bool,
                          mixing: bool = False, norm: bool = False,
                          terms: int = 0, both: bool = False) -> torch.Tensor:
    """:data:`SINKHORN_OTHER_AXIS` per token (``convergence [...]`` float64, e.g.
    :func:`sinkhorn_convergence`; for choosing the worst token a check then compares);
    ``terms``: an exact construction's summation length (:func:`summation_allowance`);
    ``both``: the convergence term applies to both axes (an orthostochastic ``H_res``)."""
    flat = [_other_axis(p, {"n": n, "probed": probed, "convergence": float(c),
                            "mixing": mixing, "norm": norm, "terms": terms,
                            "both": both}).allowance
            for c in convergence.flatten().tolist()]
    return torch.tensor(flat, dtype=torch.float64).reshape(convergence.shape)


SINKHORN_OTHER_AXIS: Final = Rule(
    "sinkhorn_other_axis", "the Birkhoff–Hopf convergence bound expm1(tanh(Δ/4)^{2(T−1)}·Δ) "
    "for the declared rounds T at the measured projective diameter Δ, plus the exact axis's "
    "rounding allowance along the chain (stream sum: plus the mixing's rounding, the law's "
    "budget in float64/float32, 4 × (eps(output) + n·eps(compute)) below; non-expansiveness: "
    "√((1 + other)(1 + exact)) − 1 plus the mixing's rounding); plus 4δ(1 + min(bound, 1)) "
    "for a declared denominator eps δ; a declared exact construction (mHC-lite): convergence 0 "
    "and the exact axis's summation allowance for its `terms`; a declared orthostochastic "
    "H_res: the convergence is its Newton–Schulz defect ‖QQᵀ − I‖₂ (+ amplified rounding), on "
    "`both` axes for the norm",
    "Franklin & Lorenz: each round contracts Hilbert's metric by tanh(Δ/4)²; rounding does not "
    "accumulate in a contraction",
    ("n", "convergence", "probed?", "mixing?", "norm?", "terms?", "both?"), _other_axis)

# --- the Sinkhorn–Knopp gradient, bounds derived from the declaration ---------------------------
def _fixed_point(p: Precision, g: Mapping[str, Any]) -> Allowance:
    conditioning = float(g.get("conditioning", 0.0))
    if p.low and g.get("oracle") is not None:
        oracle = law_allowance(p, {"oracle": g["oracle"], "roundings": g.get("roundings", 1)})
        return Allowance(oracle.floor, oracle.allowance + conditioning)
    return Allowance(eps(p.output), law(p.output) + conditioning)


SINKHORN_FIXED_POINT: Final = Rule(
    "sinkhorn_fixed_point", "law(dtype) against the truncated forward's gradient; declared "
    "implicit: law + 10·n·(column error)/(1 − σ₂(H_res)²) (the `conditioning` input) against "
    "the fixed-point gradient; bfloat16/float16 with a measured `oracle` (the kit's gradient "
    "along the chain: the upstream gradient rounded to the output, Sinkhorn–Knopp and its "
    "backward in the compute dtype), the law's 8 × max(oracle, eps/2·roundings) in place of "
    "law(dtype)",
    "the implicit gradient is exact only at the fixed point; below float32 FlashAttention's "
    "rule, as the law's", ("conditioning?", "oracle?", "roundings?"), _fixed_point)


def _given_bound(p: Precision, g: Mapping[str, Any]) -> Allowance:
    """A bound the check derived from the declaration (the fixed-point gradient's, the depth
    stack's accumulated one) is the allowance; its floor the law's unit."""
    return Allowance(float(g.get("floor", eps(p.output))), float(g["bound"]))


DEPTH_BOUND: Final = Rule(
    "depth_bound", "the per-sublayer allowances of the constraints (exact axis, Birkhoff–Hopf, "
    "law or measured law per layer) accumulated over the stack",
    "each sublayer adds its own column error and rounding", ("bound", "floor?"), _given_bound)


def _exact_up_to_eps(p: Precision, g: Mapping[str, Any]) -> Allowance:
    chain = Precision.of(g["dtype"], g.get("compute_dtype"), g.get("output_dtype"))
    rounding = (int(g["n"]) + 1) * eps(chain.compute) + chain.rounding
    deviation = float(g["deviation"])
    return Allowance(deviation + rounding, deviation + FLOOR_MULTIPLE * rounding)


EXACT_UP_TO_EPS: Final = Rule(
    "exact_up_to_eps", "where the declared formula has an additive ε (DeepSeek-V4's σ + ε, "
    "softmax + ε, ε in the denominators) the saturated weights are exact only up to it: the "
    "measured deviation of the reported weights from the exact 0/1 pattern, times the terms it "
    "multiplies, plus 4 × the chain's rounding ((n + 1)·eps(compute) + eps(output)) of the "
    "precision run, relative to max|X|",
    "ε is declared, so it is no error; what remains is the rounding of an n-term sum",
    ("n", "deviation", "dtype", "compute_dtype?", "output_dtype?"), _exact_up_to_eps)
REPORTED: Final = Rule(
    "reported", "a figure reported, not bounded (HC's growth over a stack): the allowance is "
    "the largest float64, so the report keeps the largest seen", "no theorem bounds it",
    ("bound",), _given_bound)
