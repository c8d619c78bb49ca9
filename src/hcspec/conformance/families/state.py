"""State family: forward leaves the input tensor and the parameters (and buffers, in eval
mode) unchanged, and an eval-mode forward is deterministic.

A connection is a pure function of (x, weights); mutating the
caller's tensor corrupts the other residual streams' history and the autograd graph.
"""

from __future__ import annotations

import torch

from hcspec.conformance.author import (
    PARAMETERS,
    Case,
    Context,
    HyperConnectionImpl,
    all_parameters,
    capability,
    declare,
    has_train_eval,
    has_weights,
    metrics,
    not_bridged,
    rules,
)

BASE = ("shape.output",)


@declare(
    "state.input_unchanged", statement="forward and weights leave the input tensor unchanged",
    requires=(not_bridged("it hands the framework a copy of the state, so the implementation "
                          "cannot write into the caller's tensor"),),
    prerequisites=BASE)
def check_input(ctx: Context, case: Case) -> None:
    """forward (and weights) leave x bit-for-bit unchanged."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    before = x.clone()
    ctx.observe.forward(impl, x, ctx.inputs.branch(case, record=False), copy=False)
    changed = (x != before).sum().item()
    ctx.record.require(changed == 0,
                       f"forward modified its input in place ({changed} entries changed)")
    if has_weights(impl):
        impl.weights(x)
        changed = (x != before).sum().item()
        ctx.record.require(changed == 0,
                           f"weights(x) modified x in place ({changed} entries changed)")


def _tensors(impl: HyperConnectionImpl) -> list[tuple[str, torch.Tensor]]:
    found = [(f"parameter {i}", p) for i, p in enumerate(all_parameters(impl))
             if isinstance(p, torch.Tensor)]
    buffers = getattr(impl, "buffers", None)
    if callable(buffers):
        found += [(f"buffer {i}", b) for i, b in enumerate(buffers())
                  if isinstance(b, torch.Tensor)]
    return found


@declare(
    "state.parameters_unchanged",
    statement="forward leaves the parameters (and, in eval mode, the buffers) unchanged",
    requires=(capability(PARAMETERS),), prerequisites=BASE)
def check_parameters(ctx: Context, case: Case) -> None:
    """forward leaves every parameter (and, in eval mode, every buffer) unchanged."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    modes: list[str] = ["train", "eval"] if has_train_eval(impl) else ["default"]
    for mode in modes:
        if mode == "train" and has_train_eval(impl):
            impl.train(True)
        elif mode == "eval" and has_train_eval(impl):
            impl.eval()
        tensors = [(name, t) for name, t in _tensors(impl)
                   if mode != "train" or name.startswith("parameter")]
        saved = [t.detach().clone() for _, t in tensors]
        ctx.observe.forward(impl, x, ctx.inputs.branch(case, record=False))
        for (name, t), s in zip(tensors, saved, strict=True):
            ctx.record.require(t.shape == s.shape and bool(torch.equal(t.detach(), s)),
                               f"forward ({mode} mode) changed {name} (shape {list(s.shape)})")


@declare(
    "state.deterministic_eval", statement="two eval-mode forwards of the same input are identical",
    secondary=(rules.DEVICE,), prerequisites=BASE)
def check_deterministic(ctx: Context, case: Case) -> None:
    """Two eval-mode forwards of the same x give identical outputs (CPU: bit for bit)."""
    impl = ctx.build.make(case)
    if has_train_eval(impl):
        impl.eval()
    x = ctx.inputs.state(case)
    first = ctx.observe.forward(impl, x, ctx.inputs.branch(case, record=False)).detach().clone()
    second = ctx.observe.forward(impl, x, ctx.inputs.branch(case, record=False)).detach()
    if x.device.type == "cpu":
        ctx.record.require(bool(torch.equal(first, second)),
                           f"two eval-mode forwards differ (max |diff| "
                           f"{float((first - second).abs().max()):.3g})")
    else:
        ctx.record.expect("two eval-mode forwards", metrics.scaled_error(second, first),
                          rule=rules.DEVICE)
