"""Stack family: L consecutive sublayers run by the implementation itself, with its own carried
state (the optional ``stack`` capability, :class:`hcspec.conformance.protocol.Stack`).

DeepSeek-V4.1's "single-pass" mHC computes the next sublayer's coefficients and pre-mix at the
end of the current sublayer, from the state it has just written, and carries them; only a stack
can show whether what is carried is right. The family checks, for every sublayer of a stack of
:data:`LAYERS` (the report names the sublayer that fails):

* ``stack.unrolled_weights``: from the replicated input ``X₀ = 1_n h₀ᵀ``, each sublayer's branch
  input and the output stream sum ``1ᵀX_L`` equal the unrolled connection weights of the
  coefficients the stack reports, ``Σ_j w_{j,k} z_j + w_{0,k} h₀`` (spec
  ``unroll.connection_weights``, evaluated by :func:`hcspec.spec.numeric.connection_weights`);
* ``stack.stream_sum_preserved`` (mHC): with F ≡ 0, ``1ᵀX_k = 1ᵀX_0`` after every prefix of the
  stack, within the accumulated Sinkhorn–Knopp allowance of the reported ``H_res``
  (:func:`hcspec.conformance.machinery.layer_bounds.mhc_bounds`; spec ``ds.stream_sum_preserved``,
  ``ds.product_closure``);
* ``stack.carried_matches_recomputed``: the coefficients the stack used for sublayer k equal
  their recomputation under the carry design the stack declares (``Stack.pre_mix_from``,
  :func:`hcspec.conformance.protocol.stack_pre_mix`) — by default ``sublayer(k).weights`` on
  the state entering sublayer k, with the output equal to chaining ``sublayer(k).forward``;
  for DeepSeek-V4.1's ``"previous_input"`` design, ``h_pre`` of sublayer k is sublayer
  k − 1's on the state entering k − 1 (the declared ``initial_pre_mix`` for sublayer 0), with
  the output equal to the spec's closed form chained with those coefficients;
* ``stack.fd_gradients``: finite differences through the stack agree with autograd w.r.t. the
  input and each sublayer's parameters (:mod:`hcspec.conformance.machinery.finite_differences`).

Parameters: the stack is built from an unperturbed impl and then perturbed as the case says
through ``stack.parameters()`` (every sublayer's), or through the impl's own when the stack does
not expose them. Branch of sublayer k: the case's branch drawn with seed ``case.seed + k``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, cast

import torch

from hcspec.conformance.author import (
    DIFFERENTIABLE,
    SMOOTH_BRANCHES,
    STACK,
    Case,
    Cases,
    CheckedBranch,
    Context,
    HyperConnectionImpl,
    NotApplicable,
    PropertyFailure,
    Stack,
    Weights,
    any_state_domain,
    capability,
    declare,
    f64,
    float64,
    floating_parameters,
    has_stack_sublayer,
    has_stack_weights,
    has_weights,
    kinds,
    metrics,
    np64,
    precision,
    rules,
    salts,
    shift,
    stack_pre_mix,
    strategies,
)
from hcspec.conformance.machinery.finite_differences import expect_directional, fd_denominator
from hcspec.conformance.machinery.layer_bounds import mhc_bounds
from hcspec.conformance.machinery.sinkhorn_variant import UNROLLED
from hcspec.conformance.machinery.stacking import (
    LAYERS,
    RecordingBranch,
    branch_fns,
    branches,
    build_stack,
    combination,
    replayed_layers,
    run_forward,
    run_weights,
    sublayer_of,
    unrolled,
)
from hcspec.spec import numeric

BASE = ("shape.output", "shape.branch_once")
NAMES: Final = ("h_pre", "h_post", "H_res")
SUBLAYER_DOMAIN = any_state_domain(
    "sublayer(k) is fed the state entering sublayer k, which is not stream-replicated")


def _examples(ctx: Context, branch: str = "mlp") -> list[Case]:
    """Perturbed and at-init cases at several layer indices; as many as the profile's
    hypothesis budget allows, at least two (the family does not explore)."""
    cases = [Case(2, 3, 4, 8, layer_index=0, seed=0, perturb=0.3, branch=branch),
             Case(1, 2, 3, 5, layer_index=2, seed=1, perturb=1.0, branch=branch),
             Case(2, 2, 2, 6, layer_index=5, seed=2, scale=10.0, perturb=0.1, branch=branch),
             Case(1, 3, 4, 7, layer_index=1, seed=3, perturb=0.0, branch=branch)]
    return shift(ctx, cases[:max(2, min(len(cases), ctx.profile.max_examples))])


def _zero_examples(ctx: Context) -> list[Case]:
    return _examples(ctx, branch="zero")


@declare(
    "stack.unrolled_weights",
    statement="sublayer inputs and X_L equal the unrolled connection weights of the reported "
              "coefficients",
    theorems=("unroll.connection_weights",), requires=(capability(STACK),), tolerance=rules.LAW,
    examples=_examples, explore=False, prerequisites=BASE)
def check_unrolled_weights(ctx: Context, case: Case) -> None:
    """From ``X₀ = 1_n h₀ᵀ``: sublayer k's branch input (under the declared branch input) is
    ``Σ_{j<k} w_{j,k} z_j + w_{0,k} h₀``, ``1ᵀX_L`` is the output node's, and each stream i of
    ``X_L`` is the read of one more node with ``h_pre = e_i``, with ``w`` the spec's unrolled
    weights (``unroll.connection_weights``) of the reported coefficients. Below float32 each
    comparison's oracle is the same comparison made on the stack's closed form along the
    run's dtype chain with the reported coefficients (:func:`_spec_stack`), so the allowance
    is the law's 8 × that floor, not 256·eps (2.0 in bfloat16)."""
    stack = build_stack(ctx, case)
    h0 = ctx.inputs.state(case)[..., 0, :]
    x0 = h0.unsqueeze(-2).expand(case.batch, case.tokens, case.n, case.d).contiguous()
    with torch.no_grad():
        used = run_weights(ctx, stack, x0, branches(ctx, case))
        bs = branches(ctx, case)
        out = f64(run_forward(ctx, stack, x0, bs))
    errors = _unrolled_errors(ctx, used, f64(h0), bs, out)
    oracles: list[float | None] = [None] * len(errors)
    if precision.low_precision(ctx):
        with torch.no_grad():
            oracles = [e for _, e in _unrolled_errors(ctx, used, f64(h0), *_spec_stack(
                ctx, case, used, x0))]
    for (label, error), oracle in zip(errors, oracles, strict=True):
        ctx.record.expect(label, error, oracle=oracle)


