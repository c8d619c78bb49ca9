"""Shared pieces of the property families: standard explicit examples, the standard
hypothesis strategy for a profile, and float64 re-computation of the branch and the law."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from hypothesis import strategies as st

from hcspec.conformance import strategies, tolerances
from hcspec.conformance.properties.base import Context, f64, np64
from hcspec.conformance.protocol import Branch
from hcspec.conformance.strategies import Case
from hcspec.spec import numeric


def shift(ctx: Context, cases: Sequence[Case]) -> list[Case]:
    """The cases with the run seed added to their seeds."""
    return [dataclasses.replace(c, seed=c.seed + ctx.seed) for c in cases]


def standard_examples(
    ctx: Context, *, about_init: bool = False, min_n: int = 1, d_more_than_n: bool = True,
    branch: str = "mlp", min_batch: int = 1, min_tokens: int = 1,
) -> list[Case]:
    """The explicit examples replayed before hypothesis explores: the canonical case at init
    (B=2, T=3, n=4, d=8), the same perturbed at another layer index, other expansion rates
    (including n = 1 when allowed), other magnitudes, and the spec's worked case (n = 2,
    d = 1) where ``d ≤ n`` is allowed. ``about_init`` keeps every case at init."""
    rows = [
        Case(2, 3, 4, 8, layer_index=0, seed=0, perturb=0.0, branch=branch),
        Case(2, 3, 4, 8, layer_index=5, seed=1, perturb=0.3, branch=branch),
        Case(3, 2, 2, 5, layer_index=3, seed=2, scale=10.0, perturb=0.1, branch=branch),
        Case(1, 4, 3, 7, layer_index=2, seed=3, perturb=1.0, branch=branch),
        Case(2, 1, 1, 3, layer_index=1, seed=4, scale=0.1, perturb=0.3, branch=branch),
        # the spec's worked case (docs/derivations): two streams, one feature (d ≤ n: only
        # for properties that do not probe H_res through the pseudo-inverse)
        Case(1, 1, 2, 1, layer_index=0, seed=5, perturb=0.3, branch=branch),
    ]
    out = []
    for case in rows:
        if case.n < min_n:
            continue
        if d_more_than_n and case.d <= case.n:
            continue
        if about_init:
            case = dataclasses.replace(case, perturb=0.0)
        case = dataclasses.replace(
            case, batch=max(case.batch, min_batch), tokens=max(case.tokens, min_tokens)
        )
        out.append(case)
    return shift(ctx, out)


def standard_strategy(
    ctx: Context, *, about_init: bool = False, min_n: int = 1, d_more_than_n: bool = True,
    branches: Sequence[str] = strategies.TOKEN_WISE_BRANCHES, min_batch: int = 1,
    min_tokens: int = 1, perturbations: Sequence[float] | None = None,
    param_scales: Sequence[float] = (1.0,), extreme_scales: bool = True,
) -> st.SearchStrategy[Case]:
    """Cases bounded by the profile; perturbed unless ``about_init``; extreme magnitudes in
    profiles that ask for them (and when ``extreme_scales``)."""
    p = ctx.profile
    scales = strategies.NORMAL_SCALES
    if p.extreme and extreme_scales:
        scales = scales + strategies.EXTREME_SCALES
    if perturbations is None:
        perturbations = (0.0,) if about_init else strategies.PERTURBATIONS
    base = strategies.cases(
        max_batch=max(p.max_batch, min_batch), max_tokens=max(p.max_tokens, min_tokens),
        min_n=min_n, max_n=max(p.max_n, min_n), max_d=p.max_d, d_more_than_n=d_more_than_n,
        min_batch=min_batch, branches=branches, perturbations=perturbations, scales=scales,
        param_scales=param_scales,
    )
    return base.map(lambda c: dataclasses.replace(
        c, tokens=max(c.tokens, min_tokens), seed=c.seed + ctx.seed))


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
    inp = ctx.branch_input(x_in)
    z = branch64(ctx, case, branch_name)(inp)
    want = torch.from_numpy(numeric.forward(np64(X), np64(h_post), np64(H_res), np64(z)))
    scale = max(float(f64(X).abs().max()), float(want.abs().max()),
                float(f64(h_post).abs().max() * z.abs().max()))
    return want, inp, scale


def law_tol(ctx: Context) -> float:
    """:func:`hcspec.conformance.tolerances.law` for the run's effective dtype."""
    return tolerances.law(ctx.tol_dtype)
