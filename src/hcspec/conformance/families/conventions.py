"""Declared-conventions family: what an adapter declares
(:class:`hcspec.conformance.protocol.Conventions`)
holds — the branch receives the declared input, ``expand`` replicates (HC: ``X₀ = 1_n h₀ᵀ``),
``reduce`` sums or averages the streams as declared (HC: ``h_L = 1ᵀ X_L``), and every impl the
factory builds declares the same conventions (the report shows one declaration).
"""

from __future__ import annotations

import torch

from hcspec.conformance.author import (
    EXPAND,
    PER_STREAM_READ,
    REDUCE,
    WEIGHTS,
    WEIGHTS_OR_PROBING,
    Case,
    Cases,
    Context,
    HyperConnectionImpl,
    Inconclusive,
    MHCWeights,
    Requirement,
    Subject,
    capability,
    conventions_of,
    declare,
    f64,
    gaussian,
    metrics,
    precision,
    rules,
    salts,
)

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
    theorems=("layout.paper_rows",), requires=(PER_STREAM_READ,), tolerance=rules.LAW,
    cases=Cases(d_more_than_n=True, extreme_scales=False),
    prerequisites=(*BASE, "shape.branch_once"))
def check_branch_input(ctx: Context, case: Case) -> None:
    """The branch receives the declared input: ``x_in = h_preᵀ X`` lies in the row space of X;
    a declared norm is ``c(u)·rsqrt(mean(c(u)²) + eps)`` of ``u = h_preᵀX`` with ``h_pre``
    from ``weights(x)`` (``c``: centring for ``layer_norm``, none for ``rms_norm``; the
    declared ``norm_eps``), so an aggregate far below eps (``h_pre ≈ σ(−7)`` on every stream)
    is compared exactly, not assumed to have unit RMS. Below float32 the oracle is the same
    comparison of the branch input computed along the run's dtype chain
    (:func:`_branch_input_at_precision`), so the allowance is the law's 8 × that floor, not
    256·eps (2.0 in bfloat16). Without ``weights``: :func:`_normed_without_weights`."""
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
        ctx.record.expect(
            "branch input minus its projection on the streams (x_in = h_preᵀX)",
            metrics.scaled_error(rebuilt, got),
            oracle=precision.oracle(ctx, lambda: _projection_residual(
                _branch_input_at_precision(ctx, h, X), X)))
        return
    if WEIGHTS in ctx.capabilities:
        h_pre = f64(ctx.observe.weights(impl, x)[0])
        want = ctx.observe.branch_input((h_pre.unsqueeze(-2) @ X).squeeze(-2))
        ctx.record.expect(
            f"branch input vs u·rsqrt(mean(u²) + eps), u = h_preᵀX from weights(x) (declared "
            f"{kind}, eps {ctx.conventions.norm_eps:g})", metrics.scaled_error(got, want),
            oracle=precision.oracle(ctx, lambda: metrics.scaled_error(
                _branch_input_at_precision(ctx, h_pre, X), want)))
        return
    _normed_without_weights(ctx, kind, got, X)


def _branch_input_at_precision(ctx: Context, h_pre: torch.Tensor, X: torch.Tensor,
                               norm: bool = True) -> torch.Tensor:
    """The declared branch input of ``h_pre [B, T, n]`` and ``X [B, T, n, d]`` (float64) as a
    correct impl of the run's precision computes it: the state rounded to the effective
    dtype (a bfloat16-state impl rounds what it is given), ``h_preᵀX`` and (``norm``) the
    declared norm in the compute dtype (declared, else the working dtype), the result rounded
    to the effective dtype; returned in float64 ``[B, T, d]`` (the ``oracle`` of the law
    rule). ``X`` may carry a row of ones (``[B, T, n + 1, d]``, a layer norm's span)."""
    compute = ctx.conventions.compute_dtype or ctx.dtype
    state = X.to(ctx.precision.output).to(compute)
    u = (h_pre.to(compute).unsqueeze(-2) @ state).squeeze(-2)
    return f64((ctx.observe.branch_input(u) if norm else u).to(ctx.precision.output))


