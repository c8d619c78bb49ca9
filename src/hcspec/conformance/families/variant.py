"""Declared-variant family (mHC with the ``logits`` capability): the target's weights are the
declared Sinkhorn–Knopp variant and gates applied to its own pre-activation logits, at
identical parameters, and its Sinkhorn backward is the declared one.

The kit reads ``H̃_pre, H̃_post, H̃_res`` from ``logits(x)``, applies the declared step record
(``conventions.formula``) in float64 with the formulas layer's statement of the spec's
``mhc.sinkhorn_variants`` (:func:`hcspec.formulas.mhc.h_res`, which the reference uses too)
and compares with the target's ``h_pre, h_post, H_res`` (reported, else probed). On a
mismatch it searches the variants it knows (start exp / softmax / sigmoid, order, eps,
iteration count, Hᵀ; the post multiplier) with the kit's divergence search
(:func:`hcspec.conformance.machinery.sinkhorn_variant.diagnose`, with the search shared with
the published family, :func:`hcspec.conformance.machinery.divergence.nearest`) and names the
one the target matches. The gradient check compares the target's ``∂⟨G, H_res⟩/∂x`` with the
kit's unrolled gradient of the truncated forward, or, declared
``sinkhorn_gradient="implicit"``, with the fixed-point gradient
(:func:`hcspec.formulas.sinkhorn.fixed_point_vjp`), chained through the target's own
``logits(x)`` (:mod:`hcspec.conformance.machinery.sinkhorn_variant`).
docs/conformance.md ("Declared Sinkhorn variant") explains the search.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from hcspec.conformance.author import (
    DIFFERENTIABLE,
    LOGITS,
    WEIGHTS,
    WEIGHTS_OR_PROBING,
    Case,
    Cases,
    Context,
    HyperConnectionImpl,
    Inconclusive,
    MHCWeights,
    NotApplicable,
    capability,
    declare,
    f64,
    float64,
    kinds,
    metrics,
    precision,
    rules,
    salts,
    shift,
    strategies,
)
from hcspec.conformance.machinery.sinkhorn_variant import (
    declared,
    describe,
    diagnose,
    gradient_errors,
    target_logits,
)
from hcspec.conformance.rules import Precision
from hcspec.formulas import mhc
from hcspec.spec.record import Formula, Gate

BASE = ("shape.output", "shape.branch_once")
REQUIRES = (kinds("mhc"), capability(LOGITS), WEIGHTS_OR_PROBING)
CASES = Cases(d_more_than_n=True, min_n=2, perturbations=(0.3, 1.0), extreme_scales=False)
"""Perturbed parameters (logits spread enough that iteration counts and orders differ),
d > n (the weights may be probed)."""
SLOW = Case(1, 2, 4, 8, seed=3, perturb=1.0, param_scale=3.0)
"""A case where Sinkhorn–Knopp converges slowly, so one round more or fewer than declared
shows: the parameters scaled ×3 after the perturbation spread the logits (the x-dependent part
×9), and a matrix whose entries span e^±10 and more needs many rounds to balance its sums
(the Birkhoff–Hopf contraction ``tanh(Δ/4)`` of a projective diameter Δ of tens is within
1e-4 of 1). Measured at this case, 19 rounds for 20 move H_res by 2.6e-3 on the reference mHC
(float64 law: 2.2e-11) and by 9.6e-4 in DeepSeek-V4's softmax-first form with float32 weights
(float32 law: 3.1e-5, 31×); at a perturbed case of n = 2 without the scaling, 9e-5
(tests.mutants.sinkhorn_one_round_short, sinkhorn_f32_weights_one_round_short)."""


def _examples(ctx: Context) -> list[Case]:
    return shift(ctx, [Case(2, 3, 4, 8, seed=0, perturb=1.0),
                       Case(2, 2, 3, 7, seed=1, perturb=1.0, layer_index=2),
                       Case(1, 3, 2, 5, seed=2, perturb=0.3), SLOW])


def _probed_factor(w: MHCWeights, n: int) -> int:
    """The law rule's ``factor``: ``n`` for probed weights (the probe's error), else 1."""
    return max(1, n) if w.probed else 1


def judged(ctx: Context, w: MHCWeights) -> Precision:
    """The precision ``w`` is judged in: ``ctx.weights_precision`` (a declared
    ``weights_dtype``) for reported weights, the run's for probed ones (read back through the
    ``output_dtype`` forward)."""
    return ctx.precision if w.probed else ctx.weights_precision


def _in_precision(ctx: Context, fn: Callable[[torch.Tensor], torch.Tensor],
                  logits: torch.Tensor, judged_in: Precision) -> torch.Tensor:
    """``fn`` of ``logits`` computed in the run's compute dtype (the declared one, else the
    working dtype) and rounded to the effective dtype of ``judged_in``, as float64: what a
    correct target of that precision reports."""
    compute = ctx.conventions.compute_dtype or ctx.dtype
    return f64(fn(logits.to(compute)).to(judged_in.output))


def _variant_tols(ctx: Context, w: MHCWeights, x: torch.Tensor, case: Case,
                  want: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                  at_precision: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                  ) -> list[dict[str, Any]]:
    """The law rule's inputs for ``(h_pre, h_post, H_res)`` against the declared float64
    values ``want``: the ``factor`` of :func:`_probed_factor`, and, when the run compares in
    bfloat16/float16, the ``oracle``: the error of the declared values computed in the run's
    precision (``at_precision``), reported — or, for probed weights, of what probing the
    closed form with them
    (:class:`~hcspec.conformance.machinery.precision.SpecAtPrecision`) reads back."""
    factor = float(_probed_factor(w, case.n))
    if not judged(ctx, w).low:
        return [{"factor": factor, "oracle": None} for _ in range(3)]
    errors = [metrics.scaled_error(got, ref) for got, ref in zip(at_precision, want,
                                                                    strict=True)]
    if w.probed:
        spec = precision.spec_at_precision(ctx, *at_precision)
        probed = precision.probe_spec(ctx, spec, x, case)
        read = (probed.h_pre, probed.h_post, probed.H_res)
        errors = [e if got is None else max(e, metrics.scaled_error(got, ref))
                  for e, got, ref in zip(errors, read, want, strict=True)]
    return [{"factor": factor, "oracle": e} for e in errors]


@declare(
    "variant.h_res",
    statement="H_res is the declared Sinkhorn–Knopp variant (start, order, eps, rounds) of the "
              "target's H̃_res",
    theorems=("mhc.sinkhorn_variants",), requires=REQUIRES, tolerance=rules.LAW,
    examples=_examples, cases=CASES, prerequisites=BASE)
def check_h_res(ctx: Context, case: Case) -> None:
    """The target's ``H_res`` equals the declared variant applied in float64 to its ``H̃_res``
    (mHC Eq. 9, or the declared DeepSeek-V4 form); a mismatch names the variant it matches."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    with torch.no_grad():
        pre, post, logits = (f64(t) for t in target_logits(impl, x, declared(ctx)))
    w = MHCWeights(ctx, impl, x, case)
    f = declared(ctx)
    want = mhc.h_res(f, logits)
    given: dict[str, Any] = {"factor": float(_probed_factor(w, case.n)),
                                      "oracle": None}
    at = judged(ctx, w)
    if at.low:
        gates = _declared_gates(f)
        given = _variant_tols(ctx, w, x, case, (gates[0](pre), gates[1](post), want), (
            _in_precision(ctx, gates[0], pre, at), _in_precision(ctx, gates[1], post, at),
            _in_precision(ctx, _h_res_of(f), logits, at)))[2]
    with ctx.record.judged_in(at):
        tol = ctx.record.allowance(**given).allowance
        err = metrics.scaled_error(w.H_res, want)
        detail = diagnose(w.H_res, logits, f, tol) if not err <= tol and (
            f.construction == "sinkhorn") else ""
        ctx.record.expect(f"H_res ({w.source}) vs the declared variant ({describe(f)}) "
                          "at the target's logits", err, detail=detail, **given)


