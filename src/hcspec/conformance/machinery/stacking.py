"""Driving a stack of sublayers (capability ``stack``): the recording branches, building the
stack from the case, running its forward and reading the weights each sublayer used, and the
unrolled composition of those weights (the ``stack.*`` family and its tests use them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, cast

import torch

from hcspec.conformance import strategies
from hcspec.conformance.machinery.base import Context, NotApplicable, PropertyFailure, f64, np64
from hcspec.conformance.machinery.building import Builder
from hcspec.conformance.machinery.inputs import CheckedBranch
from hcspec.conformance.machinery.layer_bounds import Layer
from hcspec.conformance.protocol import (
    HyperConnectionImpl,
    Stack,
    Weights,
    check_required,
    has_parameters,
    has_stack,
    has_stack_weights,
)
from hcspec.conformance.strategies import Case
from hcspec.spec import numeric

LAYERS: Final = 3
"""Sublayers in every stack the family builds: sublayer 0 and two beyond it."""


class RecordingBranch(CheckedBranch):
    """A :class:`CheckedBranch` that also keeps each call's output (detached, float64)."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], d: int) -> None:
        super().__init__(fn, d)
        self.outputs: list[torch.Tensor] = []

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        z = super().__call__(x)
        self.outputs.append(f64(z))
        return z


def branches(ctx: Context, case: Case, name: str | None = None) -> list[RecordingBranch]:
    """One recording branch per sublayer: the case's (or the named) branch drawn with seed
    ``case.seed + k`` for sublayer k. Each computes in the run's dtype and answers in its
    input's: a stack whose sublayers return a declared coarser output (TileKernels' bfloat16)
    hands that dtype to the next sublayer's branch, as it would to its own F."""
    return [RecordingBranch(branch_fns(ctx, case, name)[k], case.d) for k in range(LAYERS)]


def branch_fns(ctx: Context, case: Case, name: str | None = None
               ) -> list[Callable[[torch.Tensor], torch.Tensor]]:
    """The branch functions of :func:`branches`, unrecorded: sublayer k's draws with seed
    ``case.seed + k``, computes in the run's dtype and answers in its input's."""
    def in_run_dtype(fn: Callable[[torch.Tensor], torch.Tensor]
                     ) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda x: fn(x.to(ctx.dtype)).to(x.dtype)

    return [in_run_dtype(strategies.make_branch(name or case.branch, case.d, ctx.dtype,
                                                ctx.device, seed=case.seed + k))
            for k in range(LAYERS)]


def build_stack(ctx: Context, case: Case, layers: int = LAYERS) -> Stack:
    """``impl.stack(layers)`` of a fresh unperturbed impl, then perturbed as the case says
    (through ``stack.parameters()`` when offered, else the impl's).

    Raises:
        PropertyFailure: the impl has no ``stack``, ``stack`` raised, or the stack's ``n``,
            ``d``, ``layers`` or ``forward`` are missing or wrong.
        FactoryRejected: the factory rejected the case.
    """
    impl = ctx.build.make(case, perturb=False)
    if not has_stack(impl):
        raise PropertyFailure("the impl has no stack(layers), although the run's first impl "
                              "offered it")
    try:
        stack: Any = impl.stack(layers)
    except Exception as exc:
        raise PropertyFailure(f"impl.stack({layers}) raised {type(exc).__name__}: "
                              f"{exc}") from exc
    want = {"n": case.n, "d": case.d, "layers": layers}
    got = {name: getattr(stack, name, None) for name in want}
    if got != want or not callable(getattr(stack, "forward", None)):
        forward = "a" if callable(getattr(stack, "forward", None)) else "no"
        raise PropertyFailure(f"impl.stack({layers}) returned {type(stack).__name__} with "
                              f"{got} and {forward} forward; expected {want} and "
                              "forward(x, branches)")
    if case.perturb > 0 or case.param_scale != 1.0:
        Builder.perturb(cast(HyperConnectionImpl, stack if has_parameters(stack) else impl), case)
    return cast(Stack, stack)


def _called_once(bs: Sequence[CheckedBranch], what: str) -> None:
    for k, branch in enumerate(bs):
        if branch.calls != 1:
            raise PropertyFailure(f"{what}: the branch of sublayer {k} was called "
                                  f"{branch.calls} times; expected exactly once")


def run_forward(ctx: Context, stack: Stack, x: torch.Tensor,
                bs: Sequence[CheckedBranch]) -> torch.Tensor:
    """``stack.forward`` on a copy of ``x``, checked: a finite ``[B,T,n,d]`` tensor, each
    branch called once.

    Raises:
        PropertyFailure: otherwise (the message says which).
    """
    out: object = stack.forward(x.clone(), list(bs))
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        got = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise PropertyFailure(f"stack.forward returned {got}, expected {list(x.shape)}")
    _called_once(bs, "stack.forward")
    if not bool(torch.isfinite(out).all()):
        raise PropertyFailure(f"the output of the stack of {stack.layers} is non-finite")
    return out


