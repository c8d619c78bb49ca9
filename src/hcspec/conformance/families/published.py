"""Published family: does the target compute the published network from the published weights?

A target that declares ``conventions.published`` (``"deepseek-v4"``, ``"mhc-paper"``,
``"hc-static"``, ``"hc-dynamic"``) offers ``published_parameters()``: the tensors of that
layout read from its own state (the layouts of :mod:`hcspec.formulas.published`, which the
reference uses too). The kit computes the published step of exactly those tensors in
float64 (the oracle, the case's branch in float64) and compares:

* ``published.step``: the target's output with the oracle's, within the law's tolerance of the
  run's effective dtype; below float32 the same-precision floor, 8 × the error the published
  step itself makes when computed in the target's compute dtype and rounded to its output
  dtype (:mod:`.precision`). On a DeepSeek-V4 mismatch the failure names the divergence
  (:func:`hcspec.conformance.machinery.published_divergence.search`, with the kit's
  divergence search over step records,
  :func:`hcspec.conformance.machinery.divergence.nearest`): orientation, σ vs 2σ, the
  Sinkhorn start, eps placement, the rounds, a scale on the wrong block, the norm after the
  projection. Where the layout has additive-eps gates (DeepSeek-V4, the mHC paper) and the
  target reports its weights and offers ``load_published``, the step also compares ``h_pre``
  and ``h_post`` at saturated gate logits (:func:`saturated`) relative to their own magnitude:
  the only place a dropped or misplaced gate eps (1e-6) shows.
* ``published.gradients``: ``∂⟨G, X'⟩/∂X`` and the gradients w.r.t. the target's parameters
  with the oracle's gradients w.r.t. the published tensors pulled back through
  ``published_parameters()`` (a published tensor may be a view of a parameter).
* ``published.load_roundtrip``: tensors set through the target's own ``load_published`` into a
  differently initialised impl give the same step, and read back unchanged.

The check is against the *published* function, not against the target's own declarations or
reported weights: a target that is a valid mHC on its own terms but computes another network
from a checkpoint's tensors fails here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from hcspec.conformance.author import (
    DIFFERENTIABLE,
    LOAD_PUBLISHED,
    PUBLISHED_PARAMETERS,
    STACK,
    Case,
    Cases,
    Context,
    HyperConnectionImpl,
    Inconclusive,
    NotApplicable,
    PropertyFailure,
    Requirement,
    branch64,
    capability,
    declare,
    f64,
    floating_parameters,
    has_stack,
    metrics,
    precision,
    rules,
    salts,
    shift,
    size_rows,
    strategies,
)
from hcspec.conformance.machinery import divergence
from hcspec.conformance.machinery.published_divergence import message, search
from hcspec.conformance.machinery.published_step import (
    Params,
    cast_params,
    checkpoint_of,
    oracle,
    read,
    scale_of,
    step_allowance,
    step_oracle,
)
from hcspec.conformance.machinery.saturated_gates import expect_saturated_gates
from hcspec.formulas import published as pub
from hcspec.spec.published import (
    DEEPSEEK_V4,
)
from hcspec.spec.record import Formula

BASE = ("shape.output", "shape.branch_once")
DECLARES = Requirement(
    "conventions.published declared",
    "applies to a target that declares a published parameterization (conventions.published)",
    lambda s: s.conventions.published is not None)
REQUIRES = (DECLARES, capability(PUBLISHED_PARAMETERS))
CASES = Cases(perturbations=(0.3, 1.0), extreme_scales=False, oracle=True)
"""Parameters perturbed away from the init (at init hc_scale = 1 and symmetric logits hide a
scale on the wrong block and the orientation)."""


def _examples(ctx: Context) -> list[Case]:
    return shift(ctx, [Case(2, 3, 4, 8, seed=0, perturb=0.5),
                       Case(1, 2, 2, 5, seed=1, perturb=1.0, layer_index=1),
                       Case(2, 2, 3, 6, seed=2, perturb=0.3, layer_index=2)]) + size_rows(
        ctx, Case(2, 2, 4, 8, seed=3, perturb=0.5, layer_index=3))


DIAGNOSIS_CASE = Case(2, 3, 4, 8, seed=0, perturb=0.5)
"""The case the divergence is also named on when a smaller case fails (a shrunk case with
n = 1 cannot show the orientation or the Sinkhorn start)."""


def _search(ctx: Context, case: Case, params: Params, x: torch.Tensor, got: torch.Tensor,
            scale: float, tol: float) -> str:
    def error_of(formula: Formula) -> float:
        return divergence.output_error(got, oracle(ctx, case, params, x, formula), scale)

    published = pub.mhc_layout("deepseek-v4").formula(params)
    return message(search(error_of, tol, published), published)


def _diagnosis(ctx: Context, case: Case, params: Params, x: torch.Tensor, got: torch.Tensor,
               scale: float, tol: float) -> str:
    """The published variant the failing output matches (DeepSeek-V4), also on
    :data:`DIAGNOSIS_CASE` when the failing case is smaller."""
    name = str(ctx.conventions.published)
    if name != "deepseek-v4":
        return f"published {name}: {pub.layout(name).source}"
    message = _search(ctx, case, params, x, got, scale, tol)
    big = dataclasses.replace(DIAGNOSIS_CASE, seed=case.seed)
    if case.n >= big.n and case.d >= big.d:
        return message
    impl = ctx.build.make(big)
    x_big = ctx.inputs.state(big)
    p_big = read(ctx, impl)
    with torch.no_grad():
        got_big = f64(ctx.observe.forward(impl, x_big, ctx.inputs.branch(big)))
    want = oracle(ctx, big, p_big, x_big)
    scale_big = scale_of(x_big, want)
    tol_big = step_allowance(ctx, big, p_big, x_big, want, scale_big)
    if metrics.scaled_error(got_big, want, scale_big) <= tol_big:
        return message
    return (f"{message}; at n = {big.n}, d = {big.d}: "
            f"{_search(ctx, big, p_big, x_big, got_big, scale_big, tol_big)}")


@declare(
    "published.step",
    statement="X' is the float64 published step of the target's own published_parameters()",
    theorems=("published.deepseek_v4_step", "published.mhc_paper_step",
              "published.hc_static_step", "published.hc_dynamic_step",
              "published.qwen4_exp_step"),
    requires=REQUIRES, tolerance=rules.LAW, cases=CASES, examples=_examples,
    prerequisites=BASE)
def check_step(ctx: Context, case: Case) -> None:
    """The output equals the float64 oracle of the declared layout on the tensors
    ``published_parameters()`` returns, under the law rule with :func:`step_oracle`; on a
    DeepSeek-V4 mismatch the failure names the published variant the output matches. Then
    the gates at saturated logits
    (:func:`hcspec.conformance.machinery.saturated_gates.expect_saturated_gates`)."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    params = read(ctx, impl)
    with torch.no_grad():
        got = f64(ctx.observe.forward(impl, x, ctx.inputs.branch(case)))
    want = oracle(ctx, case, params, x)
    scale = scale_of(x, want)
    measured = step_oracle(ctx, case, params, x, want, scale)
    tol = ctx.record.allowance(oracle=measured).allowance
    error = metrics.scaled_error(got, want, scale)
    detail = _diagnosis(ctx, case, params, x, got, scale, tol) if not error <= tol else ""
    ctx.record.expect(f"X' vs the float64 published {ctx.conventions.published} step of "
                      "published_parameters()", error, detail=detail, oracle=measured)
    expect_saturated_gates(ctx, case, params, x)