def _unrolled_errors(ctx: Context, used: Sequence[Weights], h0: torch.Tensor,
                     bs: Sequence[RecordingBranch], out: torch.Tensor,
                     ) -> list[tuple[str, float]]:
    """``[(label, scaled error)]`` of :func:`check_unrolled_weights`: each sublayer's branch
    input (recorded by ``bs``), the stream sum of ``out [B, T, n, d]`` and each of its
    streams against the unrolled weights of ``used`` over the nodes ``h0 [B, T, d]`` (float64)
    and the branches' outputs."""
    nodes = [h0] + [b.outputs[0] for b in bs]  # node 0: h₀; node j ≥ 1: z_j
    reads = [b.inputs[0] for b in bs] + [out.sum(dim=-2)]
    C = unrolled(used)
    errors = []
    for k in range(1, LAYERS + 2):
        want, scale = combination(C[..., k, :], nodes, k)
        if k <= LAYERS:
            want = ctx.observe.branch_input(want)
            label = f"sublayer {k - 1}'s branch input (node {k})"
        else:
            label = f"the stream sum 1ᵀX_L after {LAYERS} sublayers (node {k})"
        errors.append((f"{label} vs Σ_j w_(j,{k}) z_j + w_(0,{k}) h₀ (unrolled weights of the "
                       "reported coefficients)",
                       metrics.scaled_error(f64(reads[k - 1]), want, scale)))
    for i in range(out.shape[-2]):  # stream i of X_L: the read of a node L + 1, h_pre = e_i
        C = unrolled(used, read=i)
        want, scale = combination(C[..., LAYERS + 1, :], nodes, LAYERS + 1)
        errors.append((f"stream {i} of X_L after {LAYERS} sublayers vs its unrolled weights",
                       metrics.scaled_error(out[..., i, :], want, scale)))
    return errors


def _spec_stack(ctx: Context, case: Case, used: Sequence[Weights], x0: torch.Tensor,
                ) -> tuple[list[RecordingBranch], torch.Tensor]:
    """The stack's closed form along the run's dtype chain with the reported coefficients
    ``used``: ``x0 [B, T, n, d]`` rounded to the effective dtype, then each sublayer
    :class:`hcspec.conformance.machinery.precision.SpecAtPrecision` (the compute dtype,
    the branch input and the output rounded to the effective dtype) with the case's
    branches; returns its recording branches and float64 output (what a correct stack of
    that precision gives: the ``oracle`` of :func:`check_unrolled_weights`)."""
    state = x0.to(ctx.precision.output).to(ctx.dtype)
    bs = branches(ctx, case)
    for k, weights in enumerate(used):
        state = precision.spec_at_precision(ctx, *weights).forward(state, bs[k])
    return bs, f64(state)


