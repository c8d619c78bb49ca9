"""Hints from the divergence: fit the declared Sinkhorn–Knopp variant's round count and eps to
the H_res a failing target produced, and say which would match ("the output matches 5 rounds,
not the declared 20"), as the post multiplier's σ-for-2σ hint does for H_post.

Two readings, the first that applies:

* **with** ``logits(x)`` (capability ``logits``): the declared variant
  (:class:`~hcspec.conformance.machinery.sinkhorn_variant.Variant`) is recomputed at the
  target's own H̃_res for every round count up to :data:`MAX_ROUNDS` and every eps of
  :data:`EPS_CANDIDATES`; the fit with the smallest error is named when it removes the error
  (below :data:`MATCH_FRACTION` of the declared variant's, and within the law's allowance
  scale of the run's dtype);
* **without** it: Sinkhorn–Knopp's other-axis error after ``T`` rounds is at most
  ``expm1(κ^{2(T−1)} Δ)`` (Birkhoff–Hopf, :func:`hcspec.conformance.metrics.
  sinkhorn_other_axis_bound`), and Δ is read from H_res itself, so the observed error names the
  most rounds that could have left it: "at most 5 rounds, not the declared 20".

:func:`diagnose` is what the runner asks after a Sinkhorn-family property failed
(:data:`SINKHORN_PROPERTIES`, through :func:`hcspec.conformance.machinery.bug_classes.
known_bug_class`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Final, cast

import torch

from hcspec.conformance import metrics
from hcspec.conformance.machinery.base import Context, f64
from hcspec.conformance.machinery.common import axis_sums
from hcspec.conformance.machinery.sinkhorn_variant import target_logits
from hcspec.conformance.protocol import Conventions, HyperConnectionImpl, has_logits, has_weights
from hcspec.conformance.strategies import Case
from hcspec.formulas import mhc
from hcspec.spec.record import Formula

SINKHORN_PROPERTIES: Final = frozenset({
    "constraints.h_res_other_axis", "constraints.stream_sum_preserved",
    "constraints.h_res_exact_axis", "depth.mhc_bounded",
})
"""Properties whose failure may be a Sinkhorn–Knopp run with other rounds or eps than
declared."""

MAX_ROUNDS: Final = 64
"""The most rounds the fit tries (at least twice the declared count)."""

EPS_CANDIDATES: Final = (0.0, 1e-12, 1e-9, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
"""The eps values the fit tries, added to the start and in the denominators, each alone and
both equal."""

MATCH_FRACTION: Final = 1e-3
"""A fit is named only when its error is below this fraction of the declared variant's."""


@dataclass(frozen=True)
class Fit:
    """The variant that matches the observed H_res best.

    Attributes:
        variant: the declared step record with the fitted rounds and eps.
        error: ``max |H_res − variant(H̃_res)|`` of the fit.
        declared_error: the same for the declared variant.
    """

    variant: Formula
    error: float
    declared_error: float


def declared_formula(conventions: Conventions) -> Formula:
    """The declared step record with its round count made explicit (an undeclared count is
    the paper's default, as every Sinkhorn-family property reads it)."""
    f = conventions.formula
    return dataclasses.replace(f, sinkhorn=dataclasses.replace(
        f.sinkhorn, iterations=f.sinkhorn.effective_iterations))


def _rounds(f: Formula) -> int:
    return f.sinkhorn.effective_iterations


def _eps_pair(f: Formula) -> tuple[float, float]:
    return f.sinkhorn.additive_eps, f.sinkhorn.denominator_eps


def _candidates(declared: Formula) -> list[Formula]:
    add, den = _eps_pair(declared)
    eps_pairs = {(add, den)}
    for eps in EPS_CANDIDATES:
        eps_pairs |= {(eps, den), (add, eps), (eps, eps)}
    rounds = range(1, max(MAX_ROUNDS, 2 * _rounds(declared)) + 1)
    return [dataclasses.replace(declared, sinkhorn=dataclasses.replace(
                declared.sinkhorn, iterations=r, additive_eps=a, denominator_eps=d))
            for a, d in sorted(eps_pairs) for r in rounds]


def fit(logits: torch.Tensor, H: torch.Tensor, declared: Formula) -> Fit:
    """The round count and eps of ``declared`` that bring the variant at ``logits`` closest to
    ``H`` (``max |H − variant(logits)|``; the declared variant wins a tie).

    Shapes: ``logits [..., n, n]``, ``H [..., n, n]``; computed in float64.
    """
    source, target = f64(logits), f64(H)

    def error(v: Formula) -> float:
        got = mhc.h_res(v, source)
        return float((got - target).abs().max()) if torch.isfinite(got).all() else math.inf

    declared_error = error(declared)
    best, best_error = declared, declared_error
    for candidate in _candidates(declared):
        e = error(candidate)
        if e < best_error:
            best, best_error = candidate, e
    return Fit(best, best_error, declared_error)


