"""Reduction family: the cases where HC reduces to something simpler.

* n = 1 with the unit init is the pre-norm residual ``x + F(x)`` (forward and backward; spec
  ``reduction.prenorm_forward`` / ``reduction.prenorm_backward``) — for HC kinds, whose n = 1
  init is ``h_pre = h_post = H_res = [1]``.
* mHC at n = 1: the only doubly stochastic 1×1 matrix is [1], for any parameters
  (``mhc.n1_residual``).
* The HC init (Eq. 14): ``h_pre = e_{k mod n}``, ``h_post = 1``, ``H_res = I``; a fresh stack
  of static connections between ``expand`` and ``reduce`` equals the pre-norm residual stack
  (``init.static_prenorm``); dynamic HC at init equals its static part
  (``dynamic.init_equals_static``).
"""

from __future__ import annotations

import torch

from hcspec.conformance.author import (
    DIFFERENTIABLE,
    EXPAND,
    PROBING,
    REDUCE,
    SMOOTH_BRANCHES,
    Case,
    Cases,
    Context,
    capability,
    declare,
    f64,
    kinds,
    metrics,
    precision,
    probes,
    rules,
    salts,
    shift,
    strategies,
)

BASE = ("shape.output", "shape.branch_once")
HC = kinds("hc-static", "hc-dynamic")
N1_CASES = Cases(at_init=True, branches=SMOOTH_BRANCHES)
INIT_CASES = Cases(d_more_than_n=True, at_init=True)
LAYER_SEED_STRIDE = 7919
"""Layer k of a stack draws its branch from ``case.seed + k·LAYER_SEED_STRIDE``."""


def _n1(case: Case) -> Case:
    return Case(case.batch, case.tokens, 1, case.d, layer_index=case.layer_index,
                seed=case.seed, scale=case.scale, branch=case.branch)


def _n1_examples(ctx: Context) -> list[Case]:
    return shift(ctx, [Case(2, 3, 1, 8, seed=0), Case(1, 2, 1, 3, seed=1, branch="linear"),
                       Case(3, 1, 1, 5, seed=2, layer_index=3, scale=10.0)])


def _init_examples(ctx: Context) -> list[Case]:
    cases = Cases(d_more_than_n=True, at_init=True).examples(ctx)
    return cases + shift(ctx, [Case(1, 2, 4, 8, layer_index=k, seed=10 + k) for k in (1, 2, 3, 6)])


@declare(
    "reduction.n1_prenorm_forward", statement="n = 1 at init: X' = x + F(x), the pre-norm residual",
    theorems=("reduction.prenorm_forward",), requires=(HC,),
    tolerance=rules.IDENTITY,
    examples=_n1_examples, cases=N1_CASES, prerequisites=BASE)
def check_n1_forward(ctx: Context, case: Case) -> None:
    """n = 1 at init: ``X' = x + F(x)`` (the branch's input is x itself, or its declared
    norm). In bfloat16/float16 the oracle is the closed form with ``h_pre = h_post = H_res =
    [1]`` evaluated along the run's dtype chain
    (:class:`hcspec.conformance.machinery.precision.SpecAtPrecision`), not 256·eps."""
    case = _n1(case)
    impl = ctx.build.make(case, perturb=False)
    x = ctx.inputs.state(case)
    out = ctx.observe.forward(impl, x, ctx.inputs.branch(case, record=False))
    x64 = f64(x)[..., 0, :]
    z = strategies.make_branch(case.branch, case.d, torch.float64, seed=case.seed)(
        ctx.observe.branch_input(x64))
    want = (x64 + z).unsqueeze(-2)

    def oracle() -> float:
        one = torch.ones((case.batch, case.tokens, 1), dtype=torch.float64)
        spec = precision.spec_at_precision(ctx, one, one, one.unsqueeze(-1))
        return metrics.scaled_error(
            spec.forward(x, ctx.inputs.branch(case, record=False)), want)

    ctx.record.expect("n = 1 at init: X' vs x + F(x)", metrics.scaled_error(out, want),
                      oracle=precision.oracle(ctx, oracle))


@declare(
    "reduction.n1_prenorm_backward", statement="n = 1 at init: ∂L/∂x = g' + Jᵀg'",
    theorems=("reduction.prenorm_backward",), requires=(DIFFERENTIABLE, HC),
    tolerance=rules.IDENTITY,
    examples=_n1_examples, cases=N1_CASES, prerequisites=BASE)
