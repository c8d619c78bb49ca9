"""State family: forward leaves the input tensor and the parameters (and buffers, in eval
mode) unchanged, and an eval-mode forward is deterministic.

Source: DESIGN.md §2 (state). A connection is a pure function of (x, weights); mutating the
caller's tensor corrupts the other residual streams' history and the autograd graph.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from hcspec.conformance.properties.base import Context, Property
from hcspec.conformance.properties.common import standard_examples, standard_strategy
from hcspec.conformance.protocol import KINDS, PARAMETERS, TRAIN_EVAL, WEIGHTS, HyperConnectionImpl
from hcspec.conformance.strategies import Case

ALL = frozenset(KINDS)


def check_input(ctx: Context, case: Case) -> None:
    """forward (and weights) leave x bit-for-bit unchanged."""
    impl = ctx.make(case)
    x = ctx.state(case)
    before = x.clone()
    ctx.forward(impl, x, ctx.branch(case, record=False), copy=False)
    changed = (x != before).sum().item()
    ctx.require(changed == 0, f"forward modified its input in place ({changed} entries changed)")
    if WEIGHTS in ctx.capabilities:
        impl.weights(x)  # type: ignore[attr-defined]
        changed = (x != before).sum().item()
        ctx.require(changed == 0, f"weights(x) modified x in place ({changed} entries changed)")


def _tensors(impl: HyperConnectionImpl) -> list[tuple[str, torch.Tensor]]:
    found = [(f"parameter {i}", p) for i, p in enumerate(impl.parameters())  # type: ignore[attr-defined]
             if isinstance(p, torch.Tensor)]
    buffers = getattr(impl, "buffers", None)
    if callable(buffers):
        found += [(f"buffer {i}", b) for i, b in enumerate(buffers())
                  if isinstance(b, torch.Tensor)]
    return found


def check_parameters(ctx: Context, case: Case) -> None:
    """forward leaves every parameter (and, in eval mode, every buffer) unchanged."""
    impl = ctx.make(case)
    x = ctx.state(case)
    modes: list[str] = ["default"]
    if TRAIN_EVAL in ctx.capabilities:
        modes = ["train", "eval"]
    for mode in modes:
        if mode == "train":
            impl.train(True)  # type: ignore[attr-defined]
        elif mode == "eval":
            impl.eval()  # type: ignore[attr-defined]
        tensors = [(name, t) for name, t in _tensors(impl)
                   if mode != "train" or name.startswith("parameter")]
        saved = [t.detach().clone() for _, t in tensors]
        ctx.forward(impl, x, ctx.branch(case, record=False))
        for (name, t), s in zip(tensors, saved, strict=True):
            ctx.require(t.shape == s.shape and bool(torch.equal(t.detach(), s)),
                        f"forward ({mode} mode) changed {name} (shape {list(s.shape)})")


def check_deterministic(ctx: Context, case: Case) -> None:
    """Two eval-mode forwards of the same x give identical outputs (CPU: bit for bit)."""
    impl = ctx.make(case)
    if TRAIN_EVAL in ctx.capabilities:
        impl.eval()  # type: ignore[attr-defined]
    x = ctx.state(case)
    first = ctx.forward(impl, x, ctx.branch(case, record=False)).detach().clone()
    second = ctx.forward(impl, x, ctx.branch(case, record=False)).detach()
    if x.device.type == "cpu":
        ctx.require(bool(torch.equal(first, second)),
                    f"two eval-mode forwards differ (max |diff| "
                    f"{float((first - second).abs().max()):.3g})")
    else:
        from hcspec.conformance import tolerances

        ctx.expect("two eval-mode forwards", tolerances.scaled_error(second, first),
                   tolerances.device(ctx.tol_dtype))


def _examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx, d_more_than_n=False)


def _strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, d_more_than_n=False)


BASE = ("shape.output",)

PROPERTIES = [
    Property("state.input_unchanged", "state",
             "forward and weights leave the input tensor unchanged",
             None, frozenset(), ALL, check_input, _examples, _strategy, prerequisites=BASE),
    Property("state.parameters_unchanged", "state",
             "forward leaves the parameters (and, in eval mode, the buffers) unchanged",
             None, frozenset({PARAMETERS}), ALL, check_parameters, _examples, _strategy,
             prerequisites=BASE),
    Property("state.deterministic_eval", "state",
             "two eval-mode forwards of the same input are identical",
             None, frozenset(), ALL, check_deterministic, _examples, _strategy,
             prerequisites=BASE),
]