def fit_text(found: Fit, declared: Formula, dtype: torch.dtype) -> str | None:
    """The hint of a fit that removes the declared variant's error (below
    :data:`MATCH_FRACTION` of it and within 16·(n+1)·eps-scale of the run's dtype), naming
    what differs: rounds ("the output matches 5 rounds, not the declared 20") and eps; None
    otherwise."""
    good = max(1e3 * torch.finfo(dtype).eps, 1e-12)
    if found.variant == declared or not (found.error <= MATCH_FRACTION * found.declared_error
                                         and found.error <= good):
        return None
    parts = []
    got_rounds, want_rounds = _rounds(found.variant), _rounds(declared)
    if got_rounds != want_rounds:
        parts.append(f"the output matches {got_rounds} Sinkhorn–Knopp "
                     f"{declared.sinkhorn.count}, not the declared {want_rounds}")
    (got_add, got_den), (want_add, want_den) = _eps_pair(found.variant), _eps_pair(declared)
    if (got_add, got_den) != (want_add, want_den):
        parts.append(f"eps {got_add:g} added and {got_den:g} in the denominators, not the "
                     f"declared {want_add:g} / {want_den:g}")
    return (f"{'; '.join(parts)} (fitted to the target's H_res at its own logits: error "
            f"{found.error:.2g}, the declared variant's {found.declared_error:.2g}); declare "
            "sinkhorn_iterations / the eps the kernel runs, or run the declared ones")


def rounds_bound(H: torch.Tensor, other_axis_error: float) -> int | None:
    """The most Sinkhorn–Knopp rounds that can leave ``other_axis_error`` on the other axis of
    ``H [n, n]`` (the Birkhoff–Hopf bound ``expm1(κ^{2(T−1)} Δ)`` with ``κ = tanh(Δ/4)``, Δ read
    from ``H``); None when Δ is 0 or not finite, or the error is not positive."""
    delta = float(metrics.projective_diameter(f64(H)))
    if not (math.isfinite(delta) and delta > 0 and other_axis_error > 0):
        return None
    kappa2 = math.tanh(delta / 4) ** 2
    if kappa2 <= 0.0:
        return None
    # expm1(κ^{2(T−1)} Δ) >= e  ⟺  T − 1 <= log(log1p(e)/Δ) / log κ²
    ratio = math.log1p(other_axis_error) / delta
    if ratio >= 1.0:
        return 1
    return 1 + math.floor(math.log(ratio) / math.log(kappa2))


def diagnose(ctx: Context, case: Case) -> str | None:
    """Re-run ``case``: with ``logits`` the fitted rounds and eps (:func:`fit`,
    :func:`fit_text`); without them, the most rounds that could leave the observed other-axis
    error (:func:`rounds_bound`) when fewer than declared. Needs ``weights`` (the reported
    H_res); None when nothing specific is found, or the declared construction is not
    Sinkhorn–Knopp; never raises."""
    try:
        declared = declared_formula(ctx.conventions)
        if declared.construction != "sinkhorn":  # no rounds or eps to fit: no assumed Sinkhorn
            return None
        impl = ctx.build.make(case)
        if not has_weights(impl):
            return None
        x = ctx.inputs.state(case)
        with torch.no_grad():
            H = f64(impl.weights(x)[2]).reshape(-1, case.n, case.n)
            if has_logits(impl):
                logits = f64(target_logits(cast(HyperConnectionImpl, impl), x)[2]).reshape(
                    -1, case.n, case.n)
                return fit_text(fit(logits, H, declared), declared, ctx.dtype)
        if case.n < 2:
            return None
        exact = declared.sinkhorn.exact_axis
        _, other = axis_sums(H, exact)
        errors = (other - 1).abs().amax(dim=-1)
        worst = int(errors.argmax())
        most = rounds_bound(H[worst], float(errors[worst]))
        if most is None or most >= _rounds(declared):
            return None
        return (f"the {'columns' if exact == 'rows' else 'rows'} of H_res are off by "
                f"{float(errors[worst]):.2g} at projective diameter Δ = "
                f"{float(metrics.projective_diameter(H[worst])):.3g}: that is what at most "
                f"{most} Sinkhorn–Knopp rounds leave, not the declared {_rounds(declared)} "
                "(Birkhoff–Hopf; offer logits(x) for an exact fit of the rounds and eps)")
    except Exception:  # a diagnosis never turns into an error of its own
        return None