def _projection_residual(v: torch.Tensor, X: torch.Tensor, scale: float | None = None) -> float:
    """Scaled distance of ``v [B, T, d]`` from its projection on the streams of
    ``X [B, T, n, d]`` (both float64), relative to ``scale`` (default ``max |v|``)."""
    coefficients = (v.unsqueeze(-2) @ torch.linalg.pinv(X)).squeeze(-2)
    return metrics.scaled_error((coefficients.unsqueeze(-2) @ X).squeeze(-2), v, scale)


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
    is not evidence either way; a case with only such tokens is inconclusive. Below float32
    each comparison's oracle is the same figure of the declared norm computed along the run's
    dtype chain from the aggregate the branch input spans (``u`` = its coefficients on the
    streams, :func:`_branch_input_at_precision`; :func:`_normed_figures`): the law's 8 × that
    floor, not 256·eps (2.0 in bfloat16).

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
    oracles: tuple[float | None, ...] = (None, None, None)
    if precision.low_precision(ctx):
        oracles = _normed_figures(kind, _branch_input_at_precision(
            ctx, coefficients.squeeze(-2), basis), basis)
    ctx.record.expect(f"branch input minus its projection on the streams (declared {kind} of "
                      "h_preᵀX)", metrics.scaled_error(rebuilt, got), oracle=oracles[0])
    centred = got - got.mean(-1, keepdim=True) if kind == "layer_norm" else got
    ms = centred.pow(2).mean(-1)
    ctx.record.expect(f"mean square of the branch input − 1, above 1 (declared {kind}: "
                      "m/(m + eps) ≤ 1)", max(float((ms - 1).max()), 0.0), oracle=oracles[1])
    if kind == "layer_norm":
        ctx.record.expect("mean of the branch input (declared layer_norm)",
                          float(got.mean(-1).abs().max()), oracle=oracles[2])
    if not bool((ms >= 1 - NORM_SLACK).any()):
        raise Inconclusive(
            f"every token's branch input has mean square below 1 − {NORM_SLACK:g} (smallest "
            f"{float(ms.min()):.3g}): a {kind} of an aggregate with mean(u²) below "
            f"eps/{NORM_SLACK:g} gives that, and so does no norm; without weights(x) the size "
            "of h_preᵀX is unknown")
def _normed_figures(kind: str, v: torch.Tensor, basis: torch.Tensor) -> tuple[float, ...]:
    """``(projection residual, mean square − 1 above 1, |mean|)`` of a branch input
    ``v [B, T, d]`` on ``basis [B, T, n(+1), d]`` (float64), as
    :func:`_normed_without_weights` measures them (the mean only centred for ``layer_norm``)."""
    centred = v - v.mean(-1, keepdim=True) if kind == "layer_norm" else v
    return (_projection_residual(v, basis),
            max(float((centred.pow(2).mean(-1) - 1).max()), 0.0),
            float(v.mean(-1).abs().max()))


@declare(
    "conventions.expand_replicates", statement="expand(h) puts h on every stream (X₀ = 1_n hᵀ)",
    theorems=("init.static_prenorm",), requires=(capability(EXPAND),), tolerance=rules.LAW,
    prerequisites=("shape.expand",))
