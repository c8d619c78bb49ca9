"""Gradients family: finite differences vs autograd in float64 (w.r.t. the input and the
exposed parameters), autograd vs the spec's closed-form backward
(:func:`hcspec.spec.numeric.backward`)
on the reported (or, for static HC, probed) weights, and finite gradients at extreme logits.

Loss: ``L = ⟨G', X'⟩`` for a random upstream gradient ``G'``, so ``∂L/∂X'`` = ``G'``.
Closed form (spec ``backward.closed_form``): ``g_z = G'ᵀ h_post``,
``g_in = Jᵀ g_z``, ``∂L/∂X = H_resᵀ G' + h_pre g_inᵀ`` plus, for input-dependent weights, the
chain through ``weights(x)`` with cotangents ``∂L/∂H_res = G' Xᵀ``, ``∂L/∂h_post = G' z``,
``∂L/∂h_pre = X g_in``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch

from hcspec.conformance.author import (
    DIFFERENTIABLE,
    PARAMETERS,
    PER_STREAM_READ,
    PROBED_H_PRE,
    PROBING,
    SMOOTH_BRANCHES,
    WEIGHTS,
    Branch,
    Case,
    Cases,
    Context,
    HyperConnectionImpl,
    Inconclusive,
    NotApplicable,
    PropertyFailure,
    any_state_domain,
    branch64,
    capability,
    declare,
    f64,
    float64,
    floating_parameters,
    kinds,
    metrics,
    np64,
    precision,
    probes,
    rules,
    salts,
    shift,
    size_rows,
    strategies,
)
from hcspec.conformance.machinery.cotangents import chained as chain_cotangents
from hcspec.conformance.machinery.finite_differences import expect_directional, fd_denominator
from hcspec.conformance.machinery.sinkhorn_variant import UNROLLED, implicit_gradient_cause
from hcspec.spec import numeric
from hcspec.spec.kinds import MHC

BASE = ("shape.output", "shape.branch_once")
DIRECTIONS = salts.FD_INPUT_DIRECTION.shape[0]
"""Random directions per case of the finite-difference checks."""
FLOAT64 = float64("the gradient checks run in float64 (finite differences, the spec's closed "
                  "form at 1e-11)")
SMOOTH = Cases(d_more_than_n=True, branches=SMOOTH_BRANCHES, extreme_scales=False, oracle=True)
"""Smooth branches (finite differences), d > n, no extreme magnitudes."""


def _loss(impl: HyperConnectionImpl, x: torch.Tensor, branch: Branch,
          G: torch.Tensor) -> torch.Tensor:
    """``⟨G', X'⟩``; fails when the output is not connected to autograd although the input or
    the parameters require grad (e.g. an output rebuilt under ``no_grad``)."""
    given = x.clone()  # as probes.forward_on_copy, kept to recognise it in the output
    out = impl.forward(given, branch)
    loss = (out * G).sum()
    if torch.is_grad_enabled() and not loss.requires_grad:
        returned_input = (isinstance(out, torch.Tensor)
                          and out.data_ptr() == given.data_ptr())
        hint = (" — it returned the very tensor it was given, overwritten in place (see "
                "state.input_unchanged)" if returned_input else "")
        raise PropertyFailure(
            "forward's output is not connected to autograd (requires_grad is False although "
            f"the input or the parameters require grad): no gradient can reach them{hint}")
    return loss


def _magnitude(impl: HyperConnectionImpl, x: torch.Tensor, branch: Branch,
               G: torch.Tensor) -> tuple[float, float]:
    """``(Σ|G'_i X'_i|, ‖G' ⊙ X'‖₂)``: the size of the terms of ``L`` (its rounding error
    scales with them), measured on the output the impl returns."""
    with torch.no_grad():
        terms = f64(probes.forward_on_copy(impl, x, branch)) * f64(G)
        return float(terms.abs().sum()), float(terms.norm())


def _trainable(impl: HyperConnectionImpl) -> list[torch.Tensor]:
    params = floating_parameters(impl, trainable=True)
    if not params:
        raise NotApplicable("no exposed parameter requires grad")
    return params


def _examples(ctx: Context) -> list[Case]:
    return (Cases(d_more_than_n=True, oracle=True).examples(ctx)
            + Cases(d_more_than_n=True, branch="linear").examples(ctx)[1:3])


def _trainable_examples(ctx: Context) -> list[Case]:
    # n ≥ 2: at n = 1 mHC's H_res is [1] for any parameters (spec mhc.n1_residual)
    return Cases(min_n=2, oracle=True).examples(ctx)


def _extreme_examples(ctx: Context) -> list[Case]:
    return shift(ctx, [Case(2, 3, 4, 8, seed=0, perturb=1.0, param_scale=1e4),
                       Case(2, 2, 2, 5, seed=1, perturb=0.3, param_scale=1e2)]) + size_rows(
        ctx, Case(2, 2, 4, 8, seed=2, perturb=1.0, param_scale=1e4), d_more_than_n=True)


@declare(
    "gradients.fd_input",
    statement="finite differences of ⟨G', X'⟩ w.r.t. x match autograd (float64)",
    theorems=("backward.closed_form",), requires=(DIFFERENTIABLE, FLOAT64, UNROLLED),
    tolerance=rules.FD, examples=_examples, cases=SMOOTH, prerequisites=BASE)
def check_fd_input(ctx: Context, case: Case) -> None:
    """Directional central differences of ⟨G', X'⟩ w.r.t. x match autograd (float64)."""
    with _naming_an_implicit_sinkhorn_backward(ctx, case):
        _check_fd_input(ctx, case)


@contextlib.contextmanager
def _naming_an_implicit_sinkhorn_backward(ctx: Context, case: Case) -> Iterator[None]:
    """A failure inside gets the hint "implicit Sinkhorn backward" when that is its cause
    (:func:`hcspec.conformance.machinery.sinkhorn_variant.implicit_gradient_cause`)."""
    try:
        yield
    except PropertyFailure as failure:
        if failure.hint is None:
            failure.hint = implicit_gradient_cause(ctx, case)
        raise


def _check_fd_input(ctx: Context, case: Case) -> None:
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), ctx.dtype,
                            ctx.device)
    xg = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(_loss(impl, xg, fn, G), xg)
    ctx.record.require(grad is not None and bool(torch.isfinite(grad).all()),
                       "autograd gradient w.r.t. x is missing or non-finite")
    magnitude = _magnitude(impl, x, fn, G)
    for k in range(DIRECTIONS):
        v = ctx.inputs.tangent(strategies.gaussian(
            x.shape, case.seed, salts.FD_INPUT_DIRECTION.at(k), ctx.dtype, ctx.device))

        def loss_at(t: float, v: torch.Tensor = v) -> float:
            with torch.no_grad():
                return float(_loss(impl, x + t * v, fn, G))

        ad = float((grad * v).sum())
        denominator = fd_denominator(ctx.precision.output, ad, case.scale)
        expect_directional(ctx, "directional derivative w.r.t. x: finite differences vs "
                            "autograd", loss_at, case.scale, ad, denominator, magnitude)


@declare(
    "gradients.fd_parameters",
    statement="finite differences of ⟨G', X'⟩ w.r.t. the parameters match autograd (float64)",
    theorems=("backward.closed_form",),
    requires=(DIFFERENTIABLE, capability(PARAMETERS), FLOAT64, UNROLLED),
    tolerance=rules.FD, examples=_examples, cases=SMOOTH, prerequisites=BASE)
def check_fd_parameters(ctx: Context, case: Case) -> None:
    """Directional central differences of ⟨G', X'⟩ w.r.t. the exposed parameters match
    autograd (float64)."""
    with _naming_an_implicit_sinkhorn_backward(ctx, case):
        _check_fd_parameters(ctx, case)


def _check_fd_parameters(ctx: Context, case: Case) -> None:
    impl = ctx.build.make(case)
    params = _trainable(impl)
    x = ctx.inputs.state(case)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), ctx.dtype,
                            ctx.device)
    grads = torch.autograd.grad(_loss(impl, x, fn, G), params, allow_unused=True)
    grads = tuple(torch.zeros_like(p) if g is None else g for p, g in zip(params, grads,
                                                                          strict=True))
    saved = [p.detach().clone() for p in params]
    magnitude = _magnitude(impl, x, fn, G)
    try:
        for k in range(DIRECTIONS):
            vs = [strategies.gaussian(p.shape, case.seed, salts.FD_PARAMETER_DIRECTION.at(k, i),
                                       p.dtype, str(p.device))
                  for i, p in enumerate(params)]

            def loss_at(t: float, vs: list[torch.Tensor] = vs) -> float:
                with torch.no_grad():
                    for p, s, v in zip(params, saved, vs, strict=True):
                        p.copy_(s + t * v)
                    return float(_loss(impl, x, fn, G))

            ad = float(sum((g * v).sum() for g, v in zip(grads, vs, strict=True)))
            denominator = fd_denominator(ctx.precision.output, ad, case.scale)
            expect_directional(ctx, "directional derivative w.r.t. the parameters: finite "
                                "differences vs autograd", loss_at, 1.0, ad, denominator,
                                magnitude)
    finally:
        with torch.no_grad():
            for p, s in zip(params, saved, strict=True):
                p.copy_(s)


def _closed_form(ctx: Context, case: Case, X: torch.Tensor, G: torch.Tensor,
                 h_pre: torch.Tensor, h_post: torch.Tensor, H_res: torch.Tensor,
                 round_branch_input: bool = False) -> numeric.ConnectionGrads:
    """The spec's closed-form backward (float64) at ``X``, ``G'`` and the weights;
    ``round_branch_input`` rounds what the branch receives to the run's effective dtype (as a
    target returning that dtype hands it over), its gradient passing straight through."""
    x_in = torch.from_numpy(numeric.aggregate(np64(X), np64(h_pre))).requires_grad_(True)
    given = ctx.observe.branch_input(x_in)
    if round_branch_input:
        given = given + (_rounded(ctx, given) - given).detach()
    z = branch64(ctx, case)(given)
    g_z = torch.from_numpy(numeric.branch_cotangent(np64(G), np64(h_post)))
    (g_in,) = torch.autograd.grad(z, x_in, grad_outputs=g_z)  # Jᵀ g_z (norm included)
    return numeric.backward(np64(G), np64(X), np64(h_pre), np64(h_post), np64(H_res),
                            np64(z), np64(g_in))


@declare(
    "gradients.closed_form",
    statement="autograd ∂L/∂x, ∂L/∂θ equal the spec's closed-form backward on weights(x)",
    theorems=("backward.closed_form",), requires=(DIFFERENTIABLE, capability(WEIGHTS), FLOAT64),
    tolerance=rules.LAW, examples=_examples, cases=SMOOTH,
    prerequisites=(*BASE, "law.reported"))
def check_closed_form(ctx: Context, case: Case) -> None:
    """Autograd's ∂L/∂x (and ∂L/∂θ) equal the spec's closed form on weights(x), chained
    through weights(x) for input-dependent weights."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case).requires_grad_(True)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), ctx.dtype,
                            ctx.device)
    weights = ctx.observe.weights(impl, x)
    h_pre, h_post, H_res = (f64(w) for w in weights)
    spec = _closed_form(ctx, case, f64(x), f64(G), h_pre, h_post, H_res)
    params = floating_parameters(impl, trainable=True)
    low = precision.low_precision(ctx)
    chains = _along_the_chain(ctx, case, x, G, h_pre, h_post, H_res) if low else []
    live = [i for i, w in enumerate(weights) if w.requires_grad]

    def chained_with(grads: numeric.ConnectionGrads) -> list[torch.Tensor]:
        cotangents = (grads.h_pre, grads.h_post, grads.H_res)
        return chain_cotangents(x, params, [weights[i] for i in live],
                                [torch.from_numpy(cotangents[i]) for i in live])

    chained = chained_with(spec)
    chained_low = [(c, chained_with(c)) for c in chains]
    want_x = torch.from_numpy(spec.X) + f64(chained[0])
    auto = torch.autograd.grad(_loss(impl, x, fn, G), [x, *params], allow_unused=True)
    auto_x = auto[0] if auto[0] is not None else torch.zeros_like(x)
    oracle_x = None
    if low:  # the closed form along the chain (its result rounded too): the largest error
        oracle_x = max(metrics.scaled_error(
            ctx.inputs.tangent(_rounded(ctx, torch.from_numpy(c.X)) + f64(ch[0])),
            ctx.inputs.tangent(want_x)) for c, ch in chained_low)
    ctx.record.expect("∂L/∂x: autograd vs H_resᵀG' + h_pre g_inᵀ (+ chain through weights(x))"
                      + (" projected on replicated states" if ctx.replicated else ""),
                      metrics.scaled_error(ctx.inputs.tangent(f64(auto_x)),
                                              ctx.inputs.tangent(want_x)), oracle=oracle_x,
                      roundings=2)
    for i, (p, g) in enumerate(zip(params, auto[1:], strict=True)):
        got_p = torch.zeros_like(p) if g is None else g
        ctx.record.expect(f"∂L/∂(parameter {i}, shape {list(p.shape)}): autograd vs the closed "
                          "form chained through weights(x)",
                          metrics.scaled_error(got_p, chained[1 + i]),
                          oracle=max(metrics.scaled_error(ch[1 + i], chained[1 + i])
                                     for _, ch in chained_low) if low else None, roundings=2)


