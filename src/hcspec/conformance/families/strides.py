"""Strides family: a state that is a non-contiguous view — transposed storage, a slice, an
expanded (broadcast) tensor — gives the same output as its contiguous copy.

Callers hand a connection views all the time: a ``[B, n, T, d]`` buffer permuted to
``[B, T, n, d]``, every other feature of a wider tensor, one hidden state broadcast over the
batch. A kernel that assumes contiguous strides reads the wrong elements silently; code that
calls ``view`` on the state raises. The connection is a function of the values only (spec
``forward.shapes``), so the view's output must equal the copy's; an impl that needs contiguous
input declares ``Conventions.contiguous_input`` and the property is then not applicable, with
that reason in the report. Only the standard explicit examples run (no exploration): what is
checked depends on the strides, not on the values.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from hcspec.conformance.author import (
    Case,
    Cases,
    Context,
    Inconclusive,
    PropertyFailure,
    Requirement,
    declare,
    metrics,
    not_bridged,
    rules,
)

BASE = ("shape.output", "shape.branch_once")

CONTIGUOUS_NOT_DECLARED = Requirement(
    "contiguous_input not declared",
    "the impl declares contiguous_input=True: it needs a contiguous [B,T,n,d] state, so "
    "strided views are not checked",
    lambda s: not s.conventions.contiguous_input)
"""The impl accepts any strides (it does not declare ``contiguous_input``)."""


def _stream_major(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)


def _feature_major(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(-1, -2).contiguous().transpose(-1, -2)


def _every_other_feature(x: torch.Tensor) -> torch.Tensor:
    wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype, device=x.device)
    wide[..., ::2] = x
    return wide[..., ::2]


def _broadcast_batch(x: torch.Tensor) -> torch.Tensor:
    return x[:1].clone().expand_as(x)


VIEWS: tuple[tuple[str, Callable[[torch.Tensor], torch.Tensor]], ...] = (
    ("stream-major storage ([B,n,T,d] permuted to [B,T,n,d])", _stream_major),
    ("feature-major storage (the last two axes transposed)", _feature_major),
    ("a slice (every other feature of a [B,T,n,2d] tensor)", _every_other_feature),
    ("an expanded view (batch element 0 broadcast over the batch, stride 0)", _broadcast_batch),
)
"""Each view of the case's state, by what it is (each on storage of its own: the kit's state
is never handed to the impl)."""


@declare(
    "strides.non_contiguous",
    statement="a transposed, sliced or expanded view of the state gives its contiguous copy's "
              "output",
    theorems=("forward.shapes",),
    requires=(CONTIGUOUS_NOT_DECLARED, not_bridged(
        "it hands the framework a contiguous host copy of the state, so no view's strides "
        "reach the implementation")),
    tolerance=rules.SELF_CONSISTENCY,
    cases=Cases(min_batch=2, min_n=2, d_more_than_n=True), prerequisites=BASE, explore=False)
def check_non_contiguous(ctx: Context, case: Case) -> None:
    """For every view in :data:`VIEWS`, ``forward(view)`` equals ``forward(view.contiguous())``
    (the view itself is passed, not a copy); an exception raised on the view fails with its
    text and the view's strides. A forward that writes into its input (which
    ``state.input_unchanged`` diagnoses) cannot be handed an expanded view: such a case is
    inconclusive."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    probe = x.clone()
    ctx.observe.forward(impl, probe, ctx.inputs.branch(case, record=False), copy=False)
    if not torch.equal(probe, x):
        raise Inconclusive("forward writes into its input (state.input_unchanged diagnoses it), "
                           "so it cannot be handed views")
    for what, make_view in VIEWS:
        view = make_view(x)
        copy = view.contiguous()
        want = ctx.observe.forward(impl, copy, ctx.inputs.branch(case, record=False))
        try:
            got = ctx.observe.forward(impl, view, ctx.inputs.branch(case, record=False),
                                      copy=False)
        except PropertyFailure:
            raise
        except Exception as exc:
            raise PropertyFailure(
                f"forward raised {type(exc).__name__} on a non-contiguous state, {what}, "
                f"strides {list(view.stride())}, while its contiguous copy works: {exc}",
                hint="reshape instead of view, or declare contiguous_input=True in the impl's "
                     "conventions") from exc
        ctx.record.expect(f"X' of {what} vs X' of its contiguous copy",
                          metrics.scaled_error(got, want),
                          detail=f"strides {list(view.stride())}")
