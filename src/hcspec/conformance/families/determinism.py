"""Determinism family: repeated forwards *and backwards* of the same input in eval mode are
bitwise equal on every device (CUDA included) — or, when the impl declares
``Conventions.deterministic = False``, the report states their run-to-run spread.

``state.deterministic_eval`` compares two forwards; a backward that accumulates with atomics
(``index_add``/``scatter_add`` on CUDA, split-K reductions whose order depends on scheduling)
gives other gradients on every run while the forward stays bitwise equal, which makes training
runs impossible to reproduce and bisect. Only the standard explicit examples with n ≥ 3 run
(no exploration), each :data:`REPEATS` times.
"""

from __future__ import annotations

import torch

from hcspec.conformance.author import (
    SMOOTH_BRANCHES,
    THREADS,
    Case,
    Cases,
    Context,
    HyperConnectionImpl,
    NotApplicable,
    capability,
    declare,
    f64,
    floating_parameters,
    forward_backward,
    has_threads,
    has_train_eval,
    metrics,
    rules,
    salts,
    strategies,
)

BASE = ("shape.output",)
REPEATS = 3
"""Forward + backward passes compared per case."""


GRAPHLESS = "(no autograd graph)"
"""The key :func:`_pass` sets, instead of the gradients, for an output without a graph."""


class _Graphless(Exception):
    """The forward's output carries no autograd graph (``output``: it, detached)."""

    def __init__(self, output: torch.Tensor) -> None:
        super().__init__("no autograd graph")
        self.output = output


def _trainable(impl: HyperConnectionImpl) -> list[tuple[str, torch.Tensor]]:
    """The trainable floating-point parameters of ``impl``, each with a name that is the same
    on every pass: its ``named_parameters()`` name where the impl has that method, else its
    position in ``parameters()``."""
    params = floating_parameters(impl, trainable=True)
    named = getattr(impl, "named_parameters", None)
    if callable(named):
        names = {id(p): name for name, p in named()}
        if all(id(p) in names for p in params):
            return [(f"parameter {names[id(p)]}", p) for p in params]
    return [(f"parameter {i}", p) for i, p in enumerate(params)]


def _pass(ctx: Context, impl: HyperConnectionImpl, x: torch.Tensor, upstream: torch.Tensor,
          case: Case) -> dict[str, torch.Tensor | None]:
    """One forward and backward of ``L = ⟨G', X'⟩``, as
    ``{"X'": out, "∂L/∂x": …, "∂L/∂(parameter NAME)": … or None when unused}``, detached;
    ``{"X'": out, GRAPHLESS: None}`` when the output carries no autograd graph.

    Raises:
        PropertyFailure: the output's shape is not the input's (checked by
            ``ctx.observe.forward`` on every pass).
    """
    params = _trainable(impl)

    def forward(leaf: torch.Tensor) -> torch.Tensor:
        out = ctx.observe.forward(impl, leaf, ctx.inputs.branch(case, record=False))
        if not out.requires_grad:
            raise _Graphless(out.detach())
        return out

    try:
        out, grads = forward_backward(forward, x, upstream, [p for _, p in params])
    except _Graphless as graphless:
        return {"X'": graphless.output, GRAPHLESS: None}
    named: dict[str, torch.Tensor | None] = {"X'": out, "∂L/∂x": grads[0]}
    for (name, _), g in zip(params, grads[1:], strict=True):
        named[f"∂L/∂({name})"] = g
    return named


def _compare(ctx: Context, k: int, name: str, got: torch.Tensor | None,
             first: torch.Tensor | None, declared: bool) -> None:
    """Compare ``name`` of pass ``k`` with pass 1: presence, then shape, then bitwise equality
    (declared non-deterministic: the scaled spread within the rule
    :data:`hcspec.conformance.rules.DEVICE`).

    Raises:
        PropertyFailure: the value is missing in one pass only, its shape differs, or it
            differs (beyond the device rule's allowance when ``declared``).
    """
    if got is None or first is None:
        ctx.record.require(
            got is None and first is None,
            f"eval-mode pass {k} {'has no' if got is None else 'has a'} {name} but pass 1 "
            f"{'has one' if got is None else 'has none'} (the parameter takes part in one "
            "pass only)",
            hint="the forward uses a parameter conditionally on the call (a counter or a "
                 "cache?)")
        return
    ctx.record.require(
        got.shape == first.shape,
        f"eval-mode pass {k} gives {name} of shape {tuple(got.shape)}, pass 1 "
        f"{tuple(first.shape)}")
    if declared:
        ctx.record.expect(f"{name}, pass {k} vs pass 1: run-to-run spread (declared "
                          "deterministic=False)", metrics.scaled_error(got, first),
                          rule=rules.DEVICE)
        return
    differ = int((got != first).sum())
    ctx.record.require(
        differ == 0,
        f"eval-mode pass {k} differs from pass 1 in {name}: {differ} of {first.numel()} "
        f"entries, max |diff| {float((f64(got) - f64(first)).abs().max()):.3g}",
        hint="atomics or an order-dependent reduction in the backward? declare "
             "deterministic=False if that is intended")


