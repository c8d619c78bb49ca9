"""The cases a property runs: the standard explicit examples, the standard hypothesis strategy
for a profile, :class:`Cases`, the declaration of how a property departs from them, and a case
resized to a part of its state."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from hypothesis import strategies as st

from hcspec.conformance import strategies
from hcspec.conformance.strategies import Case

if TYPE_CHECKING:
    from hcspec.conformance.properties.base import Context


def shift(ctx: Context, cases: Sequence[Case]) -> list[Case]:
    """The cases with the run seed added to their seeds."""
    return [dataclasses.replace(c, seed=c.seed + ctx.seed) for c in cases]


def resized(case: Case, x: torch.Tensor) -> Case:
    """``case`` with its shape ``(B, T, n, d)`` set to that of the state ``x [B, T, n, d]``
    and every other field (layer index, seed, scales, branch) kept: the case of a sub-batch,
    a slice of tokens or a decode step cut from the case's state."""
    b, t, n, d = x.shape
    return dataclasses.replace(case, batch=b, tokens=t, n=n, d=d)


def standard_examples(
    ctx: Context, *, at_init: bool = False, min_n: int = 1, d_more_than_n: bool = True,
    branch: str = "mlp", min_batch: int = 1, min_tokens: int = 1,
) -> list[Case]:
    """The explicit examples replayed before hypothesis explores: the canonical case at init
    (B=2, T=3, n=4, d=8), the same perturbed at another layer index, other expansion rates
    (including n = 1 when allowed), other magnitudes, and the spec's worked case (n = 2,
    d = 1) where ``d ≤ n`` is allowed. ``at_init`` keeps every case at init."""
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
        if at_init:
            case = dataclasses.replace(case, perturb=0.0)
        case = dataclasses.replace(
            case, batch=max(case.batch, min_batch), tokens=max(case.tokens, min_tokens)
        )
        out.append(case)
    return shift(ctx, out)


SCALE_HEADROOM = 64.0
"""An extreme state magnitude ``s`` is drawn only where ``64·s`` is finite in the run's
effective dtype: the Gaussian entries reach about 5·s and the output ``H_res X + h_post F`` a
few times the state, so a correct impl of that precision returns finite values. float16
(largest 65504) keeps 1e3 and drops 1e6, whose state a float16 output cannot hold: a correct
float16 target returned inf there and failed ``shape.output``."""


def representable_scales(ctx: Context, scales: Sequence[float]) -> tuple[float, ...]:
    """The state magnitudes of ``scales`` whose states (with :data:`SCALE_HEADROOM`) a correct
    impl of the run's effective dtype (:attr:`Context.tol_dtype`) can return finite."""
    largest = torch.finfo(ctx.tol_dtype).max
    return tuple(s for s in scales if s * SCALE_HEADROOM <= largest)


def standard_strategy(
    ctx: Context, *, at_init: bool = False, min_n: int = 1, d_more_than_n: bool = True,
    branches: Sequence[str] = strategies.TOKEN_WISE_BRANCHES, min_batch: int = 1,
    min_tokens: int = 1, perturbations: Sequence[float] | None = None,
    param_scales: Sequence[float] = (1.0,), extreme_scales: bool = True,
) -> st.SearchStrategy[Case]:
    """Cases bounded by the profile; perturbed unless ``at_init``; extreme magnitudes in
    profiles that ask for them (and when ``extreme_scales``), those the run's effective dtype
    can hold (:func:`representable_scales`)."""
    p = ctx.profile
    scales = strategies.NORMAL_SCALES
    if p.extreme and extreme_scales:
        scales = scales + representable_scales(ctx, strategies.EXTREME_SCALES)
    if perturbations is None:
        perturbations = (0.0,) if at_init else strategies.PERTURBATIONS
    base = strategies.cases(
        max_batch=max(p.max_batch, min_batch), max_tokens=max(p.max_tokens, min_tokens),
        min_n=min_n, max_n=max(p.max_n, min_n), max_d=p.max_d, d_more_than_n=d_more_than_n,
        min_batch=min_batch, branches=branches, perturbations=perturbations, scales=scales,
        param_scales=param_scales,
    )
    return base.map(lambda c: dataclasses.replace(
        c, tokens=max(c.tokens, min_tokens), seed=c.seed + ctx.seed))


