"""Declared-conventions family: what an adapter declares
(:class:`hcspec.conformance.protocol.Conventions`)
holds — the branch receives the declared input, ``expand`` replicates (HC: ``X₀ = 1_n h₀ᵀ``),
``reduce`` sums or averages the streams as declared (HC: ``h_L = 1ᵀ X_L``), and every impl the
factory builds declares the same conventions (the report shows one declaration).
"""

from __future__ import annotations

import math

import torch

from hcspec.conformance import rules, salts, tolerances
from hcspec.conformance.properties.base import Context, Inconclusive, f64
from hcspec.conformance.properties.cases import Cases
from hcspec.conformance.properties.declaration import declare
from hcspec.conformance.properties.requirements import (
    WEIGHTS_OR_PROBING,
    Requirement,
    Subject,
    capability,
)
from hcspec.conformance.protocol import (
    EXPAND,
    REDUCE,
    WEIGHTS,
    HyperConnectionImpl,
    conventions_of,
)
from hcspec.conformance.strategies import Case, gaussian

BASE = ("shape.output",)
NORM_SLACK = 1e-2


@declare(
    "conventions.declaration",
    statement="every impl the factory builds declares the same conventions",
    prerequisites=BASE)
def check_declaration(ctx: Context, case: Case) -> None:
    """Every impl declares the conventions of the first one the run inspected."""
    impl = ctx.build.make(case)
    try:
        declared = conventions_of(impl)
    except TypeError as exc:
        ctx.record.require(False, str(exc))
        raise
    ctx.record.require(declared == ctx.conventions,
                       f"impl for n={case.n}, d={case.d}, layer_index={case.layer_index} declares "
                       f"{declared}, the run's first impl declared {ctx.conventions}")


@declare(
    "conventions.branch_input",
    statement="the branch receives the declared input (x_in = h_preᵀX, or its declared norm)",
    theorems=("layout.paper_rows",), tolerance=rules.LAW,
    cases=Cases(d_more_than_n=True, extreme_scales=False),
    prerequisites=(*BASE, "shape.branch_once"))