def _gradient_oracle(ctx: Context, reference_error: float) -> float | None:
    """The ``oracle`` input of :data:`hcspec.conformance.rules.LAW` for a gradient comparison:
    below float32 the oracle's own gradient error in the compute dtype, else None."""
    return precision.oracle(ctx, lambda: reference_error)


def _oracle_gradients(ctx: Context, case: Case, params: Params, x: torch.Tensor,
                      G: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, Params]:
    """``(∂L/∂X, {name: ∂L/∂P_name})`` of ``L = ⟨G, X'⟩`` for the published step computed
    in ``dtype`` (float64 for the oracle), CPU."""
    name = ctx.conventions.published
    assert name is not None
    leaves = cast_params(params, dtype, leaves=True)
    x_leaf = f64(x).to(dtype).requires_grad_(True)
    tensors = {k: v for k, v in leaves.items() if isinstance(v, torch.Tensor)}
    branch = branch64(ctx, case)

    def in_dtype(agg: torch.Tensor) -> torch.Tensor:
        return branch(ctx.observe.branch_input(agg.double())).to(dtype)

    with torch.enable_grad():
        out = pub.step(name, leaves, x_leaf, in_dtype)
        grads = torch.autograd.grad((out * G.to(dtype)).sum(),
                                    [x_leaf, *tensors.values()], allow_unused=True)
    by_name: Params = {k: (g if g is not None else torch.zeros_like(t))
                       for (k, t), g in zip(tensors.items(), grads[1:], strict=True)}
    assert grads[0] is not None
    return grads[0].double(), by_name