@declare(
    "stack.stream_sum_preserved",
    statement="mHC, F ≡ 0: 1ᵀX_k = 1ᵀX_0 after every prefix of the stack",
    theorems=("ds.stream_sum_preserved", "ds.product_closure"),
    requires=(kinds("mhc"), capability(STACK)), tolerance=rules.DEPTH_BOUND,
    examples=_zero_examples, explore=False, prerequisites=BASE)
def check_stream_sum_preserved(ctx: Context, case: Case) -> None:
    """For each depth k = 1 … L, a stack of k sublayers with zero branches keeps the stream sum
    within the column allowance accumulated from its reported ``H_res``
    (:func:`~hcspec.conformance.machinery.layer_bounds.mhc_bounds`)."""
    x = ctx.inputs.state(case)
    for depth in range(1, LAYERS + 1):
        stack = build_stack(ctx, case, depth)
        zero = [CheckedBranch(strategies.make_branch("zero", case.d, ctx.dtype, ctx.device),
                              case.d, record=False) for _ in range(depth)]
        with torch.no_grad():
            used = run_weights(ctx, stack, x, [CheckedBranch(b.fn, case.d, record=False)
                                               for b in zero])
            out = run_forward(ctx, stack, x, zero)
        bound, _ = mhc_bounds(ctx, replayed_layers(x, used))
        drift = (f64(out).sum(dim=-2) - f64(x).sum(dim=-2)).abs()
        worst = int(torch.argmax((drift / bound).flatten()))
        columns = ", ".join(
            f"{k}: {float((f64(w[2]).sum(dim=-2) - 1).abs().max()):.2g}"
            for k, w in enumerate(used))
        ctx.record.expect(f"|1ᵀX_k − 1ᵀX_0| after sublayers 0 … {depth - 1} (F ≡ 0)",
                          float(drift.flatten()[worst]),
                          detail=f"max |1ᵀH_res − 1ᵀ| of each sublayer's reported H_res: "
                                 f"{columns}", bound=float(bound.flatten()[worst]))


@declare(
    "stack.carried_matches_recomputed",
    statement="carried coefficients equal their recomputation under the declared carry design; "
              "X_L the chain",
    requires=(capability(STACK), SUBLAYER_DOMAIN), tolerance=rules.SELF_CONSISTENCY,
    examples=_examples, explore=False, prerequisites=BASE)
def check_carried_matches_recomputed(ctx: Context, case: Case) -> None:
    """Sublayer by sublayer, from the case's state, under the carry design the stack declares
    (:func:`hcspec.conformance.protocol.stack_pre_mix`):

    * ``"own_input"`` (default): the stack's reported coefficients of sublayer k against
      ``sublayer(k).weights(Y_k)`` with ``Y_{k+1} = sublayer(k).forward(Y_k)`` (each computes
      its own, nothing carried), then the stack's ``X_L`` against ``Y_L``;
    * ``"previous_input"``: the expected ``h_pre`` of sublayer k is the declared
      ``initial_pre_mix`` (k = 0) or ``sublayer(k − 1).weights(Y_{k−1}).h_pre`` (k ≥ 1), its
      ``h_post`` and ``H_res`` are ``sublayer(k).weights(Y_k)``'s; ``Y_{k+1}`` is the spec's
      closed form with those coefficients (``sublayer(k).forward`` reads with its own pre, so
      it cannot be chained); not applicable when the sublayers offer no ``weights``.

    Raises:
        PropertyFailure: an invalid declaration, or a mismatch (the label names the sublayer).
        NotApplicable: no ``sublayer(k)``, or ``"previous_input"`` without sublayer weights.
    """
    stack = build_stack(ctx, case)
    if not has_stack_sublayer(stack):
        raise NotApplicable("the stack offers no sublayer(k): nothing to recompute with")
    try:
        design, initial = stack_pre_mix(stack)
    except ValueError as exc:
        raise PropertyFailure(str(exc)) from exc
    x = ctx.inputs.state(case)
    with torch.no_grad():
        out = run_forward(ctx, stack, x, branches(ctx, case))
        used = run_weights(ctx, stack, x, branches(ctx, case)) if has_stack_weights(
            stack) else None
        if design == "previous_input":
            assert initial is not None
            Y = _previous_input_chain(ctx, case, stack, x, initial, used)
            compared = used is not None
            chain = "composing the recomputed coefficients (h_pre from the previous sublayer)"
        else:
            Y, compared = _own_input_chain(ctx, case, stack, x, used)
            chain = "chaining sublayer(k).forward"
    note = "" if compared else (" (coefficients not compared: the stack or its sublayers "
                                "offer no weights)")
    ctx.record.expect(f"the stack's X_L vs {chain}, k = 0 … {LAYERS - 1}" + note,
                      metrics.scaled_error(out, Y))