OfLogits = Callable[[torch.Tensor], torch.Tensor]


def _h_res_of(f: Formula) -> OfLogits:
    """``H_res`` of ``f`` as a function of the logits (:func:`hcspec.formulas.mhc.h_res`)."""
    return lambda logits: mhc.h_res(f, logits)


def _declared_gates(f: Formula) -> tuple[OfLogits, OfLogits]:
    """The declared ``H_pre = σ(H̃_pre) + eps`` and ``H_post = c·σ(H̃_post) + eps`` (mHC Eq. 8,
    :func:`hcspec.formulas.mhc.gate`), in the dtype of the logits."""
    return (lambda t: mhc.gate(f.h_pre, t)), (lambda t: mhc.gate(f.h_post, t))


def _gate_multiplier(h: torch.Tensor, logits: torch.Tensor, eps: float) -> float:
    """The multiplier ``c`` that fits ``h = c·σ(H̃) + eps`` best (least squares)."""
    s = torch.sigmoid(logits)
    return float(((h - eps) * s).sum() / (s * s).sum().clamp_min(1e-300))


@declare(
    "variant.gates",
    statement="H_pre = σ(H̃_pre) + eps, H_post = c·σ(H̃_post) + eps with the declared c and eps",
    theorems=("mhc.h_post_range", "mhc.h_pre_range"), requires=REQUIRES, tolerance=rules.LAW,
    examples=_examples, cases=CASES, prerequisites=BASE)