def check_expand(ctx: Context, case: Case) -> None:
    """``expand(h)`` puts ``h`` on every stream: ``X₀ = 1_n hᵀ`` (HC §2). Below float32 the
    oracle is ``h`` rounded to the output dtype (the law's 8 × that, not 256·eps)."""
    impl = ctx.build.make(case)
    h = gaussian((case.batch, case.tokens, case.d), case.seed, salts.EXPAND_INPUT.at(),
                 ctx.dtype, ctx.device)
    out = ctx.observe.expand(impl, h)
    ctx.record.require(isinstance(out, torch.Tensor),
                       f"expand(h) returned {type(out).__name__}, expected a tensor")
    assert isinstance(out, torch.Tensor)
    want = f64(h).unsqueeze(-2).expand(case.batch, case.tokens, case.n, case.d)
    # below float32: h rounded to the output is what a correct impl of that precision returns
    ctx.record.expect("expand(h) vs 1_n hᵀ", metrics.scaled_error(out, want),
                      oracle=precision.oracle(ctx, lambda: metrics.scaled_error(
                          f64(want.to(ctx.precision.output)), want)))


LINEAR_HEAD = Requirement(
    "reduce not a learned gated read",
    "a learned reduce of an element-wise read is a gated read of the streams (Qwen4-exp's "
    "hyper_connection_mixer, spec gated.per_stream_only), not a mix wᵀX",
    lambda s: not (s.conventions.reduce == "learned" and s.conventions.read == "elementwise"))
"""The declared reduce is a sum, a mean or a per-stream mix ``wᵀX``."""


@declare(
    "conventions.reduce_scale",
    statement="reduce(X) is the declared sum (1ᵀX) or mean, or a learned mix wᵀX, of the streams",
    theorems=("init.static_prenorm",), requires=(capability(REDUCE), LINEAR_HEAD),
    tolerance=rules.LAW, prerequisites=("shape.reduce",))
def check_reduce(ctx: Context, case: Case) -> None:
    """``reduce(X)`` is ``1ᵀ X`` (declared ``sum``) or ``1ᵀ X / n`` (declared ``mean``). A
    declared ``learned`` head (input-dependent weights, DeepSeek-V4's HyperHead) has no closed
    form; what every such head satisfies is checked instead: ``reduce(X) = wᵀX`` for some
    weights ``w`` per token, i.e. it lies in the span of the token's n streams. That is shown
    only where the streams do not span every vector (``d > n``); a case with ``d ≤ n`` is
    inconclusive for a learned head. Below float32 the declared sum or mean is compared
    against the same reduction of the state rounded to the output dtype, in the compute dtype,
    rounded again, and a learned head's distance from the span against that of ``wᵀX`` with
    its fitted ``w`` computed so (the law's 8 × that error, not 256·eps)."""
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
        size = float(X.abs().sum(-2).max())
        # below float32: the head wᵀX with the fitted w along the chain (the state rounded to
        # the output, the mix in the compute dtype, the result rounded again), off the span
        ctx.record.expect("reduce(X) minus its projection on the streams (declared learned "
                          "head: reduce(X) = wᵀX)", metrics.scaled_error(rebuilt, got, size),
                          oracle=precision.oracle(ctx, lambda: _projection_residual(
                              _branch_input_at_precision(ctx, w, X, norm=False), X, size)))
        return
    want = X.sum(-2) if ctx.conventions.reduce == "sum" else X.mean(-2)
    scale = float(X.abs().sum(-2).max())

    def oracle() -> float:  # the state rounded to the output, summed in the compute dtype,
        compute = ctx.conventions.compute_dtype or ctx.dtype  # the result rounded again
        state = X.to(ctx.precision.output).to(compute)
        low = state.sum(-2) if ctx.conventions.reduce == "sum" else state.mean(-2)
        return metrics.scaled_error(f64(low.to(ctx.precision.output)), want, scale)

    ctx.record.expect(f"reduce(X) vs the declared {ctx.conventions.reduce} over streams",
                      metrics.scaled_error(out, want, scale),
                      oracle=precision.oracle(ctx, oracle))