def _along_the_chain(ctx: Context, case: Case, x: torch.Tensor, G: torch.Tensor,
                     h_pre: torch.Tensor, h_post: torch.Tensor,
                     H_res: torch.Tensor) -> list[numeric.ConnectionGrads]:
    """The closed form evaluated the ways a correct target of the run's low precision may
    round along its declared dtype chain (compute dtype inside, the effective dtype at its
    boundary): ``G'`` rounded to the effective dtype; the same with the branch input
    rounded to it too (either is correct, see ``make_bf16_unrounded_branch_input``); and that
    with the reported weights moved within half a unit of their last place — they are the
    compute dtype's weights rounded to the effective dtype, so the ones the target used lie
    there (:func:`precision.weights_within_rounding`). ``X`` is rounded to the declared compute
    dtype only: the target is handed the float64 state and its declared chain computes with it
    in that dtype, as :class:`~hcspec.conformance.machinery.precision.SpecAtPrecision` does.
    The check's floor is the largest error of these against float64: one evaluation's error
    is a single draw and can cancel by chance (a scalar parameter's gradient sums many terms:
    a correct bfloat16 dynamic HC's ∂L/∂s_β was off by 0.131 where one draw of the moved
    weights gave 0.013 and the largest of eight 0.098).

    Shapes: ``x``, ``G`` ``[B, T, n, d]``; the weights float64 ``[B, T, n]``, ``[B, T, n]``,
    ``[B, T, n, n]``. Raises nothing of its own."""
    X, Gr = _as_computed(ctx, x), _rounded(ctx, G)
    return [_closed_form(ctx, case, X, Gr, h_pre, h_post, H_res),
            _closed_form(ctx, case, X, Gr, h_pre, h_post, H_res, round_branch_input=True),
            *(_closed_form(ctx, case, X, Gr, *moved, round_branch_input=True)
              for moved in precision.weights_within_rounding(ctx, case, (h_pre, h_post, H_res)))]


