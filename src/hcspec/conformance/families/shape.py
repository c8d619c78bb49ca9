"""Shape family: output shape/dtype/device, one branch call per forward with a ``[B, T, d]``
tensor, and the shapes of the optional ``weights``/``expand``/``reduce``.

The sublayer runs once per token on a d-vector, never n times and never on an n·d
concatenation (spec theorem ``forward.shapes``).
"""

from __future__ import annotations

import torch

from hcspec.conformance.author import (
    EXPAND,
    REDUCE,
    WEIGHTS,
    Branch,
    Case,
    Cases,
    Context,
    FactoryRejected,
    HyperConnectionImpl,
    PropertyFailure,
    capability,
    declare,
    gaussian,
    metrics,
    not_bridged,
    probes,
    rules,
    salts,
    strategies,
)


def _describe(t: object) -> str:
    if isinstance(t, torch.Tensor):
        return f"tensor {list(t.shape)} {t.dtype} on {t.device}"
    return type(t).__name__


def _canonical(ctx: Context, case: Case) -> bool:
    return case == Cases().examples(ctx)[0]


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


@declare(
    "shape.output",
    statement="forward(x, F) returns a tensor with x's shape [B,T,n,d], dtype and device",
    theorems=("forward.shapes",), shrink=False)
def check_output(ctx: Context, case: Case) -> None:
    """Output is a tensor with the input's shape and device and the input's dtype, or the
    declared ``output_dtype`` (finite for finite input); forward raising for a case the
    factory accepted is a failure naming the exception."""
    try:
        impl = ctx.build.make(case)
    except FactoryRejected as exc:
        if _canonical(ctx, case):  # the canonical case must build: a factory that never does
            raise PropertyFailure(f"expected the factory to build the canonical case (n={case.n}, "
                                  f"d={case.d}): {exc}") from exc
        raise
    x = ctx.inputs.state(case)
    dtype = ctx.observe.output_dtype(x.dtype)
    expected = (f"tensor {list(x.shape)} on {x.device} (the input's shape and device), dtype "
                f"{ctx.observe.describe_output_dtype(x.dtype)}")
    out = _run(ctx, impl, x, ctx.inputs.branch(case, record=False), case)
    ctx.record.require(
        isinstance(out, torch.Tensor)
        and out.shape == x.shape and out.dtype == dtype and out.device == x.device,
        f"forward returned {_describe(out)}, expected {expected}",
    )
    assert isinstance(out, torch.Tensor)
    bad = int((~torch.isfinite(out)).sum())
    ctx.record.require(bad == 0, f"forward returned {bad} non-finite values (NaN/inf) for a finite "
                       "input, expected finite values")


@declare(
    "shape.branch_once",
    statement="the branch is called exactly once per forward, with a [B,T,d] tensor",
    theorems=("forward.shapes",), shrink=False)
def check_branch_once(ctx: Context, case: Case) -> None:
    """The branch is called exactly once, with a ``[B, T, d]`` tensor of x's dtype/device."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    branch = ctx.inputs.branch(case)
    _run(ctx, impl, x, branch, case)
    ctx.record.require(branch.calls == 1,
                       f"the branch was called {branch.calls} times in one forward, expected once "
                       f"(n={case.n}; once per stream would be {case.n})")
    got = branch.inputs[0]
    expected = f"tensor {[case.batch, case.tokens, case.d]} {x.dtype} on {x.device}"
    ctx.record.require(
        tuple(got.shape) == (case.batch, case.tokens, case.d)
        and got.dtype == x.dtype and got.device == x.device,
        f"the branch received {_describe(got)}, expected {expected}",
    )


@declare(
    "shape.weights",
    statement="weights(x) returns finite h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n]",
    theorems=("forward.shapes",), requires=(capability(WEIGHTS),),
    prerequisites=("shape.output",), shrink=False)
def check_weights(ctx: Context, case: Case) -> None:
    """``weights(x)`` returns finite ``h_pre [B,T,n]``, ``h_post [B,T,n]``, ``H_res [B,T,n,n]``
    on x's device, in x's dtype or the declared ``output_dtype`` (``weights_dtype`` when
    declared)."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    dtype = ctx.observe.weights_dtype(x.dtype)
    for name, w in zip(("h_pre", "h_post", "H_res"), ctx.observe.weights(impl, x), strict=True):
        ctx.record.require(w.dtype == dtype and w.device == x.device,
                    f"weights(x): {name} is {_describe(w)}, expected "
                    f"{ctx.observe.describe_weights_dtype(x.dtype)} on {x.device}")
        bad = int((~torch.isfinite(w)).sum())
        ctx.record.require(bad == 0, f"weights(x): {name} has {bad} non-finite entries, expected "
                           "finite weights")