def check_gates(ctx: Context, case: Case) -> None:
    """``h_pre`` and ``h_post`` are the declared gates of the target's ``H̃_pre, H̃_post``
    (mHC Eq. 8: σ and 2σ); a mismatch of ``h_post`` names the multiplier it matches."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    with torch.no_grad():
        pre, post, res = (f64(t) for t in target_logits(impl, x, declared(ctx)))
    w = MHCWeights(ctx, impl, x, case)
    f = declared(ctx)
    fixed: dict[str, Any] = {"factor": float(_probed_factor(w, case.n)),
                                      "oracle": None}
    given_pre = given = fixed
    gate_pre, gate_post = _declared_gates(f)
    want_pre = gate_pre(pre)
    want_post = gate_post(post)
    at = judged(ctx, w)
    if at.low:
        given_pre, given, _ = _variant_tols(
            ctx, w, x, case, (want_pre, want_post, mhc.h_res(f, res)),
            (_in_precision(ctx, gate_pre, pre, at), _in_precision(ctx, gate_post, post, at),
             _in_precision(ctx, _h_res_of(f), res, at)))
    with ctx.record.judged_in(at):
        _expect_gates(ctx, w, f, pre, post, want_pre, want_post, given_pre, given)


def _expect_gates(ctx: Context, w: MHCWeights, f: Formula, pre: torch.Tensor,
                  post: torch.Tensor, want_pre: torch.Tensor, want_post: torch.Tensor,
                  given_pre: dict[str, Any], given: dict[str, Any]) -> None:
    """:func:`check_gates`' comparisons of ``h_pre`` and ``h_post`` with the declared gates
    ``want_pre``, ``want_post`` of the target's logits ``pre``, ``post`` (the law rule's
    inputs ``given_pre``, ``given``), naming the multiplier ``h_post`` matches."""
    if w.h_pre is not None:
        ctx.record.expect(f"h_pre ({w.source}) vs {_words(f.h_pre, 'H̃_pre', False)}",
                          metrics.scaled_error(w.h_pre, want_pre), **given_pre)
    tol = ctx.record.allowance(**given).allowance
    err = metrics.scaled_error(w.h_post, want_post)
    detail = ""
    if not err <= tol and f.h_post.activation == "softmax":
        detail = (f"h_post is not the declared {_words(f.h_post, 'H̃_post', True)}" + (
            "; it matches 2·σ(H̃_post)" if metrics.scaled_error(
                w.h_post, 2.0 * torch.sigmoid(post) + f.h_post.eps) <= tol else ""))
    elif not err <= tol:
        fitted = _gate_multiplier(w.h_post, post, f.h_post.eps)
        refit = metrics.scaled_error(w.h_post, fitted * torch.sigmoid(post) + f.h_post.eps)
        detail = (f"h_post matches {fitted:.6g}·σ(H̃_post), not the declared "
                  f"{f.h_post.multiplier:g}·σ (error {refit:.3g})" if refit <= tol else
                  f"h_post is no multiple of σ(H̃_post) (best fit {fitted:.4g}·σ, error "
                  f"{refit:.3g})")
        if metrics.scaled_error(w.h_post, torch.sigmoid(pre)) <= tol:
            detail = "h_post matches σ(H̃_pre): the pre and post logits are swapped"
    ctx.record.expect(f"h_post ({w.source}) vs {_words(f.h_post, 'H̃_post', True)}", err,
                      detail=detail, **given)


def _words(g: Gate, logits: str, multiplier: bool) -> str:
    """The declared gate in the words of a label: ``σ(H̃_pre) + 0`` (mHC), ``2·σ(H̃_post) + 0``;
    the multiplier written when ``multiplier`` or other than 1."""
    c = f"{g.multiplier:g}·" if multiplier or g.multiplier != 1.0 else ""
    act = "softmax" if g.activation == "softmax" else "σ"
    return f"{c}{act}({logits}) + {g.eps:g}"


# --- the Sinkhorn backward ---------------------------------------------------------------------

@declare(
    "variant.sinkhorn_gradient",
    statement="∂⟨G, H_res⟩/∂x is the declared Sinkhorn backward: truncated forward's, or the "
              "fixed point's",
    theorems=("sinkhorn.implicit_gradient",),
    requires=(DIFFERENTIABLE, kinds("mhc"), capability(LOGITS), capability(WEIGHTS),
              float64("the Sinkhorn gradient is compared in float64")),
    tolerance=rules.SINKHORN_FIXED_POINT, examples=_examples, cases=CASES,
    prerequisites=(*BASE, "variant.h_res"))
def check_sinkhorn_gradient(ctx: Context, case: Case) -> None:
    """The target's ``∂⟨G, H_res(x)⟩/∂x`` equals the kit's ``J_{H̃_res}(x)ᵀ K`` where ``K``
    is the declared Sinkhorn backward at the target's ``H̃_res`` (unrolled; or declared
    implicit: the fixed-point gradient), both chained through the target's ``logits(x)``.
    Below float32 the law part of the allowance is 8 × the error the declared backward makes
    along the run's dtype chain (:func:`_sinkhorn_gradient_oracle`, at least eps: a backward
    rounds twice), not 256·eps (2.0 in bfloat16).

    Raises:
        PropertyFailure: the gradients differ (naming the backward they match, if any), or
            ``weights(x)`` carries no autograd graph although ``logits(x)`` does.
    """
    construction = ctx.conventions.formula.construction
    if construction != "sinkhorn":
        raise NotApplicable(f"H_res is declared {construction!r}: no Sinkhorn–Knopp backward "
                            "to compare")
    err_unrolled, err_implicit, fixed_tol, rounds = gradient_errors(ctx, case)
    conditioning = fixed_tol - ctx.record.allowance().allowance
    given: dict[str, Any] = {}
    if precision.low_precision(ctx):
        given = {"oracle": _sinkhorn_gradient_oracle(ctx, case), "roundings": 2}
    law = ctx.record.allowance(**given).allowance
    fixed_tol = law + conditioning
    if ctx.conventions.sinkhorn_gradient == "implicit":
        if fixed_tol >= 1.0:
            raise Inconclusive(
                f"the declared {rounds} have not converged enough on this case for the "
                f"fixed-point gradient to be determined (tolerance {fixed_tol:.3g} ≥ 1)")
        detail = ("" if err_implicit <= fixed_tol else
                  f"it matches the unrolled gradient of the truncated {rounds} forward (error "
                  f"{err_unrolled:.3g}), not the declared implicit one" if err_unrolled <= law
                  else f"unrolled gradient error {err_unrolled:.3g}")
        ctx.record.expect("∂⟨G, H_res⟩/∂x vs the fixed-point (implicit) gradient at the "
                          "target's logits (declared sinkhorn_gradient='implicit')",
                          err_implicit, detail=detail, conditioning=conditioning, **given)
        return
    detail = ""
    if not err_unrolled <= law:
        detail = (f"it matches the implicit (fixed-point) gradient of the Sinkhorn limit "
                  f"(error {err_implicit:.3g}), not the gradient of the truncated {rounds} "
                  "forward: declare sinkhorn_gradient='implicit' if that is intended"
                  if err_implicit <= fixed_tol else
                  f"fixed-point gradient error {err_implicit:.3g}")
    ctx.record.expect(f"∂⟨G, H_res⟩/∂x vs the gradient of the truncated {rounds} forward "
                      "(autograd through the declared variant at the target's logits)",
                      err_unrolled, detail=detail, **given)


def _sinkhorn_gradient_oracle(ctx: Context, case: Case) -> float:
    """What the declared Sinkhorn backward costs in the run's precision on the case (the
    ``oracle`` of :data:`hcspec.conformance.rules.SINKHORN_FIXED_POINT`): the kit's unrolled
    ``K`` recomputed along the dtype chain — the upstream gradient ``G`` rounded to the
    effective dtype (the target's ``H_res`` is returned in it, so its incoming gradient is
    rounded there), the declared Sinkhorn–Knopp and its backward in the compute dtype
    (declared, else the working dtype) at the target's logits rounded to it — chained through
    the target's ``logits(x)`` like the float64 one, its scaled error against the float64
    gradient."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case).requires_grad_(True)
    res = target_logits(impl, x)[2]
    G = strategies.gaussian((case.batch, case.tokens, case.n, case.n), case.seed,
                            salts.SINKHORN_UPSTREAM.at(), torch.float64, "cpu")
    compute = ctx.conventions.compute_dtype or ctx.dtype
    v = declared(ctx)
    L64 = f64(res).requires_grad_(True)
    (exact,) = torch.autograd.grad((mhc.h_res(v, L64) * G).sum(), L64)
    low_logits = res.detach().to("cpu", compute).requires_grad_(True)
    low_G = G.to(ctx.precision.output).to(compute)
    (low,) = torch.autograd.grad((mhc.h_res(v, low_logits) * low_G).sum(), low_logits)
    want, got = (torch.autograd.grad(res, x, grad_outputs=k.to(res), retain_graph=True)[0]
                 for k in (exact, low))
    return metrics.scaled_error(got, want)