def _rounded(ctx: Context, t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to the run's effective (output) dtype, as float64 CPU: what a target
    returning that dtype receives and gives back."""
    return f64(f64(t).to(ctx.precision.output))


def _as_computed(ctx: Context, x: torch.Tensor) -> torch.Tensor:
    """The state ``x`` as the declared chain computes with it, as float64 CPU: rounded to the
    declared compute dtype (else the working dtype, which ``x`` already has)."""
    return f64(f64(x).to(ctx.conventions.compute_dtype or ctx.dtype))


@declare(
    "gradients.closed_form_probed",
    statement="static HC: autograd ∂L/∂x equals H_resᵀG' + h_pre g_inᵀ on probed weights",
    theorems=("backward.closed_form",),
    requires=(DIFFERENTIABLE, kinds("hc-static"), FLOAT64, PROBING, PROBED_H_PRE),
    tolerance=rules.LAW,
    examples=_examples, cases=SMOOTH, prerequisites=(*BASE, "law.probed"))
def check_closed_form_probed(ctx: Context, case: Case) -> None:
    """Static HC (weights independent of x): autograd's ∂L/∂x equals the spec's closed form
    ``H_resᵀ G' + h_pre g_inᵀ`` on the probed weights."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    probed = ctx.observe.probe(impl, x, case)
    if probed.h_pre is None:  # excluded by the declared requirement PROBED_H_PRE
        raise NotApplicable("h_pre is not identifiable by probing under the declared "
                            f"branch input {ctx.conventions.branch_input!r}")
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), ctx.dtype,
                            ctx.device)
    spec = _closed_form(ctx, case, f64(x), f64(G), probed.h_pre, probed.h_post, probed.H_res)
    want_x = torch.from_numpy(spec.X)
    oracle_x = None
    if precision.low_precision(ctx):  # the closed form along the declared chain, as above
        oracle_x = max(metrics.scaled_error(_rounded(ctx, torch.from_numpy(c.X)), want_x)
                       for c in _along_the_chain(ctx, case, x, G, probed.h_pre,
                                                 probed.h_post, probed.H_res))
    xg = x.clone().requires_grad_(True)
    (auto_x,) = torch.autograd.grad(_loss(impl, xg, fn, G), xg)
    ctx.record.expect("∂L/∂x: autograd vs H_resᵀG' + h_pre g_inᵀ (probed weights)",
                      metrics.scaled_error(f64(auto_x), want_x), oracle=oracle_x,
                      roundings=2)