SCALINGS = (1.0, 2.0, 4.0)
"""The factors ``c`` at which the weights are read: powers of two, so ``cX`` is exact in every
binary floating-point dtype."""
NORM_EPS_MAX = 1e-5
"""The largest epsilon of a weight norm the check allows for without a declaration (torch's
LayerNorm default; mHC and DeepSeek-V4 implementations use 1e-6 and below)."""
EXPANSION_LIMIT = 1e-2
"""The largest ``ε/m`` (epsilon over the smallest per-stream variance) at which the first-order
expansion of the epsilon's effect is trusted; beyond it the case is inconclusive."""


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
    identifiable) do not depend on the state's scale: mHC's weights are functions of
    ``RMSNorm(vec X)`` (mHC Eq. 7; DeepSeek-V4 the same), and RMSNorm is scale invariant (spec
    ``norm.jacobians``, ε = 0). A norm's epsilon is the one legitimate dependence:
    ``c·u/√(c²m + ε) = u/√(m + ε/c²)``, so ``w(cX) = w_∞ + A/c² + O((ε/m)²)``. The weights at
    ``X``, ``2X`` and ``4X`` (:data:`SCALINGS`) fix ``w_∞`` and ``A`` from the first two and
    predict the third, ``w(4X) ≈ 1.25·w(2X) − 0.25·w(X)``, whatever the epsilon and however
    sensitive the weights are; a weight that depends on the scale itself misses it. Allowance:
    the law rule's (×2.5, the prediction's rounding) plus the second-order term,
    ``4·(ε/m)·|A|`` with ``ε`` ≤ :data:`NORM_EPS_MAX`; below float32 the law rule's 8 × the
    prediction's rounding in the output dtype (``1.25·eps·max|w|``: each weight rounded by
    eps/2 of the largest, weighted 0.25 + 1.25 + 1), not 2.5 × 256·eps (5 in bfloat16, more
    than any weight in [0, 2] can move).

    Raises:
        PropertyFailure: a weight at ``4X`` differs from the prediction beyond the allowance.
        Inconclusive: ``ε/m`` exceeds :data:`EXPANSION_LIMIT` (a stream variance near ε).
    """
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    X = f64(x)
    smallest = float(X.var(-1, correction=0).min().clamp_min(1e-300))  # ≤ the mean square
    ratio = NORM_EPS_MAX / smallest
    if ratio > EXPANSION_LIMIT:
        raise Inconclusive(f"a stream variance of {smallest:.3g} is within {1 / ratio:.3g}× of "
                           f"ε ≤ {NORM_EPS_MAX:g}: the norm's epsilon may move the weights "
                           "by more than a change of the weights could show")
    at = [_weights_at(ctx, impl, x * c, case) for c in SCALINGS]
    for (name, w1), (_, w2), (_, w4) in zip(*at, strict=True):
        first = (w1 - w2) * 4 / 3  # A of w(c) = w_∞ + A/c²
        predicted = 1.25 * w2 - 0.25 * w1
        extra = 4 * ratio * float(first.abs().max())
        # below float32: each of w(X), w(2X), w(4X) rounded to the output by up to eps/2 of
        # the largest weight, weighted 0.25 + 1.25 + 1 by the prediction
        rounding = 1.25 * rules.eps(ctx.precision.output) * max(
            1.0, *(float(w.abs().max()) for w in (w1, w2, w4)))
        ctx.record.expect(
            f"{name} at 4·X vs its prediction from X and 2·X (w_∞ + A/c²)",
            metrics.scaled_error(w4, predicted), factor=2.5, extra=extra,
            oracle=rounding if precision.low_precision(ctx) else None,
            detail=f"the epsilon's first-order term |A| = {float(first.abs().max()):.3g}; "
                   f"second-order allowance 4·(ε/m)·|A| = {extra:.3g} (ε ≤ {NORM_EPS_MAX:g}, "
                   f"smallest stream variance {smallest:.3g})",
            hint="the weights depend on the state's scale: is the state normalised "
                 "(RMSNorm of vec(X), mHC Eq. 7) before the projections? declare "
                 "weights_scale_invariant=False if that is intended")