AFFINE_COMBINATIONS = ((1 / 3, 1 / 3, 1 / 3), (-0.5, 1.0, 0.5))
"""Affine weights λ (Σλ = 1) of the two combined states of ``variant.logits_affine``: the
first, an average of unit vectors, has RMS ρ < 1 (it fixes ``b``); the second extrapolates."""
AFFINE_CONDITIONING = 0.05
"""Smallest ``|1 − ρ|`` of the first combination at which ``b`` is solved (below it the case is
inconclusive)."""


def _unit_rms(y: torch.Tensor) -> torch.Tensor:
    """``vec(Y) / rms(vec(Y))`` per token, float64 ``[B, T, n·d]``."""
    flat = f64(y).flatten(-2)
    return flat / flat.pow(2).mean(-1, keepdim=True).sqrt()


def _flat_logits(impl: HyperConnectionImpl, y: torch.Tensor) -> torch.Tensor:
    """``(H̃_pre, H̃_post, vec H̃_res)`` of ``impl`` at ``y``, float64 ``[B, T, 2n + n²]``."""
    return torch.cat([f64(t).flatten(2) for t in target_logits(impl, y)], dim=-1)


@declare(
    "variant.logits_affine",
    statement="logits(x) is affine in the RMS-normalised flattened state: A·RMSNorm(vec X) + b",
    requires=(kinds("mhc"), capability(LOGITS)), tolerance=rules.LAW,
    cases=Cases(perturbations=(0.3, 1.0), extreme_scales=False), prerequisites=BASE)