@declare(
    "determinism.forward_backward",
    statement="repeated eval-mode forwards and backwards of one input are bitwise equal",
    tolerance=rules.EXACT, secondary=(rules.DEVICE,),
    cases=Cases(min_n=3, branches=SMOOTH_BRANCHES),
    prerequisites=BASE, explore=False)
def check_forward_backward(ctx: Context, case: Case) -> None:
    """:data:`REPEATS` forwards and backwards (``L = ⟨G', X'⟩``) of the same x in eval mode
    give outputs of the input's shape and bitwise equal outputs and gradients w.r.t. x and
    every trainable parameter (compared by parameter name), on every device: run-to-run
    noise from atomics on CUDA fails too. An impl that declares
    ``Conventions.deterministic = False`` has its spread (the largest scaled difference
    between runs) recorded instead, failing only beyond the device tolerance.

    An output without an autograd graph has its forwards compared and the property reported
    not applicable (:data:`GRAPHLESS`), never an error.

    Raises:
        PropertyFailure: a pass's output shape differs from the input's, a gradient is
            present in one pass only or changes shape, or a value differs between passes.
        NotApplicable: the output carries no autograd graph (after its forwards agree).
    """
    impl = ctx.build.make(case)
    if has_train_eval(impl):
        impl.eval()
    x = ctx.inputs.state(case)
    upstream = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), x.dtype,
                                   ctx.device)
    runs = [_pass(ctx, impl, x, upstream, case) for _ in range(REPEATS)]
    declared = not ctx.conventions.deterministic
    for k, run in enumerate(runs[1:], start=2):
        for name in dict.fromkeys(key for key in [*runs[0], *run] if key != GRAPHLESS):
            _compare(ctx, k, name, run.get(name), runs[0].get(name), declared)
    if all(GRAPHLESS in run for run in runs):
        raise NotApplicable(
            "forward's output carries no autograd graph (requires_grad is False although the "
            f"input requires grad): {REPEATS} eval-mode forwards were compared and agree, but "
            "no backward can be repeated (the gradients family reports a missing graph)")


THREAD_COUNTS = (1, 2, 4)
"""The thread counts ``determinism.thread_count`` compares (the first is the baseline)."""


@declare(
    "determinism.thread_count",
    statement="native code gives the same output at 1, 2 and 4 threads (bitwise unless "
              "declared non-deterministic)",
    requires=(capability(THREADS),), tolerance=rules.EXACT, secondary=(rules.DEVICE,),
    cases=Cases(min_n=3, branches=SMOOTH_BRANCHES), prerequisites=BASE)
def check_thread_count(ctx: Context, case: Case) -> None:
    """``impl.threads(k)`` for k in :data:`THREAD_COUNTS` (same parameters, k CPU threads)
    gives the same output of one input as ``threads(1)``: bitwise equal (a kernel that splits
    its work by rows or tokens computes every entry in one fixed order whatever the thread
    count), or, when the impl declares ``Conventions.deterministic = False`` (a reduction split
    across threads), within the device rule's spread.

    Raises:
        PropertyFailure: an output of another shape, or one that differs from the
            single-threaded output (beyond the device rule when declared).
    """
    impl = ctx.build.make(case)
    assert has_threads(impl)  # the declared requirement
    x = ctx.inputs.state(case)
    outputs = []
    for count in THREAD_COUNTS:
        with torch.no_grad():
            outputs.append(ctx.observe.forward(impl.threads(count), x,
                                               ctx.inputs.branch(case)).detach())
    first = outputs[0]
    for count, out in zip(THREAD_COUNTS[1:], outputs[1:], strict=True):
        ctx.record.require(out.shape == first.shape,
                           f"X' with {count} threads has shape {tuple(out.shape)}, with 1 "
                           f"thread {tuple(first.shape)}")
        if not ctx.conventions.deterministic:
            ctx.record.expect(f"X' with {count} threads vs 1 thread (declared "
                              "deterministic=False)", metrics.scaled_error(out, first),
                              rule=rules.DEVICE)
            continue
        differ = int((out != first).sum())
        ctx.record.require(
            differ == 0,
            f"X' with {count} threads differs from X' with 1 thread: {differ} of "
            f"{first.numel()} entries, max |diff| "
            f"{float((f64(out) - f64(first)).abs().max()):.3g}",
            hint="a reduction split across threads (its order depends on the thread count)? "
                 "declare deterministic=False if that is intended")