def run_weights(ctx: Context, stack: Stack, x: torch.Tensor,
                bs: Sequence[CheckedBranch]) -> list[Weights]:
    """``stack.weights(x, branches)`` on a copy of ``x``, checked: one ``(h_pre [B,T,n],
    h_post [B,T,n], H_res [B,T,n,n])`` per sublayer, each branch called once.

    Raises:
        NotApplicable: the stack offers no ``weights``.
        PropertyFailure: a wrong count, type or shape (the message names the sublayer).
    """
    if not has_stack_weights(stack):
        raise NotApplicable("the stack offers no weights(x, branches): the coefficients each "
                            "sublayer used cannot be read")
    got: object = cast(Any, stack).weights(x.clone(), list(bs))
    _called_once(bs, "stack.weights")
    if not isinstance(got, (list, tuple)) or len(got) != stack.layers:
        raise PropertyFailure(f"stack.weights returned {type(got).__name__} of "
                              f"{len(got) if isinstance(got, (list, tuple)) else '?'} entries, "
                              f"expected a list of {stack.layers} (one per sublayer)")
    batch, tokens, n, _ = x.shape
    shapes = ((batch, tokens, n), (batch, tokens, n), (batch, tokens, n, n))
    out: list[Weights] = []
    for k, entry in enumerate(got):
        if not (isinstance(entry, (list, tuple)) and len(entry) == 3 and all(
                isinstance(t, torch.Tensor) and tuple(t.shape) == s
                for t, s in zip(entry, shapes, strict=True))):
            raise PropertyFailure(f"stack.weights: sublayer {k}'s entry is not (h_pre "
                                  "[B,T,n], h_post [B,T,n], H_res [B,T,n,n])")
        out.append((entry[0], entry[1], entry[2]))
    return out


def sublayer_of(stack: Stack, k: int) -> HyperConnectionImpl:
    """``stack.sublayer(k)``, checked against the required protocol."""
    try:
        sub: Any = cast(Any, stack).sublayer(k)
        check_required(sub)
    except (TypeError, ValueError, IndexError) as exc:
        raise PropertyFailure(f"stack.sublayer({k}): {exc}") from exc
    return cast(HyperConnectionImpl, sub)


def unrolled(used: Sequence[Weights], read: int | None = None) -> torch.Tensor:
    """The spec's unrolled connection weights ``[B, T, L + 2, L + 2]`` of the coefficients
    ``used`` per sublayer (:func:`hcspec.spec.numeric.connection_weights`); with ``read = i``,
    of the stack followed by a node that reads stream i (``h_pre = e_i``, ``h_post = 0``,
    ``H_res = I``): its row L + 1 gives stream i of ``X_L``."""
    h_pre, h_post, H_res = (torch.stack([f64(w[i]) for w in used], dim=-2 if i < 2 else -3)
                            for i in range(3))
    if read is not None:
        n = h_pre.shape[-1]
        e = torch.zeros_like(h_pre[..., :1, :])
        e[..., 0, read] = 1.0
        eye = torch.eye(n, dtype=torch.float64).expand_as(H_res[..., :1, :, :])
        h_pre = torch.cat([h_pre, e], dim=-2)
        h_post = torch.cat([h_post, torch.zeros_like(e)], dim=-2)
        H_res = torch.cat([H_res, eye], dim=-3)
    return torch.from_numpy(numeric.connection_weights(np64(h_pre), np64(h_post), np64(H_res)))


def combination(row: torch.Tensor, nodes: Sequence[torch.Tensor],
                 k: int) -> tuple[torch.Tensor, float]:
    """``Σ_{j<k} row_j nodes_j`` ``[B, T, d]`` and the size of its terms (the error's scale)."""
    terms = [row[..., j, None] * nodes[j] for j in range(k)]
    return (sum(terms[1:], terms[0]),
            float(sum((t.abs() for t in terms[1:]), terms[0].abs()).max()))


def replayed_layers(x: torch.Tensor, used: list[Weights]) -> list[Layer]:
    """The stack's sublayers with F ≡ 0 as :class:`Layer` values for :func:`mhc_bounds`: the
    states ``X_{k+1} = H_res,k X_k`` replayed in float64
    from ``x`` and the reported ``H_res``."""
    layers, X = [], f64(x)
    for h_pre, h_post, H_res in used:
        out = f64(H_res) @ X
        layers.append(Layer(X, out, torch.zeros_like(X[..., 0, :]),
                            (f64(h_pre), f64(h_post), f64(H_res))))
        X = out
    return layers