@dataclass(frozen=True, kw_only=True)
class Cases:
    """How a property's standard examples and strategy depart from the defaults (a property
    declares only what differs).

    Attributes:
        d_more_than_n: only shapes with ``d > n`` (what probing ``H_res`` through the
            pseudo-inverse needs).
        min_n, min_batch, min_tokens: lower bounds of the shapes.
        branch: the explicit examples' branch.
        branches: the branches hypothesis draws.
        at_init: every case at the factory's init (no perturbation).
        perturbations: the perturbation stds hypothesis draws (default: the standard ones,
            or none at init).
        param_scales: the parameter scales hypothesis draws.
        extreme_scales: also draw extreme state magnitudes in the profiles that ask for them.
    """

    d_more_than_n: bool = False
    min_n: int = 1
    min_batch: int = 1
    min_tokens: int = 1
    branch: str = "mlp"
    branches: tuple[str, ...] = strategies.TOKEN_WISE_BRANCHES
    at_init: bool = False
    perturbations: tuple[float, ...] | None = None
    param_scales: tuple[float, ...] = (1.0,)
    extreme_scales: bool = True

    def admits(self, case: Case) -> str | None:
        """Why ``case`` lies outside these bounds (the property's domain), or None when it lies
        inside. The shrinker (:mod:`hcspec.conformance.shrink`) only tries cases inside: a
        counterexample outside the domain would show a failure the property does not claim.

        The bounds: ``n ≥ min_n``, ``d > n`` when ``d_more_than_n``, ``batch ≥ min_batch``,
        ``tokens ≥ min_tokens``, the branch one of ``branches`` or the examples' ``branch``,
        no perturbation when ``at_init``, ``perturb`` at least the smallest declared
        perturbation, ``param_scale`` at least the smallest declared parameter scale.
        """
        if case.n < self.min_n:
            return f"n = {case.n} < {self.min_n}"
        if self.d_more_than_n and case.d <= case.n:
            return f"d = {case.d} ≤ n = {case.n} (the property needs d > n)"
        if case.batch < self.min_batch:
            return f"batch = {case.batch} < {self.min_batch}"
        if case.tokens < self.min_tokens:
            return f"tokens = {case.tokens} < {self.min_tokens}"
        if case.branch not in (*self.branches, self.branch):
            return f"branch {case.branch!r} not one of {(*self.branches, self.branch)}"
        if self.at_init and case.perturb != 0.0:
            return f"perturb = {case.perturb:g} (the property runs at init)"
        if self.perturbations and case.perturb < min(self.perturbations):
            return f"perturb = {case.perturb:g} < {min(self.perturbations):g}"
        if case.param_scale < min(self.param_scales):
            return f"param_scale = {case.param_scale:g} < {min(self.param_scales):g}"
        return None

    def examples(self, ctx: Context) -> list[Case]:
        """:func:`standard_examples` with these bounds."""
        return standard_examples(
            ctx, at_init=self.at_init, min_n=self.min_n, d_more_than_n=self.d_more_than_n,
            branch=self.branch, min_batch=self.min_batch, min_tokens=self.min_tokens)

    def strategy(self, ctx: Context) -> st.SearchStrategy[Case]:
        """:func:`standard_strategy` with these bounds."""
        return standard_strategy(
            ctx, at_init=self.at_init, min_n=self.min_n, d_more_than_n=self.d_more_than_n,
            branches=self.branches, min_batch=self.min_batch, min_tokens=self.min_tokens,
            perturbations=self.perturbations, param_scales=self.param_scales,
            extreme_scales=self.extreme_scales)
