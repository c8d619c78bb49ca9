"""Inference family: the inference path computes what the training path computes — under
``torch.no_grad()``, under ``torch.inference_mode()``, in eval and in train mode — also on a
later call with another input of the same shape (a cache keyed by shape) and with another
sequence length (three successive decode steps of one new token each after a prefill).

Serving engines add warm-up, caching and separate decode/prefill kernels that the training
path never runs; the connection is a pure function of ``(x, parameters)`` (spec
``forward.shapes``), so each of them must give the training path's output. Train mode is
compared only when the impl does not declare ``Conventions.deterministic = False`` (nothing
random, such as dropout, is declared). Only the standard explicit examples run (no
exploration): a path taken or a cache hit depends on the calls, not on the values.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator

import torch

from hcspec.conformance.author import (
    Case,
    Cases,
    Context,
    HyperConnectionImpl,
    declare,
    f64,
    has_train_eval,
    metrics,
    not_bridged,
    resized,
    rules,
    salts,
)

BASE = ("shape.output", "shape.branch_once")


@contextlib.contextmanager
def _mode(impl: HyperConnectionImpl, train: bool | None) -> Iterator[None]:
    """Train (True) or eval (False) mode for the block, when the impl offers the switch."""
    if train is None or not has_train_eval(impl):
        yield
        return
    impl.train(train)
    try:
        yield
    finally:
        impl.train(True)


GradMode = Callable[[], contextlib.AbstractContextManager[object]]
GRAD_MODES: tuple[tuple[str, GradMode], ...] = (
    ("torch.no_grad()", torch.no_grad),
    ("torch.inference_mode()", torch.inference_mode),
)


def _paths(ctx: Context, impl: HyperConnectionImpl) -> list[tuple[str, bool | None, GradMode]]:
    """(name, train mode or None, grad mode) of every inference path to compare."""
    switch = has_train_eval(impl)
    paths: list[tuple[str, bool | None, GradMode]] = [
        (name, None, mode) for name, mode in GRAD_MODES]
    if switch:
        paths += [(f"eval mode, {name}", False, mode) for name, mode in GRAD_MODES]
        paths.append(("eval mode, gradients enabled", False, torch.enable_grad))
        if ctx.conventions.deterministic:
            paths.append(("train mode, torch.no_grad()", True, torch.no_grad))
    return paths


def _run(ctx: Context, impl: HyperConnectionImpl, x: torch.Tensor, case: Case,
         train: bool | None, grad: GradMode) -> torch.Tensor:
    with _mode(impl, train), grad():
        out = ctx.observe.forward(impl, x, ctx.inputs.branch(case, record=False))
        return f64(out.detach())


def _training(ctx: Context, case: Case, x: torch.Tensor) -> torch.Tensor:
    """The training path's output at ``x``: a fresh impl, gradients enabled, train mode when
    nothing random is declared (else the factory's default mode)."""
    impl = ctx.build.make(case)
    train = True if ctx.conventions.deterministic else None
    return _run(ctx, impl, x, case, train, torch.enable_grad)


@declare(
    "inference.modes",
    statement="forward under no_grad, inference_mode, eval and train mode gives the training "
              "output",
    theorems=("forward.shapes",),
    requires=(not_bridged("it only records train/eval, and torch's grad mode does not reach "
                          "the framework: every path runs the same framework code"),),
    tolerance=rules.SELF_CONSISTENCY, prerequisites=BASE, explore=False)
def check_modes(ctx: Context, case: Case) -> None:
    """One impl, one state: every path of :func:`_paths` gives the training path's output."""
    x = ctx.inputs.state(case)
    want = _training(ctx, case, x)
    impl = ctx.build.make(case)
    for name, train, grad in _paths(ctx, impl):
        got = _run(ctx, impl, x, case, train, grad)
        ctx.record.expect(f"X' under {name} vs the training path (train mode, gradients on)",
                          metrics.scaled_error(got, want))


DECODE_STEPS = 3
"""Successive one-token decode calls after the prefill, each with a new token: a buffer kept
from one decode call (a stale cache, a KV-style slot written once) shows from the second on."""


@declare(
    "inference.repeated_calls",
    statement="later inference calls (same shape, new input; three one-token decode steps) "
              "are correct",
    theorems=("forward.shapes",), tolerance=rules.SELF_CONSISTENCY, cases=Cases(min_tokens=2),
    prerequisites=BASE, explore=False)
def check_repeated_calls(ctx: Context, case: Case) -> None:
    """On each inference path, a fresh impl called on ``x₁`` (a prefill of T tokens), then on
    another state ``x₂`` of the same shape, then on :data:`DECODE_STEPS` successive one-token
    states (decode steps, each a new token), gives for ``x₂`` and for every decode step the
    training path's output on the same input."""
    x1 = ctx.inputs.state(case)
    x2 = ctx.inputs.state(case, salt=salts.SECOND_STATE)
    tokens = ctx.inputs.state(dataclasses.replace(case, tokens=DECODE_STEPS),
                              salt=salts.OTHER_TOKENS_STATE)
    steps = [tokens[:, k:k + 1].contiguous() for k in range(DECODE_STEPS)]
    want2 = _training(ctx, case, x2)
    wants = [_training(ctx, resized(case, step), step) for step in steps]
    for name, train, grad in _paths(ctx, ctx.build.make(case)):
        impl = ctx.build.make(case)
        _run(ctx, impl, x1, case, train, grad)
        got2 = _run(ctx, impl, x2, case, train, grad)
        ctx.record.expect(f"second call under {name} (same shape {list(x2.shape)}, new input) "
                          "vs the training path", metrics.scaled_error(got2, want2),
                          hint="a result cached by shape (warm-up, graph capture) reused "
                               "for a new input?")
        for k, (step, want) in enumerate(zip(steps, wants, strict=True)):
            got = _run(ctx, impl, step, resized(case, step), train, grad)
            ctx.record.expect(f"decode step {k + 1} of {DECODE_STEPS} under {name} (1 new "
                              f"token after a prefill of {case.tokens}) vs the training path",
                              metrics.scaled_error(got, want),
                              hint="a decode path that differs from the prefill path?" if k == 0
                              else "a buffer kept from an earlier decode call (stale cache)?")
