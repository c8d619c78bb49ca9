"""Shared pieces of the property families: float64 re-computation of the branch and the law,
and the law's tolerance for the run."""

from __future__ import annotations

import torch

from hcspec.conformance import strategies, tolerances
from hcspec.conformance.properties.base import Context, f64, np64
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


def law_tol(ctx: Context) -> float:
    """:func:`hcspec.conformance.tolerances.law` for the run's effective dtype."""
    return tolerances.law(ctx.tol_dtype)