@declare(
    "gradients.mixing_trainable",
    statement="with F ≡ 0, ⟨G', H_res X⟩ has a non-zero gradient w.r.t. the parameters",
    requires=(DIFFERENTIABLE, PER_STREAM_READ, capability(PARAMETERS), any_state_domain(
        "on replicated states X = 1_n hᵀ a row-stochastic H_res gives H_res X = X whatever "
        "its parameters")),
    tolerance=rules.TRAINABLE, examples=_trainable_examples,
    cases=Cases(d_more_than_n=True, min_n=2, perturbations=(0.0, 0.1, 0.3), extreme_scales=False,
                oracle=True),
    prerequisites=BASE)
def check_mixing_trainable(ctx: Context, case: Case) -> None:
    """With F ≡ 0 (``X' = H_res X``) and n ≥ 2, ``L = ⟨G', X'⟩`` has a non-zero gradient
    w.r.t. the parameters: H_res can leave its init (public bug report #9: a temperature/init whose
    gradient is exactly zero, so H_res stays the identity; report #1: H_res unused)."""
    impl = ctx.build.make(case)
    params = _trainable(impl)
    x = ctx.inputs.state(case)
    G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), ctx.dtype,
                            ctx.device)
    zero = strategies.make_branch("zero", case.d, ctx.dtype, ctx.device)
    grads = torch.autograd.grad(_loss(impl, x, zero, G), params, allow_unused=True)
    norm = float(torch.sqrt(sum((f64(g).pow(2).sum() for g in grads if g is not None),
                                torch.zeros((), dtype=torch.float64))))
    scale = float(f64(G).norm() * f64(x).norm())
    relative = norm / scale if scale > 0 else 0.0
    ctx.record.expect("1e-6 / (‖∂⟨G', H_res X⟩/∂θ‖ / (‖G'‖‖X‖)) with F ≡ 0 (≤ 1: trainable)",
                      rules.TRAINABLE_RELATIVE / relative if relative > 0 else math.inf,
                      detail=f"the gradient reaching the parameters through the mixing is "
                             f"{norm:.3g} "
                      f"(relative {relative:.3g}): H_res cannot move from where it is (saturated "
                      "Sinkhorn–Knopp? H_res not used in forward?)")