def check_n1_backward(ctx: Context, case: Case) -> None:
    """n = 1 at init: ``∂L/∂x = g' + Jᵀ g'`` (the bare residual term survives). In
    bfloat16/float16 the oracle is the same identity along the run's dtype chain — ``x`` and
    ``g'`` rounded to the output, the branch's input rounded to it (its gradient passing
    straight through), the result rounded again — against float64 (the identity rule's 8 ×
    that error, at least eps: a backward rounds twice), not 256·eps."""
    case = _n1(case)
    impl = ctx.build.make(case, perturb=False)
    x = ctx.inputs.state(case).requires_grad_(True)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), ctx.dtype,
                            ctx.device)
    (auto,) = torch.autograd.grad((probes.forward_on_copy(impl, x, fn) * G).sum(), x)
    x64 = f64(x)[..., 0, :].requires_grad_(True)
    z = strategies.make_branch(case.branch, case.d, torch.float64, seed=case.seed)(
        ctx.observe.branch_input(x64))
    g = f64(G)[..., 0, :]
    (jt_g,) = torch.autograd.grad(z, x64, grad_outputs=g)
    want = (g + jt_g).unsqueeze(-2)

    def oracle() -> float:
        def rounded(t: torch.Tensor) -> torch.Tensor:
            return f64(f64(t).to(ctx.precision.output))

        x_low = rounded(x.detach())[..., 0, :].requires_grad_(True)
        given = ctx.observe.branch_input(x_low)
        given = given + (rounded(given) - given).detach()
        z_low = strategies.make_branch(case.branch, case.d, torch.float64, seed=case.seed)(given)
        g_low = rounded(G)[..., 0, :]
        (jt_low,) = torch.autograd.grad(z_low, x_low, grad_outputs=g_low)
        return metrics.scaled_error(rounded(g_low + jt_low).unsqueeze(-2), want)

    ctx.record.expect("n = 1 at init: ∂L/∂x vs g' + Jᵀg'", metrics.scaled_error(auto, want),
                      oracle=precision.oracle(ctx, oracle))


@declare(
    "reduction.mhc_n1_residual", statement="mHC at n = 1: H_res = [1] for any parameters",
    theorems=("mhc.n1_residual",), requires=(kinds("mhc"),), tolerance=rules.IDENTITY,
    examples=_n1_examples, prerequisites=BASE)
def check_mhc_n1(ctx: Context, case: Case) -> None:
    """mHC at n = 1: H_res = [1] for any parameters (probed: F ≡ 0 returns x). In
    bfloat16/float16 the oracle is x rounded to the output (what a correct impl returns), so
    the allowance is the law's 8 × max(that rounding, eps/2), not 256·eps (2.0 in bfloat16,
    which H_res = [2] would pass)."""
    case = Case(case.batch, case.tokens, 1, max(case.d, 2), layer_index=case.layer_index,
                seed=case.seed, scale=case.scale, perturb=case.perturb, branch=case.branch)
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    out = ctx.observe.forward(impl, x, ctx.inputs.branch(case, "zero", record=False))
    X = f64(x)
    ctx.record.expect("n = 1: X'(F ≡ 0) vs x (H_res = [1])", metrics.scaled_error(out, X),
                      oracle=precision.oracle(ctx, lambda: metrics.scaled_error(
                          X.to(ctx.precision.output), X)),
                      extra=rules.sinkhorn_eps_deviation(ctx.precision, "exact"))