def _pull_back(impl: HyperConnectionImpl, grads: Params,
               theta: list[torch.Tensor]) -> list[torch.Tensor]:
    """The gradients w.r.t. the parameters ``theta`` that the published tensors' gradients
    ``grads`` give through ``published_parameters()`` (a vector–Jacobian product of that map:
    the identity for a tensor that is itself a parameter)."""
    with torch.enable_grad():
        views = getattr(impl, PUBLISHED_PARAMETERS)()
        total = sum((views[k] * g.to(dtype=views[k].dtype, device=views[k].device)).sum()
                    for k, g in grads.items() if isinstance(g, torch.Tensor)
                    and isinstance(views[k], torch.Tensor) and views[k].requires_grad)
        if not isinstance(total, torch.Tensor):
            return [torch.zeros_like(p) for p in theta]
        pulled = torch.autograd.grad(total, theta, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(theta, pulled, strict=True)]


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    return metrics.scaled_error(f64(got), f64(want), float(f64(want).abs().max()))


@declare(
    "published.gradients",
    statement="∂⟨G, X'⟩/∂X and the published tensors' gradients are the float64 published step's",
    theorems=("published.deepseek_v4_step",), requires=(DIFFERENTIABLE, *REQUIRES),
    tolerance=rules.LAW, cases=CASES, examples=_examples,
    prerequisites=(*BASE, "published.step"), explore=False)
def check_gradients(ctx: Context, case: Case) -> None:
    """Autograd through the target against autograd through the float64 oracle: the input's
    gradient directly, the parameters' through :func:`_pull_back` (relative to the largest
    entry); below float32 within the same-precision floor of the oracle's own gradient error
    in the compute dtype with ``G`` rounded to the output dtype."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    params = read(ctx, impl)
    theta = floating_parameters(impl, trainable=True)
    G = strategies.gaussian(tuple(x.shape), case.seed, salts.UPSTREAM_GRADIENT.at(),
                            torch.float64)
    leaf = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        out = ctx.observe.forward(impl, leaf, ctx.inputs.branch(case), copy=False)
        got = torch.autograd.grad((out * G.to(device=out.device, dtype=out.dtype)).sum(),
                                  [leaf, *theta], allow_unused=True)
    want_x, want_p = _oracle_gradients(ctx, case, params, x, G, torch.float64)
    want_theta = _pull_back(impl, want_p, theta)
    compute = ctx.conventions.compute_dtype or ctx.dtype
    rounded = G.to(ctx.precision.output).double()
    ref_x, ref_p = _oracle_gradients(ctx, case, params, x, rounded, compute)
    ref_theta = _pull_back(impl, ref_p, theta)
    got_x = torch.zeros_like(leaf) if got[0] is None else got[0]
    ctx.record.expect("∂⟨G, X'⟩/∂X vs the published step's", _relative(got_x, want_x),
                      oracle=_gradient_oracle(ctx, _relative(ref_x, want_x)))
    names = _names(params)
    for i, (p, g, w, r) in enumerate(zip(theta, got[1:], want_theta, ref_theta, strict=True)):
        g = torch.zeros_like(w) if g is None else g
        what = names.get(id(p), f"parameter {i}, shape {list(w.shape)}")
        ctx.record.expect(f"∂⟨G, X'⟩/∂({what}) vs the published step's, pulled back through "
                          "published_parameters()",
                          _relative(g, w), oracle=_gradient_oracle(ctx, _relative(r, w)))


def _names(params: Params) -> dict[int, str]:
    """id of a parameter -> the published tensor that is it (or a view of it), for messages."""
    out: dict[int, str] = {}
    for key, value in params.items():
        if isinstance(value, torch.Tensor):
            out[id(value)] = key
            if value._base is not None:
                out.setdefault(id(value._base), key)
    return out


def _differ(got: object, want: torch.Tensor) -> float:
    """Max ``|got − want|`` with ``want`` rounded to ``got``'s dtype (inf: not a tensor)."""
    if not isinstance(got, torch.Tensor):
        return float("inf")
    return float((f64(got) - f64(want.to(got.dtype))).abs().max())


@declare(
    "published.load_roundtrip",
    statement="tensors set through load_published read back unchanged and give the same step",
    theorems=("published.deepseek_v4_step",),
    requires=(*REQUIRES, capability(LOAD_PUBLISHED)), tolerance=rules.SELF_CONSISTENCY,
    secondary=(rules.EXACT,), cases=CASES, examples=_examples,
    prerequisites=(*BASE, "published.step"), explore=False)
