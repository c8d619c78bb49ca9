"""Law family: ``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` per token (HC Eq. 3–5, mHC Eq. 3),
against the reported weights, against black-box probed weights, and reported ≡ probed.

The spec's closed form (:func:`hcspec.spec.numeric.forward`) computes the expected output; the
theorem ``layout.paper_rows`` proves it equals the papers' matrix form.
"""

from __future__ import annotations

import dataclasses

import torch
from hypothesis import strategies as st

from hcspec.conformance.author import (
    PARAMETERS,
    PROBING,
    WEIGHTS,
    Case,
    Cases,
    Context,
    HyperConnectionImpl,
    NotApplicable,
    any_state_domain,
    branch64,
    capability,
    declare,
    expected_output,
    f64,
    flat_jacobian,
    floating_parameters,
    kinds,
    metrics,
    precision,
    probes,
    rules,
    shift,
    size_rows,
    subtract_flat_step,
)
from hcspec.spec import numeric

BASE = ("shape.output", "shape.branch_once")
LAW_BRANCHES = ("mlp", "linear", "identity", "constant")


@declare(
    "law.reported",
    statement="X' = H_res X + h_post F(h_preᵀX)ᵀ per token with the impl's reported weights",
    theorems=("layout.paper_rows",), requires=(capability(WEIGHTS),), tolerance=rules.LAW,
    cases=Cases(branches=LAW_BRANCHES, oracle=True), prerequisites=(*BASE, "shape.weights"))
def check_reported(ctx: Context, case: Case) -> None:
    """Output equals the law evaluated with the impl's own ``weights(x)``; the branch received
    the declared input ``h_preᵀ X`` (or its declared norm)."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    h_pre, h_post, H_res = (f64(w) for w in ctx.observe.weights(impl, x))
    branch = ctx.inputs.branch(case)
    out = ctx.observe.forward(impl, x, branch)
    want, inp, scale = expected_output(ctx, case, x, h_pre, h_post, H_res)
    oracle, oracle_in = precision.law_oracles(ctx, case, x, (h_pre, h_post, H_res),
                                              (want, inp, scale))
    where = (f" (in {ctx.precision.output}: 8 × the closed form's own error in it)"
             if oracle is not None else "")
    ctx.record.expect(f"branch input vs h_preᵀX from weights(x){where}",
                      metrics.scaled_error(branch.inputs[0], inp),
                      detail=f"declared branch input: {ctx.conventions.branch_input}",
                      oracle=oracle_in)
    ctx.record.expect(f"X' vs H_res X + h_post F(h_preᵀX)ᵀ with weights(x){where}",
                      metrics.scaled_error(out, want, scale), oracle=oracle)


@declare(
    "law.probed",
    statement="black-box probes (F ≡ 0, F ≡ c, F = id, X⁺) give weights under which the law holds",
    theorems=("layout.paper_rows",), requires=(PROBING,), tolerance=rules.LAW,
    cases=Cases(d_more_than_n=True, branches=LAW_BRANCHES, oracle=True),
    prerequisites=BASE)
def check_probed(ctx: Context, case: Case) -> None:
    """Black-box: ``F ≡ 0`` gives a linear mix ``H_res X``, a constant branch writes
    ``h_post cᵀ``, the branch reads ``h_preᵀ X``, the identity branch is consistent with both,
    and the case's branch gives the law with these probed weights."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    probed = ctx.observe.probe(impl, x, case)
    spec = None
    if precision.low_precision(ctx) and probed.h_pre is not None:
        spec = precision.spec_at_precision(ctx, probed.h_pre, probed.h_post, probed.H_res)
        reference = precision.probe_spec(ctx, spec, x, case)
    for name, what in (
        ("mix", "F ≡ 0: X'(0) is H_res X for some H_res (X'(0) − X'(0) X⁺ X)"),
        ("write", "F ≡ c: X'(c) − X'(0) = h_post cᵀ"),
        ("read", "branch input = h_preᵀ X for some h_pre"),
        ("identity", "F = id: X'(id) − X'(0) = h_post x_inᵀ"),
    ):
        if name in probed.residuals:
            ctx.record.expect(f"probe {what}", probed.residuals[name],
                              oracle=None if spec is None else reference.residuals.get(name, 0.0))
    branch = ctx.inputs.branch(case)
    out = ctx.observe.forward(impl, x, branch)
    if probed.h_pre is not None:
        want, _, scale = expected_output(ctx, case, x, probed.h_pre, probed.h_post, probed.H_res)
    else:  # the branch input is a declared norm of x_in: use what the branch received
        z = branch64(ctx, case)(f64(branch.inputs[0]))
        want = torch.from_numpy(numeric.forward(
            f64(x).numpy(), probed.h_post.numpy(), probed.H_res.numpy(), z.numpy()))
        scale = max(float(f64(x).abs().max()), float(want.abs().max()))
    oracle = None
    if spec is not None:
        spec_out = spec.forward(x, ctx.inputs.branch(case, record=False))
        oracle = metrics.scaled_error(spec_out, want, scale)
    ctx.record.expect(f"X' ({case.branch} branch) vs the law with probed weights",
                      metrics.scaled_error(out, want, scale), oracle=oracle)