def _static_init(case: Case, layer_index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = case.n
    h_pre = torch.zeros(n, dtype=torch.float64)
    h_pre[layer_index % n] = 1.0
    return h_pre, torch.ones(n, dtype=torch.float64), torch.eye(n, dtype=torch.float64)


def _check_init_weights(ctx: Context, case: Case, label: str) -> None:
    """The probed weights at two states equal the HC init (factor n: the probes'
    pseudo-inverse); in bfloat16/float16 the oracle is what probing the closed form with the
    init weights costs in the run's precision (as ``law.reported_matches_probed``), not
    256·eps·n (8.0 in bfloat16 at n = 4 on weights in [0, 1])."""
    impl = ctx.build.make(case, perturb=False)
    want = _static_init(case, case.layer_index)
    for index, salt in enumerate((salts.STATE, salts.SECOND_STATE)):
        # two different states: weights at init must not depend on x
        x = ctx.inputs.state(case, salt=salt)
        probed = ctx.observe.probe(impl, x, case)
        got = (probed.h_pre, probed.h_post, probed.H_res)
        expanded = [w.expand(*x.shape[:2], *w.shape) for w in want]
        oracles: list[float | None] = [None, None, None]
        if precision.low_precision(ctx):
            reference = precision.probe_spec(
                ctx, precision.spec_at_precision(ctx, *expanded), x, case)
            for i, ref in enumerate((reference.h_pre, reference.h_post, reference.H_res)):
                if ref is not None:
                    oracles[i] = metrics.scaled_error(ref, expanded[i])
        for name, g, w, oracle in zip(("h_pre", "h_post", "H_res"), got, want, oracles,
                                      strict=True):
            if g is None:
                continue
            ctx.record.expect(f"{label}: probed {name} vs {_describe_init(name, case)} "
                              f"(state {index})", metrics.scaled_error(g, w.expand_as(g)),
                              factor=max(1, case.n), oracle=oracle)


def _describe_init(name: str, case: Case) -> str:
    return {"h_pre": f"e_{case.layer_index % case.n} (e_(k mod n), k = {case.layer_index})",
            "h_post": "1", "H_res": "I"}[name]


@declare(
    "reduction.static_init",
    statement="at init h_pre = e_(k mod n), h_post = 1, H_res = I (HC Eq. 14)",
    theorems=("init.static_prenorm",), requires=(kinds("hc-static"), PROBING), tolerance=rules.LAW,
    examples=_init_examples, cases=INIT_CASES, prerequisites=BASE)
def check_static_init(ctx: Context, case: Case) -> None:
    """At init h_pre = e_{k mod n}, h_post = 1, H_res = I (HC Eq. 14), for layer index k."""
    _check_init_weights(ctx, case, "static init")


@declare(
    "reduction.dynamic_init_static",
    statement="dynamic HC at init equals its static part: x-independent weights e_(k mod n), 1, I",
    theorems=("dynamic.init_equals_static",), requires=(kinds("hc-dynamic"), PROBING),
    tolerance=rules.LAW, examples=_init_examples, cases=INIT_CASES, prerequisites=BASE)
def check_dynamic_init(ctx: Context, case: Case) -> None:
    """Dynamic HC at init equals its static part: the weights do not depend on x and equal
    the HC Eq. 14 init."""
    _check_init_weights(ctx, case, "dynamic init")


@declare(
    "reduction.init_prenorm_stack",
    statement="reduce(fresh HC stack(expand(h))) = n·(pre-norm residual stack) (sum reduce)",
    theorems=("init.static_prenorm",),
    requires=(HC, capability(EXPAND), capability(REDUCE)), tolerance=rules.IDENTITY,
    examples=_init_examples,
    cases=Cases(d_more_than_n=True, at_init=True, branches=SMOOTH_BRANCHES),
    prerequisites=(*BASE, "conventions.expand_replicates", "conventions.reduce_scale"))
def check_prenorm_stack(ctx: Context, case: Case) -> None:
    """reduce(stack of L fresh connections (expand(h))) equals s·h_L of the pre-norm residual
    stack h_{k+1} = h_k + F_k(h_k), s = n (sum) or 1 (mean). In bfloat16/float16 the oracle
    is the same stack along the run's dtype chain — ``h`` rounded to the output, each layer
    the closed form with its static init (:class:`hcspec.conformance.machinery.precision.
    SpecAtPrecision`), the declared reduction in the compute dtype rounded again — against
    float64 (the identity rule's 8 × that error), not 256·eps × L."""
    layers = 2 + case.layer_index % 5
    h = strategies.gaussian((case.batch, case.tokens, case.d), case.seed,
                            salts.STACK_INPUT.at(), ctx.dtype, ctx.device, std=case.scale)
    first = ctx.build.make(case, layer_index=0, perturb=False)
    expanded = ctx.observe.expand(first, h)
    ctx.record.require(isinstance(expanded, torch.Tensor),
                       f"expand(h) returned {type(expanded).__name__}, expected a tensor")
    assert isinstance(expanded, torch.Tensor)
    x = expanded
    h_ref = f64(h)
    for k in range(layers):
        impl = first if k == 0 else ctx.build.make(case, layer_index=k, perturb=False)
        seed = case.seed + LAYER_SEED_STRIDE * k
        fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=seed)
        # the output (in a declared output dtype) is the next layer's input, in the working dtype
        x = probes.forward_on_copy(impl, x, strategies.CountingBranch(fn, record=False))
        x = x.to(ctx.dtype) if isinstance(x, torch.Tensor) else x
        fn64 = strategies.make_branch(case.branch, case.d, torch.float64, seed=seed)
        h_ref = h_ref + fn64(ctx.observe.branch_input(h_ref))
    out = ctx.observe.reduce(first, x)
    ctx.record.require(isinstance(out, torch.Tensor),
                       f"reduce(x) returned {type(out).__name__}, expected a tensor")
    assert isinstance(out, torch.Tensor)
    factor = case.n if ctx.conventions.reduce == "sum" else 1

    def oracle() -> float:
        state = f64(h).to(ctx.precision.output).to(ctx.dtype).unsqueeze(-2).expand(
            case.batch, case.tokens, case.n, case.d)
        for k in range(layers):
            h_pre, h_post, H_res = (w.expand(case.batch, case.tokens, *w.shape)
                                    for w in _static_init(case, k))
            seed = case.seed + LAYER_SEED_STRIDE * k
            fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=seed)
            spec = precision.spec_at_precision(ctx, h_pre, h_post, H_res)
            state = spec.forward(state.to(ctx.device), fn).to(ctx.dtype)
        compute = ctx.conventions.compute_dtype or ctx.dtype
        low = state.to("cpu", compute)
        reduced = low.sum(-2) if ctx.conventions.reduce == "sum" else low.mean(-2)
        return metrics.scaled_error(f64(reduced.to(ctx.precision.output)), factor * h_ref)

    ctx.record.expect(f"reduce(HC stack of {layers} fresh layers) vs {factor}·(pre-norm residual)",
                      metrics.scaled_error(out, factor * h_ref), factor=layers,
                      oracle=precision.oracle(ctx, oracle))
