"""The declared Sinkhorn–Knopp variant as the kit computes it, and its backward: the shared
machinery of the variant family and of the finite-difference checks (gradients, stack) that
name an undeclared implicit Sinkhorn backward as a failure's cause.

A variant is a step record, :class:`hcspec.spec.record.Formula` (the declared one:
``ctx.conventions.formula``), applied in float64 with the formulas layer
(:func:`hcspec.formulas.mhc.h_res`); :func:`describe` and :func:`differences` put one in the
words of a report, :func:`distance` counts its departures (the divergence search prefers the
fewest); :func:`kit_gradients` is its unrolled and fixed-point VJP;
:func:`diagnose` names the variant a target's ``H_res`` matches (the variant family's
detail); :func:`implicit_gradient_cause` is the diagnosis the gradient checks attach;
:data:`UNROLLED` the requirement of checks that compare with finite differences of the
truncated forward.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from typing import TypeVar

import torch

from hcspec.conformance import metrics, rules, salts, strategies
from hcspec.conformance.machinery.base import Context, f64
from hcspec.conformance.machinery.common import axis_sums
from hcspec.conformance.machinery.divergence import nearest
from hcspec.conformance.machinery.errors import PropertyFailure
from hcspec.conformance.machinery.requirements import Requirement
from hcspec.conformance.protocol import (
    LOGITS,
    WEIGHTS,
    HyperConnectionImpl,
    Weights,
    has_logits,
)
from hcspec.conformance.strategies import Case
from hcspec.formulas import mhc
from hcspec.formulas.sinkhorn import fixed_point_vjp, positive_start, softmax_axis
from hcspec.spec.record import (
    AXES,
    COUNTS,
    STARTS,
    Axis,
    Count,
    Formula,
    SinkhornSpec,
    Start,
    birkhoff_permutations,
)

_FIRST = {"exp": "exp-first", "softmax": "softmax-first", "sigmoid": "sigmoid-first"}
_COUNTED = {"rounds": "rounds", "rounds_from_softmax": "rounds from the softmax",
            "normalisations": "normalisations"}


def declared(ctx: Context) -> Formula:
    """The declared step record with its Sinkhorn–Knopp count resolved (an undeclared count is
    the mHC paper's 20), the form the variant search compares with."""
    f = ctx.conventions.formula
    return dataclasses.replace(f, sinkhorn=dataclasses.replace(
        f.sinkhorn, iterations=f.sinkhorn.effective_iterations))


def describe(f: Formula) -> str:
    """``H_res`` of ``f`` in words, e.g. ``exp-first, 20 rounds (rows exact), no eps``; another
    construction: ``birkhoff (mHC-lite) over all n! permutations``, ``orthostochastic, 10
    Newton–Schulz steps``."""
    sk = f.sinkhorn
    if f.construction == "birkhoff":
        perms = ("all n! permutations" if f.permutations is None else
                 f"{len(f.permutations)} declared permutations")
        return f"birkhoff (mHC-lite) over {perms}" + (
            ", transposed (Hᵀ)" if f.transposed else "")
    if f.construction == "orthostochastic":
        return f"orthostochastic, {f.newton_schulz_iterations} Newton–Schulz steps" + (
            ", applied to H̃ᵀ" if f.logits_transposed else "") + (
            ", transposed (Hᵀ)" if f.transposed else "")
    eps = ("no eps" if sk.additive_eps == 0 and sk.denominator_eps == 0 else
           f"eps {sk.additive_eps:g} added, {sk.denominator_eps:g} in the denominators")
    text = (f"{_FIRST[sk.start]}, {sk.effective_iterations} {_COUNTED[sk.count]} "
            f"({sk.exact_axis} exact), {eps}")
    text += ", applied to H̃ᵀ" if f.logits_transposed else ""
    return text + (", transposed (Hᵀ)" if f.transposed else "")


def _same_count(f: Formula, declared: Formula) -> bool:
    """The same counting, where a softmax start counted from the softmax is the natural
    reading of a declared count of rounds."""
    a, b = f.sinkhorn, declared.sinkhorn
    return a.count == b.count or (
        a.start == "softmax" != b.start and a.count == "rounds_from_softmax"
        and b.count == "rounds")


def differences(f: Formula, declared: Formula) -> str:
    """How ``H_res`` of ``f`` differs from the ``declared`` one, in the words of a report."""
    a, b = f.sinkhorn, declared.sinkhorn
    parts = []
    if a.start != b.start:
        parts.append(f"the {a.start}-first variant, not the declared {b.start}-first")
    if a.effective_iterations != b.effective_iterations or not _same_count(f, declared):
        parts.append(f"{a.effective_iterations} {a.count}, not the declared "
                     f"{b.effective_iterations} {b.count}")
    if a.exact_axis != b.exact_axis:
        parts.append(f"{a.exact_axis} normalised last, not the declared {b.exact_axis}")
    if (a.additive_eps, a.denominator_eps) != (b.additive_eps, b.denominator_eps):
        parts.append(f"eps {a.additive_eps:g} added / {a.denominator_eps:g} in the "
                     f"denominators, not the declared {b.additive_eps:g} / "
                     f"{b.denominator_eps:g}")
    if f.transposed != declared.transposed:
        parts.append("Hᵀ (the transpose of the declared variant's H_res: orientation)")
    if f.logits_transposed != declared.logits_transposed:
        parts.append("the declared variant applied to H̃ᵀ (the logits read in the other "
                     "orientation)")
    return "; ".join(parts)


def distance(f: Formula, declared: Formula) -> int:
    """How many of the fields making ``H_res`` differ from ``declared`` (the diagnosis prefers
    the explanation with the fewest; a count read from the softmax is the same count)."""
    a, b = f.sinkhorn, declared.sinkhorn
    differing = [a.start != b.start, a.exact_axis != b.exact_axis,
                 a.additive_eps != b.additive_eps, a.denominator_eps != b.denominator_eps,
                 a.effective_iterations != b.effective_iterations,
                 f.transposed != declared.transposed,
                 f.logits_transposed != declared.logits_transposed,
                 not _same_count(f, declared)]
    return sum(differing)


# --- the diagnosis: which variant a target's H_res matches ---------------------------------

SEARCH_ITERATIONS = 64
"""Iteration counts the diagnosis tries (1 … this, and the declared count)."""
COMMON_EPS = (0.0, 1e-6)
"""The eps values the diagnosis tries besides the declared ones."""

T = TypeVar("T")


def _spec(sk: SinkhornSpec, *, start: Start | None = None, count: Count | None = None,
          axis: Axis | None = None, eps: tuple[float, float] | None = None,
          iterations: int | None = None) -> SinkhornSpec | None:
    """``sk`` with the given fields changed, or None where the record rejects the combination
    (a count from the softmax without a softmax start)."""
    add, den = (sk.additive_eps, sk.denominator_eps) if eps is None else eps
    try:
        return SinkhornSpec(start or sk.start, count or sk.count, axis or sk.exact_axis, add, den,
                            iterations or sk.iterations)
    except ValueError:
        return None


def _at(f: Formula, iterations: int) -> Formula:
    """``f`` with its Sinkhorn–Knopp count set to ``iterations``."""
    return dataclasses.replace(f, sinkhorn=dataclasses.replace(f.sinkhorn,
                                                               iterations=iterations))


def _recounted(f: Formula) -> list[Formula]:
    """``f`` at every iteration count the diagnosis tries (1 … :data:`SEARCH_ITERATIONS`)."""
    return [_at(f, t) for t in range(1, SEARCH_ITERATIONS + 1)]


def _eps_pairs(declared: Formula) -> list[tuple[float, float]]:
    """The (added, denominator) eps pairs the diagnosis tries: the declared and the common."""
    sk = declared.sinkhorn
    return sorted({(sk.additive_eps, sk.denominator_eps)}
                  | {(a, b) for a in COMMON_EPS for b in COMMON_EPS})


def _declared_first(values: tuple[T, ...], value: T) -> list[T]:
    return sorted(values, key=lambda v: v != value)


def _structures(declared: Formula) -> Iterator[Formula]:
    """Every variant the diagnosis tries at the declared iteration count."""
    sk = declared.sinkhorn
    for start, count, axis, eps, transposed, flipped in itertools.product(
            _declared_first(STARTS, sk.start), _declared_first(COUNTS, sk.count),
            _declared_first(AXES, sk.exact_axis), _eps_pairs(declared), (False, True),
            (False, True)):
        spec = _spec(sk, start=start, count=count, axis=axis, eps=eps)
        if spec is not None:
            yield dataclasses.replace(declared, sinkhorn=spec, transposed=transposed,
                                      logits_transposed=flipped)


def _moves(declared: Formula) -> Callable[[Formula], Iterator[Formula]]:
    """The single changes the greedy part of the diagnosis makes: another start, count, exact
    axis or eps pair, either orientation flag flipped, one round more or fewer, or the
    declared count back."""
    def moves(f: Formula) -> Iterator[Formula]:
        sk = f.sinkhorn
        t = sk.effective_iterations
        specs = [*(_spec(sk, start=v) for v in STARTS), *(_spec(sk, count=v) for v in COUNTS),
                 *(_spec(sk, axis=v) for v in AXES),
                 *(_spec(sk, eps=pair) for pair in _eps_pairs(declared)),
                 *(_spec(sk, iterations=v) for v in (t - 1, t + 1,
                                                     declared.sinkhorn.effective_iterations)
                   if v >= 1)]
        yield from (dataclasses.replace(f, sinkhorn=spec) for spec in specs if spec is not None)
        yield dataclasses.replace(f, transposed=not f.transposed)
        yield dataclasses.replace(f, logits_transposed=not f.logits_transposed)

    return moves


def diagnose(H: torch.Tensor, logits: torch.Tensor, declared: Formula, tol: float) -> str:
    """Which known variant the target's ``H`` matches (its differences from ``declared``), or
    the closest one when none is within ``tol``
    (:func:`hcspec.conformance.machinery.divergence.nearest`: the structures at the declared
    count and the declared variant at every count first, then single changes)."""
    def error(f: Formula) -> float:
        return metrics.scaled_error(H, mhc.h_res(f, logits))

    match = nearest(
        error, declared, tol, distance=lambda f: distance(f, declared),
        candidates=[*_structures(declared), *_recounted(declared)], moves=_moves(declared))
    best = match.formula
    if not match.exact:
        return (f"H_res matches no variant the kit knows; the closest is {describe(best)} "
                f"(error {match.error:.3g})")
    counts = [f.sinkhorn.effective_iterations for f in _recounted(best) if error(f) <= tol]
    resolved = declared.sinkhorn.effective_iterations
    if resolved in counts:
        best = _at(best, resolved)
    elif counts:
        best = _at(best, counts[0])
    found = error(best)
    text = f"H_res matches {differences(best, declared)} ({describe(best)}; error {found:.3g})"
    iterations = best.sinkhorn.effective_iterations
    if len(counts) > 1 and iterations != resolved:
        text += (f"; every count from {counts[0]} to {counts[-1]} matches (converged on this "
                 "case)" if counts == list(range(counts[0], counts[-1] + 1)) else
                 f"; the counts {counts} match")
    return text


def target_logits(impl: HyperConnectionImpl, x: torch.Tensor,
                  formula: Formula | None = None) -> Weights:
    """``impl.logits(x)``, checked for shapes ``[B,T,n]``, ``[B,T,n]``, ``[B,T,n,n]`` (for a
    ``formula`` with a ``birkhoff`` construction ``H̃_res [B,T,K]``, K its permutations).

    Raises:
        PropertyFailure: no ``logits`` or a result of another form.
    """
    if not has_logits(impl):
        raise PropertyFailure("the impl has no logits(x), although the run's first impl "
                              "offered it")
    got: object = impl.logits(x)
    batch, tokens, n, _ = x.shape
    res_shape: tuple[int, ...] = (n, n)
    if formula is not None and formula.construction == "birkhoff":
        res_shape = (len(birkhoff_permutations(formula, n)),)
    shapes = ((batch, tokens, n), (batch, tokens, n), (batch, tokens, *res_shape))
    if not (isinstance(got, (tuple, list)) and len(got) == 3 and all(
            isinstance(t, torch.Tensor) and tuple(t.shape) == s
            for t, s in zip(got, shapes, strict=True))):
        raise PropertyFailure("logits(x) must return (H̃_pre [B,T,n], H̃_post [B,T,n], "
                              "H̃_res [B,T,n,n]) tensors (a declared birkhoff construction: "
                              "H̃_res [B,T,K], one logit per permutation)")
    return (got[0], got[1], got[2])


FIXED_POINT_FACTOR = 10.0
"""The declared-implicit tolerance: law + this × n × (column error) / (1 − σ₂(H)²)."""


def start_log(logits: torch.Tensor, f: Formula) -> torch.Tensor:
    """``log M⁰`` of ``f``'s Sinkhorn–Knopp variant (the fixed-point gradient is taken w.r.t.
    it; the orientation flags are not applied: the declared step has none)."""
    sk = f.sinkhorn
    axis = softmax_axis(sk.count, sk.exact_axis, sk.effective_iterations)
    return torch.log(positive_start(logits, sk.start, axis, sk.additive_eps))


def kit_gradients(logits: torch.Tensor, G: torch.Tensor, v: Formula,
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(unrolled, fixed-point, H)``: the VJPs of ``⟨G, H_res⟩`` w.r.t. ``H̃_res`` in float64
    — autograd through the declared truncated forward, and implicit differentiation at its
    result chained through ``log M⁰`` — and the forward's ``H``."""
    L = logits.detach().clone().requires_grad_(True)
    H = mhc.h_res(v, L)
    (unrolled,) = torch.autograd.grad((H * G).sum(), L)
    L2 = logits.detach().clone().requires_grad_(True)
    log_start = start_log(L2, v)
    Hd = H.detach()
    (implicit,) = torch.autograd.grad(log_start, L2,
                                      grad_outputs=fixed_point_vjp(Hd, G))
    return unrolled, implicit, Hd


def fixed_point_tolerance(ctx: Context, H: torch.Tensor, exact_axis: str) -> float:
    """``law + FIXED_POINT_FACTOR · n · e / (1 − σ₂²)``: ``e`` the largest sum error along
    the axis not normalised last (the forward's measured convergence), ``σ₂`` the largest
    second singular value of ``H`` (the conditioning of the fixed-point system; an implicit
    backward evaluated at another point within ``e`` of the fixed point differs by O(e)
    divided by the spectral gap)."""
    _, other = axis_sums(H, exact_axis)
    e = float((other - 1).abs().max())
    sigma = torch.linalg.svdvals(H)
    second = float(sigma[..., 1].max()) if H.shape[-1] > 1 else 0.0
    gap = max(1.0 - second * second, 1e-12)
    return rules.SINKHORN_FIXED_POINT.apply(
        ctx.precision,
        conditioning=FIXED_POINT_FACTOR * H.shape[-1] * e / gap).allowance


def gradient_errors(ctx: Context, case: Case) -> tuple[float, float, float, str]:
    """``(error against the unrolled gradient, error against the fixed-point gradient, the
    fixed-point tolerance, the declared rounds in words)`` of the target's
    ``∂⟨G, H_res(x)⟩/∂x`` at the case."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case).requires_grad_(True)
    res = target_logits(impl, x)[2]
    H = ctx.observe.weights(impl, x)[2]
    G = strategies.gaussian(tuple(H.shape), case.seed, salts.SINKHORN_UPSTREAM.at(),
                            torch.float64, "cpu")
    if not res.requires_grad:
        raise PropertyFailure("logits(x) is not differentiable w.r.t. x (the capability "
                              "promises it): the kit cannot chain its Sinkhorn gradient")
    if not H.requires_grad:
        raise PropertyFailure(
            "weights(x) carries no autograd graph: its H_res does not require grad although "
            "logits(x) does, so ∂⟨G, H_res⟩/∂x is zero (the weights capability promises "
            "weights differentiable w.r.t. x)",
            hint="weights(x) detached or computed under no_grad, or the Sinkhorn gradient "
                 "stopped (H_res computed from detached logits)?")
    (target,) = torch.autograd.grad((H * G.to(H)).sum(), x, retain_graph=True,
                                    allow_unused=True)
    target = torch.zeros_like(x) if target is None else target
    v = declared(ctx)
    unrolled_k, implicit_k, H64 = kit_gradients(f64(res), G, v)
    unrolled, implicit = (torch.autograd.grad(res, x, grad_outputs=k.to(res), retain_graph=True)[0]
                          for k in (unrolled_k, implicit_k))
    return (metrics.scaled_error(target, unrolled), metrics.scaled_error(target, implicit),
            fixed_point_tolerance(ctx, H64, v.sinkhorn.exact_axis),
            f"{v.sinkhorn.effective_iterations} {v.sinkhorn.count}")


UNROLLED = Requirement(
    "sinkhorn_gradient unrolled",
    "compares with finite differences of the truncated forward; the impl declares "
    "sinkhorn_gradient='implicit' (the gradient of the Sinkhorn limit, checked by "
    "variant.sinkhorn_gradient)",
    lambda s: s.conventions.sinkhorn_gradient == "unrolled")
"""For the finite-difference checks: the Sinkhorn backward is declared to be the truncated
forward's."""


def implicit_gradient_cause(ctx: Context, case: Case) -> str | None:
    """Why a gradient check failed, when the cause is an undeclared implicit Sinkhorn backward:
    the target's ``∂⟨G, H_res⟩/∂x`` misses the truncated forward's gradient and matches the
    fixed-point gradient the kit computes. None when the target cannot show it (not mHC, no
    ``logits`` or ``weights``) or the cause is another; never raises."""
    if not (ctx.kind == "mhc" and LOGITS in ctx.capabilities and WEIGHTS in ctx.capabilities
            and ctx.conventions.sinkhorn_gradient == "unrolled"):
        return None
    try:
        errors = gradient_errors(ctx, case)
    except Exception:  # a diagnosis only: the failing check's own message stands
        return None
    err_unrolled, err_implicit, fixed_tol, rounds = errors
    if (err_unrolled <= rules.SINKHORN_FIXED_POINT.apply(ctx.precision).allowance
            or not err_implicit <= fixed_tol):
        return None
    return (f"the Sinkhorn backward is the implicit (fixed-point) gradient of the limit (error "
            f"{err_implicit:.3g} against the kit's), not the gradient of the truncated {rounds} "
            f"forward (error {err_unrolled:.3g}); declare sinkhorn_gradient='implicit' if "
            "intended (variant.sinkhorn_gradient)")