def _compare(ctx: Context, k: int, used: Weights, expected: Sequence[torch.Tensor],
             whence: Sequence[str]) -> None:
    """Record the stack's reported coefficients of sublayer k against the expected ones."""
    for name, carried, recomputed, source in zip(NAMES, used, expected, whence, strict=True):
        ctx.record.expect(f"sublayer {k}: the stack's {name} vs {source}",
                          metrics.scaled_error(carried, recomputed))


def _own_input_chain(ctx: Context, case: Case, stack: Stack, x: torch.Tensor,
                     used: list[Weights] | None) -> tuple[torch.Tensor, bool]:
    """``(Y_L, whether coefficients were compared)``: ``Y_{k+1} = sublayer(k).forward(Y_k)``,
    comparing the reported coefficients with ``sublayer(k).weights(Y_k)`` where both exist."""
    Y, compared = x, False
    for k, branch in enumerate(branches(ctx, case)):
        sub = sublayer_of(stack, k)
        if used is not None and has_weights(sub):
            mine = ctx.observe.weights(cast(HyperConnectionImpl, sub), Y)
            _compare(ctx, k, used[k], mine,
                     [f"sublayer({k}).weights on the state entering it"] * 3)
            compared = True
        Y = ctx.observe.forward(sub, Y, branch).to(ctx.dtype)
    return Y, compared


def _previous_input_chain(ctx: Context, case: Case, stack: Stack, x: torch.Tensor,
                          initial: torch.Tensor, used: list[Weights] | None) -> torch.Tensor:
    """``Y_L`` of DeepSeek-V4.1's single pass recomputed from the sublayers alone:
    ``Y_{k+1} = H_res,k Y_k + h_post,k F_k(p_kᵀ Y_k)ᵀ`` (spec closed form, float64, the state
    kept in ``x``'s dtype) with ``(·, h_post,k, H_res,k) = sublayer(k).weights(Y_k)``, ``p_0`` the
    declared ``initial_pre_mix`` and ``p_k = sublayer(k − 1).weights(Y_{k−1}).h_pre``;
    compares the reported coefficients with ``(p_k, h_post,k, H_res,k)`` when ``used`` is
    given.

    Raises:
        NotApplicable: a sublayer offers no ``weights(x)``.
    """
    subs = [sublayer_of(stack, k) for k in range(LAYERS)]
    if not all(has_weights(sub) for sub in subs):
        raise NotApplicable("the stack declares pre_mix_from = 'previous_input' and its "
                            "sublayers offer no weights(x): the carried pre-mix cannot be "
                            "recomputed, nor the chain composed (sublayer(k).forward reads with "
                            "its own pre-mix)")
    Y, carried = x, f64(initial).expand(*x.shape[:2], case.n)
    source = "the declared initial_pre_mix"
    for k, (sub, branch) in enumerate(zip(subs, branches(ctx, case), strict=True)):
        own_pre, h_post, H_res = (f64(w) for w in ctx.observe.weights(sub, Y))
        if used is not None:
            _compare(ctx, k, used[k], (carried, h_post, H_res),
                     (source, f"sublayer({k}).weights on the state entering it",
                      f"sublayer({k}).weights on the state entering it"))
        x_in = torch.from_numpy(numeric.aggregate(np64(Y), np64(carried)))
        z = branch(ctx.observe.branch_input(x_in).to(device=x.device, dtype=x.dtype))
        Y = torch.from_numpy(numeric.forward(np64(Y), np64(h_post), np64(H_res), np64(z))).to(
            device=x.device, dtype=x.dtype)
        carried = own_pre
        source = f"sublayer({k}).weights(…).h_pre on the state entering sublayer {k}"
    return Y


FLOAT64 = float64("finite differences through the stack run in float64")