@declare(
    "gradients.finite_extreme",
    statement="gradients stay finite with the parameters scaled ×1e2–×1e4",
    requires=(DIFFERENTIABLE, capability(PARAMETERS)), examples=_extreme_examples,
    cases=Cases(d_more_than_n=True, branches=SMOOTH_BRANCHES, perturbations=(0.3, 1.0),
                param_scales=(1e2, 1e4), oracle=True),
    prerequisites=BASE)
def check_finite_extreme(ctx: Context, case: Case) -> None:
    """With the parameters scaled ×1e2–×1e4, the gradients w.r.t. x and the parameters are
    finite (e.g. through Sinkhorn–Knopp at huge logits)."""
    impl = ctx.build.make(case)
    params = _trainable(impl)
    x = ctx.inputs.state(case).requires_grad_(True)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), ctx.dtype,
                            ctx.device)
    grads = torch.autograd.grad(_loss(impl, x, fn, G), [x, *params], allow_unused=True)
    bad = [("x" if i == 0 else f"parameter {i - 1}") for i, g in enumerate(grads)
           if g is not None and not bool(torch.isfinite(g).all())]
    expected = _hc_overflow_expected(ctx, params, x, case) if bad else None
    if expected is not None:
        raise Inconclusive(f"non-finite gradient w.r.t. {', '.join(bad)}: {expected}")
    ctx.record.require(not bad, f"non-finite gradient w.r.t. {', '.join(bad)} with parameters "
                       f"×{case.param_scale:g}")


