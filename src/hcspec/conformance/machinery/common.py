"""Shared pieces of the property families: float64 re-computation of the branch and the law,
the law's tolerance for the run, the sums of H_res along its exact and other axis, and one
forward and backward of ``L = ⟨G', X'⟩``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from hcspec.conformance import rules, strategies
from hcspec.conformance.machinery.base import Context, f64, np64
from hcspec.conformance.protocol import Branch
from hcspec.conformance.strategies import Case
from hcspec.spec import numeric


def branch64(ctx: Context, case: Case, name: str | None = None) -> Branch:
    """The case's branch with float64 CPU constants (the same draws as the impl's branch)."""
    return strategies.make_branch(name or case.branch, case.d, torch.float64, "cpu", seed=case.seed)


def expected_output(
    ctx: Context, case: Case, X: torch.Tensor, h_pre: torch.Tensor, h_post: torch.Tensor,
    H_res: torch.Tensor, branch_name: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """``(X', expected branch input, scale)`` from the spec's closed form
    (:func:`hcspec.spec.numeric.forward`) with the given weights, all float64."""
    x_in = torch.from_numpy(numeric.aggregate(np64(X), np64(h_pre)))
    inp = ctx.observe.branch_input(x_in)
    z = branch64(ctx, case, branch_name)(inp)
    want = torch.from_numpy(numeric.forward(np64(X), np64(h_post), np64(H_res), np64(z)))
    scale = max(float(f64(X).abs().max()), float(want.abs().max()),
                float(f64(h_post).abs().max() * z.abs().max()))
    return want, inp, scale


T = TypeVar("T")


def by_exact_axis(exact_axis: str, rows: T, columns: T) -> tuple[T, T]:
    """``(the row value, the column value)`` ordered as ``(exact axis, other axis)`` for the
    declared ``sinkhorn_exact_axis`` (``"rows"`` or ``"columns"``: the axis Sinkhorn–Knopp
    normalises last, mHC eq. 9). The swap is its own inverse: an ``(exact, other)`` pair
    passed in comes back as ``(rows, columns)``."""
    return (rows, columns) if exact_axis == "rows" else (columns, rows)


def axis_sums(H: torch.Tensor, exact_axis: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sums along the exact axis, sums along the other axis)`` of ``H [..., n, n]``, each
    ``[..., n]`` in ``H``'s dtype and device: the row sums ``H 1`` and the column sums
    ``1ᵀ H`` ordered by :func:`by_exact_axis`."""
    return by_exact_axis(exact_axis, H.sum(dim=-1), H.sum(dim=-2))


def forward_backward(forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                     upstream: torch.Tensor, params: Sequence[torch.Tensor],
                     ) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    """One forward and backward of ``L = ⟨G', X'⟩``: ``X' = forward(leaf)`` on a fresh leaf
    copy of ``x`` that requires grad (``x`` itself is left as it is), ``G' = upstream`` (the
    shape of ``X'``), under grad mode. Returns ``(X', [∂L/∂x, ∂L/∂p for p in params])``,
    detached, with None for a parameter ``L`` does not depend on. Whatever ``forward`` raises
    propagates; a ``forward`` whose output is not connected to autograd makes
    :func:`torch.autograd.grad` raise RuntimeError (check it inside ``forward`` to fail
    with a message of one's own)."""
    leaf = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        out = forward(leaf)
        grads = torch.autograd.grad((out * upstream).sum(), [leaf, *params], allow_unused=True)
    return out.detach(), [None if g is None else g.detach() for g in grads]


def law_tol(ctx: Context) -> float:
    """:func:`hcspec.conformance.rules.law` for the run's effective dtype."""
    return rules.law(ctx.precision.output)


def flat_jacobian(residual: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
    """The Jacobian of the flat ``residual`` (``[m]``, built with autograd from ``params``)
    w.r.t. every parameter, flattened and concatenated in order: ``[m, Σ p.numel()]`` float64
    CPU, zeros for a parameter an entry does not depend on. One backward per entry, the graph
    kept. The matrix of a least-norm Gauss–Newton step of the steering properties (its update
    is :func:`subtract_flat_step`)."""
    rows = []
    for r in residual:
        grads = torch.autograd.grad(r, params, retain_graph=True, allow_unused=True)
        rows.append(torch.cat([(torch.zeros_like(p) if g is None else g).flatten()
                               for p, g in zip(params, grads, strict=True)]))
    return f64(torch.stack(rows))


def subtract_flat_step(params: Sequence[torch.Tensor], step: torch.Tensor) -> None:
    """``p -= step[slice of p]`` for each of ``params`` in order, without autograd: ``step``
    is one flat vector over all of them (``[Σ p.numel()]``, any dtype/device; each slice is
    cast to its parameter's). The update of a least-norm Gauss–Newton step of the steering
    properties."""
    with torch.no_grad():
        offset = 0
        for p in params:
            size = p.numel()
            p.sub_(step[offset:offset + size].view_as(p).to(dtype=p.dtype, device=p.device))
            offset += size