@declare(
    "law.reported_matches_probed",
    statement="weights(x) equals the weights read through the branch",
    theorems=("layout.paper_rows",), requires=(capability(WEIGHTS), PROBING), tolerance=rules.LAW,
    cases=Cases(d_more_than_n=True, branches=LAW_BRANCHES, oracle=True),
    prerequisites=(*BASE, "shape.weights"))
def check_reported_matches_probed(ctx: Context, case: Case) -> None:
    """``weights(x)`` equals the weights read through the branch."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    reported = [f64(w) for w in ctx.observe.weights(impl, x)]
    probed = ctx.observe.probe(impl, x, case)
    names = ("h_pre", "h_post", "H_res")
    oracles: dict[str, float | None] = dict.fromkeys(names)
    if precision.low_precision(ctx):  # 8 × what probing the closed form costs in it
        rep_w = (reported[0], reported[1], reported[2])
        for weights in (rep_w, *precision.weights_within_rounding(ctx, case, rep_w)):
            reference = precision.probe_spec(
                ctx, precision.spec_at_precision(ctx, *weights), x, case)
            for name, rep, ref in zip(names, reported, (reference.h_pre, reference.h_post,
                                                        reference.H_res), strict=True):
                if ref is not None:
                    oracles[name] = max(oracles[name] or 0.0, metrics.scaled_error(rep, ref))
    pairs = [("h_post", reported[1], probed.h_post), ("H_res", reported[2], probed.H_res)]
    if probed.h_pre is not None:
        pairs.insert(0, ("h_pre", reported[0], probed.h_pre))
    for name, rep, prb in pairs:
        resolution = _probe_resolution(ctx, probed, name, rep, prb)
        ctx.record.expect(f"reported {name} vs probed {name}",
                          metrics.scaled_error(rep, prb),
                          detail=f"max |reported| {float(rep.abs().max()):.3g}"
                                 + (f"; probe resolution {resolution:.3g}" if resolution else ""),
                          oracle=oracles[name], factor=max(1, case.n), extra=resolution)


def _probe_resolution(ctx: Context, probed: probes.ProbedWeights, name: str,
                      reported: torch.Tensor, got: torch.Tensor) -> float:
    """Below float32, the most that rounding alone moves ``|reported − probed|`` for weight
    ``name`` (scaled as :func:`metrics.scaled_error` scales it), to first order: the
    reported weights rounded to the effective dtype (``u·|w|``) plus the probe's sensitivity to
    the rounding of what it reads (:attr:`probes.ProbedWeights.sensitivity` × ``u``), ``u``
    the effective dtype's unit roundoff. A measured floor is one draw of that rounding; where
    X is ill-conditioned (d close to n) the probe amplifies it far past the draw (a correct
    bfloat16 dynamic HC at n = 4, d = 5 read back h_pre 0.036 off where the closed form's probe
    read back 0.002–0.012). 0 in float32/float64 (the law's budget covers the probes there)."""
    if not precision.low_precision(ctx) or name not in probed.sensitivity:
        return 0.0
    u = 0.5 * torch.finfo(ctx.precision.output).eps
    bound = u * (reported.abs() + probed.sensitivity[name])
    return float(bound.max()) / max(1.0, float(got.abs().max()))


STEER_STEPS = 8


def cyclic_permutation(n: int) -> torch.Tensor:
    """``P [n, n]`` float64 with ``P[i, (i + 1) mod n] = 1``: ``(P X)_i = X_{i+1 mod n}``."""
    return torch.roll(torch.eye(n, dtype=torch.float64), shifts=1, dims=1)


def constant_streams(case: Case, ctx: Context) -> torch.Tensor:
    """The bug report's state: stream i holds the constant ``(i + 1)·scale``, ``[B, T, n, d]``."""
    values = torch.arange(1, case.n + 1, dtype=torch.float64) * case.scale
    x = values.view(1, 1, case.n, 1).expand(case.batch, case.tokens, case.n, case.d)
    return x.to(device=ctx.device, dtype=ctx.dtype).contiguous()


def steer_tolerance(ctx: Context) -> float:
    """How close :func:`steer_h_res` brings the reported H_res to a target with entries 0 and
    1: :func:`hcspec.conformance.rules.law` in float64/float32; in bfloat16/float16
    :func:`hcspec.conformance.rules.law_measured` of a zero reference error (such a
    target is exact in every float format, so the closed form adds no error): ``4·eps``."""
    return ctx.record.allowance(rules.LAW, oracle=precision.oracle(ctx, lambda: 0.0)).allowance


def steer_h_res(ctx: Context, impl: HyperConnectionImpl, x: torch.Tensor,
                target: torch.Tensor) -> float:
    """Move the impl's parameters (Gauss–Newton, least-norm steps) until its reported H_res at
    ``x`` equals ``target [n, n]`` for every token within :func:`steer_tolerance`; returns the
    remaining max deviation.

    Works through autograd on ``weights(x)``, so it needs no knowledge of how the impl stores
    H_res (a parameter, its transpose, a static part plus a dynamic one).

    Raises:
        NotApplicable: no floating parameter reaches H_res.
    """
    params = floating_parameters(impl, trainable=True)
    if not params:
        raise NotApplicable("no exposed parameter requires grad, so H_res cannot be steered")
    want = target.to(device=x.device, dtype=x.dtype)
    deviation = float("inf")
    for _ in range(STEER_STEPS):
        with torch.enable_grad():
            residual = (ctx.observe.weights(impl, x)[2] - want).flatten()
            deviation = float(residual.detach().abs().max())
            if deviation <= steer_tolerance(ctx):
                break
            jacobian = flat_jacobian(residual, params)
        if not bool(jacobian.abs().max() > 0):
            raise NotApplicable("weights(x)'s H_res does not depend on the exposed parameters, "
                                "so it cannot be steered")
        step = torch.linalg.pinv(jacobian) @ f64(residual)
        subtract_flat_step(params, step)
    return deviation


def _permutation_examples(ctx: Context) -> list[Case]:
    # the recipe of public bug report #1 first: n = 4, d = 8, B = 1, T = 3, at init
    return shift(ctx, [
        Case(1, 3, 4, 8, layer_index=0, seed=0, perturb=0.0, branch="zero"),
        Case(2, 2, 3, 5, layer_index=1, seed=1, perturb=0.3, branch="zero"),
        Case(1, 2, 2, 3, layer_index=3, seed=2, perturb=1.0, scale=10.0, branch="zero"),
    ]) + size_rows(ctx, Case(1, 2, 4, 8, layer_index=2, seed=3, perturb=0.3, branch="zero"),
                   min_n=2, d_more_than_n=True)


def _permutation_strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return PERMUTATION_CASES.strategy(ctx)


PERMUTATION_CASES = Cases(d_more_than_n=True, min_n=2, branches=("zero",), oracle=True,
                          extreme_scales=False)


@declare(
    "law.permutation_mixing",
    statement="with H_res steered to a cyclic permutation P and F ≡ 0, X' = P X (streams permuted)",
    theorems=("ds.permutation_vertices",),
    requires=(kinds("hc-static", "hc-dynamic"), capability(PARAMETERS), capability(WEIGHTS),
              any_state_domain("needs distinct streams (stream i constant i + 1)")),
    tolerance=rules.LAW, examples=_permutation_examples, strategy=_permutation_strategy,
    cases=PERMUTATION_CASES,
    prerequisites=(*BASE, "shape.weights"), explore=False)
def check_permutation_mixing(ctx: Context, case: Case) -> None:
    """Public bug report #1 (the width connection returned the streams from before mixing):
    steer H_res to the cyclic permutation P through the parameters, then with F ≡ 0 on the
    state "stream i constant i + 1" the output must be the permuted input ``P X``, within
    ``n`` times the steering tolerance (:func:`steer_tolerance`); in bfloat16/float16 within
    :func:`hcspec.conformance.rules.law_measured` of the error of the closed form
    computed in that precision with the steered weights (:mod:`.precision`)."""
    impl = ctx.build.make(case)
    x = constant_streams(case, ctx)
    P = cyclic_permutation(case.n)
    left = steer_h_res(ctx, impl, x, P)
    tol = steer_tolerance(ctx) * case.n  # how far steering may stop short (not a verdict)
    if left > tol:
        raise NotApplicable(f"could not steer the reported H_res to a cyclic permutation "
                            f"through the parameters (max deviation {left:.3g} after "
                            f"{STEER_STEPS} Gauss–Newton steps)")
    with torch.no_grad():
        out = ctx.observe.forward(impl, x, ctx.inputs.branch(case, "zero", record=False))
    X = f64(x)
    want = P @ X
    got = f64(out)
    where = ""
    oracle = None
    if precision.low_precision(ctx):  # 8 × what the closed form costs with these weights
        with torch.no_grad():
            weights = [f64(w) for w in ctx.observe.weights(impl, x)]
            spec_out = precision.spec_at_precision(ctx, *weights).forward(
                x, ctx.inputs.branch(case, "zero", record=False))
        oracle = metrics.scaled_error(spec_out, want)
        where = f" (in {ctx.precision.output}: 8 × the closed form's own error in it)"
    streams = ", ".join(f"{float(v):g}" for v in got[0, 0, :, 0])
    expected = ", ".join(f"{float(v):g}" for v in want[0, 0, :, 0])
    ctx.record.expect("F ≡ 0 with H_res = cyclic permutation: X' vs the permuted streams P X"
                      f"{where}", metrics.scaled_error(got, want),
                      detail=f"streams of token 0 came out as [{streams}], expected "
                             f"[{expected}] (streams returned unmixed? H_res transposed?)",
                      oracle=oracle, factor=case.n)


@declare(
    "law.token_mixing_branch",
    statement="a token-mixing branch receives the whole [B,T,d] sequence and the law holds",
    theorems=("layout.paper_rows",), requires=(PROBING,), tolerance=rules.LAW,
    cases=Cases(d_more_than_n=True, branch="token_mixing", branches=("token_mixing",),
                min_tokens=2, oracle=True),
    prerequisites=(*BASE, "law.probed"))
def check_token_mixing(ctx: Context, case: Case) -> None:
    """With a branch that mixes tokens (a causal running mean), the branch sees the whole
    ``[B, T, d]`` sequence of ``x_in`` and the law holds with probed weights."""
    check_probed(ctx, dataclasses.replace(case, branch="token_mixing"))