HC_OVERFLOW_HEADROOM = 4.0
"""The factor on the magnitude estimate of :func:`_hc_overflow_expected`: a non-finite gradient of
an HC whose estimate stays below the dtype's largest value ÷ 4 still fails."""


def _hc_overflow_expected(ctx: Context, params: list[torch.Tensor], x: torch.Tensor,
                          case: Case) -> str | None:
    """Why a non-finite gradient is what a correct HC of the run's effective dtype returns, or
    None. HC's weights (static: the parameters; dynamic: static part + α·tanh(·)) grow with the
    parameters, unbounded (HC §2.1–2.2), so ``h_post · F(h_pre X)`` and the gradients reach about
    ``n · max|θ|² · max|X|``: past the dtype's largest value (with
    :data:`HC_OVERFLOW_HEADROOM`), the exact values are not representable and a non-finite
    gradient shows no bug. mHC's weights are bounded (σ, Sinkhorn–Knopp): never expected."""
    if ctx.kind == MHC or not params:
        return None
    theta = max(float(f64(p.detach()).abs().max()) for p in params)
    peak = max(float(f64(x.detach()).abs().max()), 1.0)
    reach = case.n * theta * theta * peak
    limit = float(torch.finfo(ctx.precision.output).max)
    if not math.isfinite(reach) or reach * HC_OVERFLOW_HEADROOM >= limit:
        return (f"HC's weights are unbounded in the parameters: with max |θ| = {theta:.3g} and "
                f"max |X| = {peak:.3g} the exact values reach about n·max|θ|²·max|X| = "
                f"{reach:.3g}, past {ctx.precision.output}'s largest value {limit:.3g} "
                f"(× {HC_OVERFLOW_HEADROOM:g} headroom)")
    return None