def check_branch_input(ctx: Context, case: Case) -> None:
    """The branch receives the declared input: ``x_in = h_preᵀ X`` lies in the row space of X;
    a declared norm is ``c(u)·rsqrt(mean(c(u)²) + eps)`` of ``u = h_preᵀX`` with ``h_pre``
    from ``weights(x)`` (``c``: centring for ``layer_norm``, none for ``rms_norm``; the
    declared ``norm_eps``), so an aggregate far below eps (``h_pre ≈ σ(−7)`` on every stream)
    is compared exactly, not assumed to have unit RMS. Without ``weights``:
    :func:`_normed_without_weights`."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    branch = ctx.inputs.branch(case)
    ctx.observe.forward(impl, x, branch)
    got = f64(branch.inputs[0])
    X = f64(x)
    kind = ctx.conventions.branch_input
    if kind == "x_in":
        h = (got.unsqueeze(-2) @ torch.linalg.pinv(X)).squeeze(-2)
        rebuilt = (h.unsqueeze(-2) @ X).squeeze(-2)
        ctx.record.expect("branch input minus its projection on the streams (x_in = h_preᵀX)",
                          tolerances.scaled_error(rebuilt, got))
        return
    if WEIGHTS in ctx.capabilities:
        h_pre = f64(ctx.observe.weights(impl, x)[0])
        want = ctx.observe.branch_input((h_pre.unsqueeze(-2) @ X).squeeze(-2))
        ctx.record.expect(
            f"branch input vs u·rsqrt(mean(u²) + eps), u = h_preᵀX from weights(x) (declared "
            f"{kind}, eps {ctx.conventions.norm_eps:g})", tolerances.scaled_error(got, want))
        return
    _normed_without_weights(ctx, kind, got, X)


def _normed_without_weights(ctx: Context, kind: str, got: torch.Tensor,
                            X: torch.Tensor) -> None:
    """The declared norm's branch input ``v = c(u)·rsqrt(mean(c(u)²) + eps)`` (``u = h_preᵀX``,
    ``c`` centring for ``layer_norm``, the identity for ``rms_norm``) checked without reported
    weights: a probe reads ``h_pre`` only up to scale under a norm, so ``u``'s size is unknown.
    What holds for every ``h_pre``: ``v`` lies in the span of the streams (and of ``1`` for
    ``layer_norm``), ``mean(v²) = m/(m + eps) ≤ 1`` with ``m = mean(c(u)²)``, a layer-normed
    ``v`` has mean 0, and ``mean(v²) ≥ 1 − NORM_SLACK`` wherever ``m ≥ eps/NORM_SLACK``.
    A token whose ``mean(v²)`` is below ``1 − NORM_SLACK`` is consistent with a norm of a
    small ``u`` (``h_pre`` near 0, e.g. σ(−7) on every stream) and with no norm at all, so it
    is not evidence either way; a case with only such tokens is inconclusive.

    Raises:
        PropertyFailure: ``v`` leaves the span, ``mean(v²)`` exceeds 1, or a layer-normed
            ``v`` has a non-zero mean (each beyond the law rule's allowance).
        Inconclusive: every token's ``mean(v²)`` is below ``1 − NORM_SLACK``.
    """
    basis = X
    if kind == "layer_norm":
        ones = torch.ones_like(X[..., :1, :])
        basis = torch.cat([X, ones], dim=-2)
    coefficients = got.unsqueeze(-2) @ torch.linalg.pinv(basis)
    rebuilt = (coefficients @ basis).squeeze(-2)
    ctx.record.expect(f"branch input minus its projection on the streams (declared {kind} of "
                      "h_preᵀX)", tolerances.scaled_error(rebuilt, got))
    centred = got - got.mean(-1, keepdim=True) if kind == "layer_norm" else got
    ms = centred.pow(2).mean(-1)
    ctx.record.expect(f"mean square of the branch input − 1, above 1 (declared {kind}: "
                      "m/(m + eps) ≤ 1)", max(float((ms - 1).max()), 0.0))
    if kind == "layer_norm":
        ctx.record.expect("mean of the branch input (declared layer_norm)",
                          float(got.mean(-1).abs().max()))
    if not bool((ms >= 1 - NORM_SLACK).any()):
        raise Inconclusive(
            f"every token's branch input has mean square below 1 − {NORM_SLACK:g} (smallest "
            f"{float(ms.min()):.3g}): a {kind} of an aggregate with mean(u²) below "
            f"eps/{NORM_SLACK:g} gives that, and so does no norm; without weights(x) the size "
            "of h_preᵀX is unknown")
@declare(
    "conventions.expand_replicates", statement="expand(h) puts h on every stream (X₀ = 1_n hᵀ)",
    theorems=("init.static_prenorm",), requires=(capability(EXPAND),), tolerance=rules.LAW,
    prerequisites=("shape.expand",))
def check_expand(ctx: Context, case: Case) -> None:
    """``expand(h)`` puts ``h`` on every stream: ``X₀ = 1_n hᵀ`` (HC §2)."""
    impl = ctx.build.make(case)
    h = gaussian((case.batch, case.tokens, case.d), case.seed, salts.EXPAND_INPUT.at(),
                 ctx.dtype, ctx.device)
    out = ctx.observe.expand(impl, h)
    ctx.record.require(isinstance(out, torch.Tensor),
                       f"expand(h) returned {type(out).__name__}, expected a tensor")
    assert isinstance(out, torch.Tensor)
    want = f64(h).unsqueeze(-2).expand(case.batch, case.tokens, case.n, case.d)
    ctx.record.expect("expand(h) vs 1_n hᵀ", tolerances.scaled_error(out, want))


@declare(
    "conventions.reduce_scale",
    statement="reduce(X) is the declared sum (1ᵀX) or mean, or a learned mix wᵀX, of the streams",
    theorems=("init.static_prenorm",), requires=(capability(REDUCE),), tolerance=rules.LAW,
    prerequisites=("shape.reduce",))
def check_reduce(ctx: Context, case: Case) -> None:
    """``reduce(X)`` is ``1ᵀ X`` (declared ``sum``) or ``1ᵀ X / n`` (declared ``mean``). A
    declared ``learned`` head (input-dependent weights, DeepSeek-V4's HyperHead) has no closed
    form; what every such head satisfies is checked instead: ``reduce(X) = wᵀX`` for some
    weights ``w`` per token, i.e. it lies in the span of the token's n streams. That is shown
    only where the streams do not span every vector (``d > n``); a case with ``d ≤ n`` is
    inconclusive for a learned head."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    out = ctx.observe.reduce(impl, x)
    ctx.record.require(isinstance(out, torch.Tensor),
                       f"reduce(x) returned {type(out).__name__}, expected a tensor")
    assert isinstance(out, torch.Tensor)
    X = f64(x)
    if ctx.conventions.reduce == "learned":
        if case.d <= case.n:
            raise Inconclusive(
                f"declared reduce='learned': with d = {case.d} ≤ n = {case.n} the streams span "
                "every vector, so no output could fail 'a combination of the streams'")
        got = f64(out)
        w = (got.unsqueeze(-2) @ torch.linalg.pinv(X)).squeeze(-2)
        rebuilt = (w.unsqueeze(-2) @ X).squeeze(-2)
        ctx.record.expect("reduce(X) minus its projection on the streams (declared learned "
                          "head: reduce(X) = wᵀX)",
                          tolerances.scaled_error(rebuilt, got, float(X.abs().sum(-2).max())))
        return
    want = X.sum(-2) if ctx.conventions.reduce == "sum" else X.mean(-2)
    ctx.record.expect(f"reduce(X) vs the declared {ctx.conventions.reduce} over streams",
               tolerances.scaled_error(out, want, float(X.abs().sum(-2).max())))


SCALINGS = (2.0, 4.0)
"""The factors ``c`` of ``weights(cX) = weights(X)``: powers of two, so ``cX`` is exact in every
binary floating-point dtype and a correct impl differs only through its norm's epsilon; scaled
up, so that the epsilon's share of the variance shrinks (a scale-down by 4 made it 16 times
larger, and a correct per-stream LayerNorm moved its weights by more than the sensitivity
bound could tell)."""
MIN_D = 4
"""The smallest ``d`` the check judges: a per-stream LayerNorm of ``d ≤ 3`` features leaves its
normalised state ``d − 2 ≤ 1`` directions, too few for a random move to measure the weights'
sensitivity in (at ``d = 2`` none: x-transformers' correct LayerNorm measured 2e-5 there)."""
NORM_EPS_MAX = 1e-5
"""The largest epsilon of a weight norm the check allows for without a declaration (torch's
LayerNorm default; mHC and DeepSeek-V4 implementations use 1e-6 and below)."""
SENSITIVITY_STEP = 1e-3
"""Relative size of the random move of the state that measures how fast the weights move."""


def _scale_invariant(subject: Subject) -> bool:
    declared = subject.conventions.weights_scale_invariant
    return declared if declared is not None else subject.kind in ("mhc", "unknown")


SCALE_INVARIANT = Requirement(
    "weights normalised (mhc, or declared weights_scale_invariant=True)",
    "applies to mhc, and to an HC kind that declares weights_scale_invariant=True "
    "(weights(cX) = weights(X) holds for weights of a normalised state, mHC Eq. 7: "
    "RMSNorm(vec X))",
    _scale_invariant,
    lambda s: ("the impl declares weights_scale_invariant=False"
               if s.conventions.weights_scale_invariant is False
               else f"the target's kind is {s.kind}"))


def _weights_at(ctx: Context, impl: HyperConnectionImpl, x: torch.Tensor,
                case: Case) -> list[tuple[str, torch.Tensor]]:
    """``[(name, float64 weight)]`` at ``x``: reported, else probed (``h_pre`` left out where
    probing cannot identify it)."""
    # imported here: importing the constraints family at module import would register its
    # properties before this family's (the run order is the import order of FAMILIES)
    from hcspec.conformance.properties.constraints import MHCWeights

    w = MHCWeights(ctx, impl, x, case)
    named = [("h_pre", w.h_pre), ("h_post", w.h_post), ("H_res", w.H_res)]
    return [(name, t) for name, t in named if t is not None]


@declare(
    "conventions.weights_scale_invariant",
    statement="the weights are unchanged when the state is scaled: weights(cX) = weights(X), c > 0",
    theorems=("norm.jacobians",), requires=(SCALE_INVARIANT, WEIGHTS_OR_PROBING),
    tolerance=rules.LAW, cases=Cases(d_more_than_n=True, extreme_scales=False),
    prerequisites=BASE)
def check_weights_scale_invariant(ctx: Context, case: Case) -> None:
    """``h_pre``, ``h_post`` and ``H_res`` (reported, else probed; ``h_pre`` only where it is
    identifiable) at ``cX`` equal those at ``X`` for ``c`` in :data:`SCALINGS`: mHC's weights
    are functions of ``RMSNorm(vec X)`` (mHC Eq. 7; DeepSeek-V4 the same), and RMSNorm is
    scale invariant (spec ``norm.jacobians``, ε = 0). A norm's epsilon moves the normalised
    state by at most ``ε/(2m)·|1 − 1/c²|`` relative (``m``: the smallest per-stream mean
    square, or variance for a LayerNorm: the kit takes the smallest per-stream variance); the
    allowance adds that times :data:`NORM_EPS_MAX` and the weights' measured
    sensitivity (how far they move, per unit relative move, when the state moves randomly by
    :data:`SENSITIVITY_STEP`) times ``√(n·d)``: a random direction of the ``n·d``-dimensional
    state sees the weights' Jacobian ``J`` at about ``‖J‖_F/√(n·d)``, while the epsilon moves
    the normalised state along one direction (its own), where ``|J r| ≤ ‖J‖_F``. So only a
    dependence on the scale itself fails (x-transformers' per-stream LayerNorm, ε = 1e-5, at
    n = 1, d = 3 moved its h_pre by 1.1 × the allowance without that factor).

    Raises:
        PropertyFailure: a weight at ``cX`` differs from the one at ``X`` beyond the allowance.
        Inconclusive: the allowance reaches 1 (a stream variance near ε): no change of the
            weights could show; ``d`` < :data:`MIN_D`.
    """
    if case.d < MIN_D:
        raise Inconclusive(f"d = {case.d} < {MIN_D}: a per-stream norm's state has too few "
                           "directions to measure the weights' sensitivity in")
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    base = _weights_at(ctx, impl, x, case)
    noise = ctx.inputs.state(case, salt=salts.SCALE_SENSITIVITY)
    moved = x + (SENSITIVITY_STEP * noise).to(x.dtype)
    shifted = _weights_at(ctx, impl, moved, case)
    sensitivity = max(float((a - b).abs().max()) for (_, a), (_, b) in zip(
        shifted, base, strict=True)) / SENSITIVITY_STEP
    X = f64(x)
    smallest = float(X.var(-1, correction=0).min().clamp_min(1e-300))  # ≤ the mean square
    for c in SCALINGS:
        scaled = _weights_at(ctx, impl, x * c, case)
        drift = NORM_EPS_MAX / (2 * smallest * min(1.0, c * c))
        extra = 4 * math.sqrt(case.n * case.d) * sensitivity * drift
        tol = ctx.record.allowance(extra=extra).allowance
        if tol >= 1.0:
            raise Inconclusive(
                f"at {c:g}·X the norm's epsilon alone may move the weights by {tol:.3g} "
                f"(scaled): a stream variance of {smallest:.3g} is too close to ε ≤ "
                f"{NORM_EPS_MAX:g} for a change of the weights to show")
        for (name, got), (_, want) in zip(scaled, base, strict=True):
            ctx.record.expect(
                f"{name} at {c:g}·X vs at X", tolerances.scaled_error(got, want), extra=extra,
                detail=f"allowance: law tolerance + 4·√(n·d) × sensitivity {sensitivity:.3g} "
                f"× norm-epsilon drift {drift:.3g} (ε ≤ {NORM_EPS_MAX:g}, smallest stream "
                f"variance {smallest:.3g})",
                hint="the weights depend on the state's scale: is the state normalised "
                     "(RMSNorm of vec(X), mHC Eq. 7) before the projections? declare "
                     "weights_scale_invariant=False if that is intended")