def _parameter_groups(stack: Stack, params: list[torch.Tensor]) -> list[tuple[str, list[int]]]:
    """``(what, indices into params)`` per sublayer when the stack offers ``sublayer(k)`` and
    each sublayer's parameters are among the stack's; else one group of them all."""
    if has_stack_sublayer(stack):
        where = {id(p): i for i, p in enumerate(params)}
        groups = []
        for k in range(stack.layers):
            own = [where[id(p)] for p in floating_parameters(sublayer_of(stack, k), trainable=True)
                   if id(p) in where]
            if own:
                groups.append((f"sublayer {k}'s parameters", own))
        if groups:
            return groups
    return [("the stack's parameters", list(range(len(params))))]


@declare(
    "stack.fd_gradients",
    statement="finite differences through the stack match autograd w.r.t. x and each "
              "sublayer's parameters",
    theorems=("unroll.gradient",), requires=(DIFFERENTIABLE, capability(STACK), FLOAT64, UNROLLED),
    tolerance=rules.FD, examples=_examples, explore=False,
    cases=Cases(branches=SMOOTH_BRANCHES, extreme_scales=False), prerequisites=BASE)
def check_fd_gradients(ctx: Context, case: Case) -> None:
    """Directional central differences of ``⟨G', X_L⟩`` (``X_L = stack.forward(x)``) w.r.t.
    ``x`` and, one sublayer at a time, w.r.t. its parameters, against autograd."""
    stack = build_stack(ctx, case)
    fns = branch_fns(ctx, case)
    x = ctx.inputs.state(case)
    G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), ctx.dtype,
                            ctx.device)

    def loss(state: torch.Tensor) -> torch.Tensor:
        return (stack.forward(state, list(fns)) * G).sum()

    params = floating_parameters(stack, trainable=True)
    xg = x.clone().requires_grad_(True)
    value = loss(xg)
    ctx.record.require(value.requires_grad, "the stack's output is not connected to autograd")
    grads = torch.autograd.grad(value, [xg, *params], allow_unused=True)
    grad_x = grads[0]
    ctx.record.require(grad_x is not None and bool(torch.isfinite(grad_x).all()),
                       "autograd gradient of the stack w.r.t. x is missing or non-finite")
    assert grad_x is not None
    with torch.no_grad():
        terms = f64(stack.forward(x.clone(), list(fns))) * f64(G)
    magnitude = (float(terms.abs().sum()), float(terms.norm()))
    directions = salts.FD_INPUT_DIRECTION.shape[0]
    for k in range(directions):
        v = ctx.inputs.tangent(strategies.gaussian(
            x.shape, case.seed, salts.FD_INPUT_DIRECTION.at(k), ctx.dtype, ctx.device))

        def loss_at(t: float, v: torch.Tensor = v) -> float:
            with torch.no_grad():
                return float(loss(x + t * v))

        ad = float((grad_x * v).sum())
        expect_directional(ctx, f"through {LAYERS} sublayers, w.r.t. x: finite differences "
                           "vs autograd", loss_at, case.scale, ad,
                           fd_denominator(ctx.precision.output, ad, case.scale), magnitude)
    p_grads = [torch.zeros_like(p) if g is None else g
               for p, g in zip(params, grads[1:], strict=True)]
    saved = [p.detach().clone() for p in params]
    try:
        groups = _parameter_groups(stack, params)
        # one direction per sublayer when there are several (their cost adds up; any random
        # direction sees a coefficient cut from autograd), else the gradients family's count
        per_group = 1 if len(groups) > 1 else directions
        for what, group in groups:
            for k in range(per_group):
                vs = {i: strategies.gaussian(params[i].shape, case.seed,
                                             salts.FD_PARAMETER_DIRECTION.at(k, i),
                                             params[i].dtype, str(params[i].device))
                      for i in group}

                def at(t: float, vs: dict[int, torch.Tensor] = vs) -> float:
                    with torch.no_grad():
                        for i, v in vs.items():
                            params[i].copy_(saved[i] + t * v)
                        return float(loss(x))

                ad = float(sum((p_grads[i] * v).sum() for i, v in vs.items()))
                try:
                    expect_directional(ctx, f"through {LAYERS} sublayers, w.r.t. {what}: "
                                       "finite differences vs autograd", at, 1.0, ad,
                                       fd_denominator(ctx.precision.output, ad, case.scale),
                                       magnitude)
                finally:  # the next direction (or sublayer) starts from the saved values
                    with torch.no_grad():
                        for i in group:
                            params[i].copy_(saved[i])
    finally:
        with torch.no_grad():
            for p, s in zip(params, saved, strict=True):
                p.copy_(s)


