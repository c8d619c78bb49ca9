"""Shape family: output shape/dtype/device, one branch call per forward with a ``[B, T, d]``
tensor, and the shapes of the optional ``weights``/``expand``/``reduce``.

Source: DESIGN.md §1 (the sublayer runs once on a d-vector per token, never n times and never
on an n·d concatenation); spec theorem ``forward.shapes``.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from hcspec.conformance import probes, strategies, tolerances
from hcspec.conformance.properties.base import (
    Context,
    FactoryRejected,
    Property,
    PropertyFailure,
)
from hcspec.conformance.properties.common import standard_examples, standard_strategy
from hcspec.conformance.protocol import EXPAND, KINDS, REDUCE, WEIGHTS, Branch, HyperConnectionImpl
from hcspec.conformance.strategies import Case, gaussian

ALL = frozenset(KINDS)
NONE: frozenset[str] = frozenset()


def _describe(t: object) -> str:
    if isinstance(t, torch.Tensor):
        return f"tensor {list(t.shape)} {t.dtype} on {t.device}"
    return type(t).__name__


def _canonical(ctx: Context, case: Case) -> bool:
    return case == standard_examples(ctx, d_more_than_n=False)[0]


def _run(ctx: Context, impl: HyperConnectionImpl, x: torch.Tensor, branch: Branch,
         case: Case) -> object:
    """``impl.forward(x, branch)``; an exception (other than the kit's own failures) becomes a
    failure naming it and the valid input it was raised for."""
    try:
        return probes.forward_on_copy(impl, x, branch)
    except PropertyFailure:
        raise
    except Exception as exc:  # the impl cannot run a valid case its factory accepted
        raise PropertyFailure(
            f"forward raised {type(exc).__name__}: {exc} — for a valid input {_describe(x)} "
            f"(n={case.n}, d={case.d}) that the factory accepted") from exc


def check_output(ctx: Context, case: Case) -> None:
    """Output is a tensor with the input's shape, dtype and device (finite for finite input);
    forward raising for a case the factory accepted is a failure naming the exception."""
    try:
        impl = ctx.make(case)
    except FactoryRejected as exc:
        if _canonical(ctx, case):  # the canonical case must build: a factory that never does
            raise PropertyFailure(f"expected the factory to build the canonical case (n={case.n}, "
                                  f"d={case.d}): {exc}") from exc
        raise
    x = ctx.state(case)
    expected = f"tensor {list(x.shape)} {x.dtype} on {x.device}"
    out = _run(ctx, impl, x, ctx.branch(case, record=False), case)
    ctx.require(
        isinstance(out, torch.Tensor)
        and out.shape == x.shape and out.dtype == x.dtype and out.device == x.device,
        f"forward returned {_describe(out)}, expected {expected} (the input's)",
    )
    assert isinstance(out, torch.Tensor)
    bad = int((~torch.isfinite(out)).sum())
    ctx.require(bad == 0, f"forward returned {bad} non-finite values (NaN/inf) for a finite "
                "input, expected finite values")


def check_branch_once(ctx: Context, case: Case) -> None:
    """The branch is called exactly once, with a ``[B, T, d]`` tensor of x's dtype/device."""
    impl = ctx.make(case)
    x = ctx.state(case)
    branch = ctx.branch(case)
    _run(ctx, impl, x, branch, case)
    ctx.require(branch.calls == 1,
                f"the branch was called {branch.calls} times in one forward, expected once "
                f"(n={case.n}; once per stream would be {case.n})")
    got = branch.inputs[0]
    expected = f"tensor {[case.batch, case.tokens, case.d]} {x.dtype} on {x.device}"
    ctx.require(
        tuple(got.shape) == (case.batch, case.tokens, case.d)
        and got.dtype == x.dtype and got.device == x.device,
        f"the branch received {_describe(got)}, expected {expected}",
    )


def check_weights(ctx: Context, case: Case) -> None:
    """``weights(x)`` returns finite ``h_pre [B,T,n]``, ``h_post [B,T,n]``, ``H_res [B,T,n,n]``
    with x's dtype and device."""
    impl = ctx.make(case)
    x = ctx.state(case)
    for name, w in zip(("h_pre", "h_post", "H_res"), ctx.weights(impl, x), strict=True):
        ctx.require(w.dtype == x.dtype and w.device == x.device,
                    f"weights(x): {name} is {_describe(w)}, expected {x.dtype} on {x.device}")
        bad = int((~torch.isfinite(w)).sum())
        ctx.require(bad == 0, f"weights(x): {name} has {bad} non-finite entries, expected "
                    "finite weights")


def check_expand(ctx: Context, case: Case) -> None:
    """``expand(h [B,T,d])`` returns ``[B,T,n,d]`` with h's dtype and device."""
    impl = ctx.make(case)
    h = gaussian((case.batch, case.tokens, case.d), case.seed, 11, ctx.dtype, ctx.device)
    out = impl.expand(h)  # type: ignore[attr-defined]
    shape = [case.batch, case.tokens, case.n, case.d]
    ctx.require(isinstance(out, torch.Tensor) and list(out.shape) == shape
                and out.dtype == h.dtype and out.device == h.device,
                f"expand(h {list(h.shape)}) returned {_describe(out)}, expected tensor {shape} "
                f"{h.dtype} on {h.device}")


def check_reduce(ctx: Context, case: Case) -> None:
    """``reduce(x [B,T,n,d])`` returns ``[B,T,d]`` with x's dtype and device."""
    impl = ctx.make(case)
    x = ctx.state(case)
    out = impl.reduce(x)  # type: ignore[attr-defined]
    shape = [case.batch, case.tokens, case.d]
    ctx.require(isinstance(out, torch.Tensor) and list(out.shape) == shape
                and out.dtype == x.dtype and out.device == x.device,
                f"reduce(x {list(x.shape)}) returned {_describe(out)}, expected tensor {shape} "
                f"{x.dtype} on {x.device}")


def _regrouped(x: torch.Tensor, tokens_first: int) -> torch.Tensor:
    batch, tokens, n, d = x.shape
    return x.reshape(batch, tokens_first, tokens // tokens_first, n, d)


def check_other_sequence_axes(ctx: Context, case: Case) -> None:
    """A state with no sequence axis (``[B, n, d]``) or two (``[B, H, W, n, d]``) is either
    rejected with an exception or handled exactly like the same tokens as ``[B, T, n, d]``;
    a result that differs is code that assumes one sequence axis (public bug report #4)."""
    impl = ctx.make(case)
    x = ctx.state(case)
    tokens_first = 2 if case.tokens % 2 == 0 else 1
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    want = _run(ctx, impl, x, strategies.CountingBranch(fn, record=False), case)
    ctx.require(isinstance(want, torch.Tensor) and want.shape == x.shape,
                f"forward returned {_describe(want)} for {_describe(x)}")
    assert isinstance(want, torch.Tensor)
    variants = (
        ("no sequence axis [B, n, d]", x[:, 0], want[:, 0]),
        (f"two sequence axes [B, {tokens_first}, {case.tokens // tokens_first}, n, d]",
         _regrouped(x, tokens_first), _regrouped(want, tokens_first)),
    )
    for label, state, expected in variants:
        try:
            got = probes.forward_on_copy(impl, state, strategies.CountingBranch(fn, record=False))
        except Exception:  # rejecting another rank is allowed: the protocol is [B, T, n, d]
            continue
        ctx.require(isinstance(got, torch.Tensor) and got.shape == state.shape,
                    f"forward accepted a state with {label} {list(state.shape)} but returned "
                    f"{_describe(got)}; it must reject such a state or handle it")
        assert isinstance(got, torch.Tensor)
        ctx.expect(f"forward accepted a state with {label} and returned something else than "
                   "for the same tokens as [B, T, n, d] (reject other ranks, or handle them)",
                   tolerances.scaled_error(got, expected), tolerances.law(ctx.tol_dtype))


def _examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx, d_more_than_n=False)


def _axes_examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx, d_more_than_n=False, min_tokens=2)