@declare(
    "shape.expand", statement="expand(h [B,T,d]) returns [B,T,n,d]",
    theorems=("forward.shapes",), requires=(capability(EXPAND),),
    prerequisites=("shape.output",), shrink=False)
def check_expand(ctx: Context, case: Case) -> None:
    """``expand(h [B,T,d])`` returns ``[B,T,n,d]`` with h's dtype and device."""
    impl = ctx.build.make(case)
    h = gaussian((case.batch, case.tokens, case.d), case.seed, salts.EXPAND_INPUT.at(),
                 ctx.dtype, ctx.device)
    out = ctx.observe.expand(impl, h)
    shape = [case.batch, case.tokens, case.n, case.d]
    ctx.record.require(isinstance(out, torch.Tensor) and list(out.shape) == shape
                and out.dtype == h.dtype and out.device == h.device,
                f"expand(h {list(h.shape)}) returned {_describe(out)}, expected tensor {shape} "
                f"{h.dtype} on {h.device}")


@declare(
    "shape.reduce", statement="reduce(x [B,T,n,d]) returns [B,T,d]",
    theorems=("forward.shapes",), requires=(capability(REDUCE),),
    prerequisites=("shape.output",), shrink=False)
def check_reduce(ctx: Context, case: Case) -> None:
    """``reduce(x [B,T,n,d])`` returns ``[B,T,d]`` on x's device, in x's dtype or the declared
    ``output_dtype`` (a learned head rounding as the forward does)."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    out = ctx.observe.reduce(impl, x)
    shape = [case.batch, case.tokens, case.d]
    dtypes = {x.dtype, ctx.observe.output_dtype(x.dtype)}
    allowed = " or ".join(sorted(str(t) for t in dtypes))
    ctx.record.require(isinstance(out, torch.Tensor) and list(out.shape) == shape
                and out.dtype in dtypes and out.device == x.device,
                f"reduce(x {list(x.shape)}) returned {_describe(out)}, expected tensor {shape} "
                f"{allowed} on {x.device}")


def _regrouped(x: torch.Tensor, tokens_first: int) -> torch.Tensor:
    batch, tokens, n, d = x.shape
    return x.reshape(batch, tokens_first, tokens // tokens_first, n, d)


@declare(
    "shape.other_sequence_axes",
    statement="a state [B,n,d] or [B,H,W,n,d] is rejected, or handled exactly as [B,T,n,d]",
    theorems=("forward.shapes",), tolerance=rules.SELF_CONSISTENCY,
    requires=(not_bridged("it rejects a state that is not [B, T, n, d] before the framework "
                          "runs"),),
    cases=Cases(min_tokens=2, branches=("mlp", "linear", "constant")),
    prerequisites=("shape.output", "shape.branch_once"), shrink=False)
def check_other_sequence_axes(ctx: Context, case: Case) -> None:
    """A state with no sequence axis (``[B, n, d]``) or two (``[B, H, W, n, d]``) is either
    rejected with an exception or handled exactly like the same tokens as ``[B, T, n, d]``;
    a result that differs is code that assumes one sequence axis (public bug report #4)."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    tokens_first = 2 if case.tokens % 2 == 0 else 1
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    want = _run(ctx, impl, x, strategies.CountingBranch(fn, record=False), case)
    ctx.record.require(isinstance(want, torch.Tensor) and want.shape == x.shape,
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
        ctx.record.require(isinstance(got, torch.Tensor) and got.shape == state.shape,
                    f"forward accepted a state with {label} {list(state.shape)} but returned "
                    f"{_describe(got)}; it must reject such a state or handle it")
        assert isinstance(got, torch.Tensor)
        ctx.record.expect(f"forward accepted a state with {label} and returned something else than "
                   "for the same tokens as [B, T, n, d] (reject other ranks, or handle them)",
                   metrics.scaled_error(got, expected))