def check_load_roundtrip(ctx: Context, case: Case) -> None:
    """Impl A (the case) and impl B (another seed, so other values) ; B loads A's published
    tensors through ``load_published``; B's ``published_parameters()`` must equal them
    exactly (in B's dtype) and B's step A's, within the target's self-consistency tolerance."""
    source = ctx.build.make(case)
    other = ctx.build.make(dataclasses.replace(case, seed=case.seed + 7919))
    x = ctx.inputs.state(case)
    params = cast_params(read(ctx, source), torch.float64)
    with torch.no_grad():
        want = f64(ctx.observe.forward(source, x, ctx.inputs.branch(case)))
        before = f64(ctx.observe.forward(other, x, ctx.inputs.branch(case)))
    if metrics.scaled_error(before, want) <= ctx.record.allowance().allowance:
        raise Inconclusive("the second impl (another seed) already gives the same step, so "
                           "loading cannot show anything")
    loader: Callable[[Params], None] = getattr(other, LOAD_PUBLISHED)
    loader({k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in params.items()})
    back = read(ctx, other)
    worst = max(_differ(back[k], v) for k, v in params.items() if isinstance(v, torch.Tensor))
    ctx.record.expect("published_parameters() after load_published vs the loaded tensors",
                      worst, rule=rules.EXACT)
    with torch.no_grad():
        got = f64(ctx.observe.forward(other, x, ctx.inputs.branch(case)))
    ctx.record.expect("X' after load_published vs the source impl's X'",
                      metrics.scaled_error(got, want))


STACK_SUBLAYERS = 4
"""Sublayers of the checkpoint stack: two DeepSeek-V4 layers, each an attention and an FFN
site (``layers.{0,1}.hc_{attn,ffn}_*``)."""
DEEPSEEK_V4_DECLARED = Requirement(
    "conventions.published = deepseek-v4",
    "applies to a target that declares DeepSeek-V4's published layout (checkpoint key names "
    "layers.{i}.hc_{attn,ffn}_*)",
    lambda s: s.conventions.published == DEEPSEEK_V4)


@declare(
    "published.stack_checkpoint",
    statement="sublayers loaded from a DeepSeek-V4 checkpoint by the stack's loader chain the "
              "published steps",
    theorems=("published.deepseek_v4_step",),
    requires=(DEEPSEEK_V4_DECLARED, capability(PUBLISHED_PARAMETERS), capability(STACK)),
    tolerance=rules.LAW, cases=CASES, examples=_examples,
    prerequisites=(*BASE, "published.step"), explore=False)
def check_stack_checkpoint(ctx: Context, case: Case) -> None:
    """A checkpoint of :data:`STACK_SUBLAYERS` sublayers under DeepSeek-V4's key names (the
    tensors of impls built for layer indices ``layer_index + k``, seeds ``seed + k``, perturbed
    as the case says: distinct per site) is loaded through the target's own stack loader
    (``stack(L).load_published(checkpoint)``) into a stack built from another seed; its output
    must equal the float64 published step applied site by site — sublayer ``k`` with the
    tensors of ``layers.{k // 2}.hc_{attn|ffn}_*`` and the case's branch drawn with seed
    ``seed + k`` — within the law's budget times the number of sublayers. A loader that mixes
    up sites (attention ↔ FFN, one layer for another) computes another network.

    Raises:
        NotApplicable: the stack offers no ``load_published(checkpoint)``.
    """
    layers = STACK_SUBLAYERS
    sources = [read(ctx, ctx.build.make(dataclasses.replace(
        case, layer_index=case.layer_index + k, seed=case.seed + k))) for k in range(layers)]
    target = ctx.build.make(dataclasses.replace(case, seed=case.seed + 7919), perturb=False)
    if not has_stack(target):  # the capability was decided on the sample impl
        raise PropertyFailure("the impl built for the case has no stack(layers)")
    stack: Any = target.stack(layers)
    loader = getattr(stack, LOAD_PUBLISHED, None)
    if not callable(loader):
        raise NotApplicable("the target's stack(L) offers no load_published(checkpoint) "
                            "loading DeepSeek-V4's layers.{i}.hc_{attn,ffn}_* keys")
    loader(checkpoint_of(sources))
    x = ctx.inputs.state(case)
    branches = [strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device,
                                       seed=case.seed + k) for k in range(layers)]
    with torch.no_grad():
        got = f64(stack.forward(x.clone(), branches))
    want = f64(x)
    scale = float(want.abs().max())
    for k, params in enumerate(sources):
        site = dataclasses.replace(case, seed=case.seed + k)
        want = oracle(ctx, site, params, want)
        scale = max(scale, float(want.abs().max()))
    ctx.record.expect(f"X_L of {layers} sublayers loaded from a DeepSeek-V4 checkpoint "
                      "(layers.{i}.hc_{attn,ffn}_*) vs the published steps chained site by site",
                      metrics.scaled_error(got, want, scale), factor=layers,
                      hint="the loader maps a checkpoint key to the wrong sublayer (attention ↔ "
                           "FFN, or another layer's)?")