def check_logits_affine(ctx: Context, case: Case) -> None:
    """mHC Eq. 7: ``H̃ = α·(x' φ) + b`` with ``x' = RMSNorm(vec X)``, affine in ``x'``
    (DeepSeek-V4: ``(x_flat @ fn)·rsqrt(mean(x²) + eps)·scale + base``, the same form). With
    three states ``Y_k`` per token (unit vectors ``u_k = vec(Y_k)/rms``) and two affine
    combinations ``q = Σ λ_k u_k`` fed at a magnitude where the norm's epsilon is negligible,
    ``L(q) = (Σ λ_k L(Y_k) − b)/ρ + b`` with ``ρ = rms(q)``: the first combination gives ``b``,
    the second must then match. A nonlinearity inside the logits (a tanh or GELU on ``x'φ``)
    breaks it; the scale of the states cannot, since every input is normalised. Below
    float32 the oracle is the same check run on the closed form along the run's dtype chain
    (:func:`_affine_at_precision`): the law's 8 × that floor, not 256·eps (2.0 in bfloat16).

    Raises:
        PropertyFailure: the second combination's logits differ from the affine prediction.
        Inconclusive: the first combination's RMS is within :data:`AFFINE_CONDITIONING` of 1
            (``b`` cannot be solved), or the second's below it (tiny ``n·d``).
    """
    if ctx.conventions.formula.construction == "birkhoff":
        raise NotApplicable("H_res is declared 'birkhoff': its logits are one per permutation, "
                            "not the n² of the affine map this check solves for")
    impl = ctx.build.make(case)
    big = min(1e4, math.sqrt(torch.finfo(ctx.dtype).max) / 16)  # ε/mean square negligible

    def fed(q: torch.Tensor) -> torch.Tensor:
        return (q * big).reshape(case.shape).to(device=ctx.device, dtype=ctx.dtype)

    states = [fed(_unit_rms(strategies.gaussian(
        case.shape, case.seed, salts.AFFINE_LOGITS_STATE.at(k), torch.float64)))
        for k in range(3)]
    units = [_unit_rms(y) for y in states]
    combined = [fed(sum((c * u for c, u in zip(lam, units, strict=True)),
                        torch.zeros_like(units[0]))) for lam in AFFINE_COMBINATIONS]
    rho1, rho2 = (f64(y).flatten(-2).pow(2).mean(-1, keepdim=True).sqrt() / big
                  for y in combined)
    gap = float((rho1 - 1).abs().min())
    if gap < AFFINE_CONDITIONING:
        raise Inconclusive(f"the average of the three unit states has RMS within {gap:.3g} of "
                           f"1 (n·d = {case.n * case.d}): the offset b cannot be solved")
    if float(rho2.min()) < AFFINE_CONDITIONING:
        raise Inconclusive(f"the extrapolated combination has RMS {float(rho2.min()):.3g} "
                           f"(n·d = {case.n * case.d}): it cannot be normalised")
    error, scale = _affine_error(lambda y: _flat_logits(impl, y), states, combined, rho1, rho2)
    oracle = None
    if precision.low_precision(ctx):
        oracle = _affine_error(_affine_at_precision(ctx, impl, case), states, combined, rho1,
                               rho2)[0]
    ctx.record.expect("logits at an affine combination of normalised states vs the affine "
                      "prediction", error, oracle=oracle,
                      detail=f"combinations {AFFINE_COMBINATIONS}; max |logit| {scale:.3g}",
                      hint="a nonlinearity inside the logits (mHC Eq. 7 is affine in "
                           "RMSNorm(vec X): α·(x'φ) + b, no tanh)")