def _axes_strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, d_more_than_n=False, min_tokens=2,
                             branches=("mlp", "linear", "constant"))


def _strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, d_more_than_n=False)


PROPERTIES = [
    Property("shape.output", "shape",
             "forward(x, F) returns a tensor with x's shape [B,T,n,d], dtype and device",
             "forward.shapes", NONE, ALL, check_output, _examples, _strategy, shrink=False),
    Property("shape.branch_once", "shape",
             "the branch is called exactly once per forward, with a [B,T,d] tensor",
             "forward.shapes", NONE, ALL, check_branch_once, _examples, _strategy, shrink=False),
    Property("shape.weights", "shape",
             "weights(x) returns finite h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n]",
             "forward.shapes", frozenset({WEIGHTS}), ALL, check_weights, _examples, _strategy,
             prerequisites=("shape.output",), shrink=False),
    Property("shape.expand", "shape", "expand(h [B,T,d]) returns [B,T,n,d]",
             "forward.shapes", frozenset({EXPAND}), ALL, check_expand, _examples, _strategy,
             prerequisites=("shape.output",), shrink=False),
    Property("shape.reduce", "shape", "reduce(x [B,T,n,d]) returns [B,T,d]",
             "forward.shapes", frozenset({REDUCE}), ALL, check_reduce, _examples, _strategy,
             prerequisites=("shape.output",), shrink=False),
    Property("shape.other_sequence_axes", "shape",
             "a state [B,n,d] or [B,H,W,n,d] is rejected, or handled exactly as [B,T,n,d]",
             "forward.shapes", NONE, ALL, check_other_sequence_axes, _axes_examples,
             _axes_strategy, prerequisites=("shape.output", "shape.branch_once"), shrink=False),
]