def _affine_error(logits: Callable[[torch.Tensor], torch.Tensor], states: list[torch.Tensor],
                  combined: list[torch.Tensor], rho1: torch.Tensor, rho2: torch.Tensor,
                  ) -> tuple[float, float]:
    """``(scaled error, max |logit|)`` of :func:`check_logits_affine` for the logits function
    ``logits(y [B, T, n, d]) -> [B, T, m]`` (float64): ``b`` solved from the first
    combination (RMS ``rho1 [B, T, 1]``), the second's (``rho2``) predicted from it."""
    base = [logits(y) for y in states]
    mixed1, mixed2 = (sum((c * L for c, L in zip(lam, base, strict=True)),
                          torch.zeros_like(base[0])) for lam in AFFINE_COMBINATIONS)
    got1, got2 = (logits(y) for y in combined)
    b = (got1 * rho1 - mixed1) / (rho1 - 1)
    want = (mixed2 - b) / rho2 + b
    scale = max(float(t.abs().max()) for t in (*base, got2))
    return metrics.scaled_error(got2, want, scale), scale


def _affine_at_precision(ctx: Context, impl: HyperConnectionImpl, case: Case,
                         ) -> Callable[[torch.Tensor], torch.Tensor]:
    """The spec's closed form ``A·RMSNorm(vec Y)`` (a fixed Gaussian ``A``, no offset: the
    whole logit is the part the state moves, the worst case relative to ``max |logit|``) along
    the run's dtype chain: the state rounded to the effective dtype, the norm and the
    projection in the compute dtype (declared, else the working dtype), the logits rounded to
    the dtype the target returns its own in; float64 ``[B, T, 2n + n²]``. Its error in
    :func:`_affine_error` is the ``oracle`` of :func:`check_logits_affine` (the ratio is
    independent of ``A``'s size)."""
    compute = ctx.conventions.compute_dtype or ctx.dtype
    returned = target_logits(impl, ctx.inputs.state(case), declared(ctx))[0].dtype
    A = strategies.gaussian((case.n * case.d, 2 * case.n + case.n ** 2), case.seed,
                            salts.AFFINE_LOGITS_MAP.at(), torch.float64)

    def logits(y: torch.Tensor) -> torch.Tensor:
        flat = y.detach().to("cpu", ctx.precision.output).to(compute).flatten(-2)
        unit = flat * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True))
        return f64((unit @ A.to(compute)).to(returned))

    return logits
