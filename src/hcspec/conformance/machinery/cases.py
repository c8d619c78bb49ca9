"""The cases a property runs: :class:`Case` (one example, every tensor generated from its
numbers) and :class:`Cases`, the one declaration of a property's case bounds, from which the
standard explicit examples (:meth:`Cases.examples`), the standard hypothesis strategy for a
profile (:meth:`Cases.strategy`) and the shrinker's domain (:meth:`Cases.admits`) all follow:
a new bound is one field of :class:`Cases`. Also a case resized to a part of its state."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from hypothesis import strategies as st

from hcspec.conformance import strategies
from hcspec.conformance.strategies import (
    Case,
)

if TYPE_CHECKING:
    from hcspec.conformance.machinery.base import Context


def shift(ctx: Context, cases: Sequence[Case]) -> list[Case]:
    """The cases with the run seed added to their seeds."""
    return [dataclasses.replace(c, seed=c.seed + ctx.seed) for c in cases]


def resized(case: Case, x: torch.Tensor) -> Case:
    """``case`` with its shape ``(B, T, n, d)`` set to that of the state ``x [B, T, n, d]``
    and every other field (layer index, seed, scales, branch) kept: the case of a sub-batch,
    a slice of tokens or a decode step cut from the case's state."""
    b, t, n, d = x.shape
    return dataclasses.replace(case, batch=b, tokens=t, n=n, d=d)


STANDARD_ROWS: tuple[Case, ...] = (
    Case(2, 3, 4, 8, layer_index=0, seed=0, perturb=0.0),
    Case(2, 3, 4, 8, layer_index=5, seed=1, perturb=0.3),
    Case(3, 2, 2, 5, layer_index=3, seed=2, scale=10.0, perturb=0.1),
    Case(1, 4, 3, 7, layer_index=2, seed=3, perturb=1.0),
    Case(2, 1, 1, 3, layer_index=1, seed=4, scale=0.1, perturb=0.3),
    # the spec's worked case (docs/derivations): two streams, one feature (d ≤ n: only for
    # properties that do not probe H_res through the pseudo-inverse)
    Case(1, 1, 2, 1, layer_index=0, seed=5, perturb=0.3),
)
"""The standard explicit examples before a property's bounds: the canonical case at init
(B=2, T=3, n=4, d=8), the same perturbed at another layer index, other expansion rates
(including n = 1), other magnitudes, and the spec's worked case (n = 2, d = 1)."""


SCALE_HEADROOM = 64.0
"""An extreme state magnitude ``s`` is drawn only where ``64·s`` is finite in the run's
effective dtype: the Gaussian entries reach about 5·s and the output ``H_res X + h_post F`` a
few times the state, so a correct impl of that precision returns finite values. float16
(largest 65504) keeps 1e3 and drops 1e6, whose state a float16 output cannot hold: a correct
float16 target returned inf there and failed ``shape.output``."""


SUBNORMAL_HEADROOM = 8.0
"""An extreme state magnitude ``s`` is drawn only where ``s ≥ 8 · tiny`` (the dtype's smallest
normal): below the normal range the spacing of the values is ``tiny · eps``, so a state of
scale ``s`` is rounded by ``tiny · eps / s`` relative to its size, at most eps/8 here. float16
(tiny 6.1e-5) keeps 1e-3 and drops 1e-6, whose state it holds only to about 6% (a correct
float16 target's ‖X'‖/‖X‖ − 1 was 0.092 with F ≡ 0 there, against 0.0078 allowed)."""


def representable_scales(ctx: Context, scales: Sequence[float]) -> tuple[float, ...]:
    """The state magnitudes of ``scales`` whose states a correct impl of the run's effective
    dtype (``ctx.precision.output``) can return finite (with :data:`SCALE_HEADROOM`) and hold
    to its relative precision, above the subnormals (:data:`SUBNORMAL_HEADROOM`)."""
    info = torch.finfo(ctx.precision.output)
    return tuple(s for s in scales
                 if s * SCALE_HEADROOM <= info.max and s >= SUBNORMAL_HEADROOM * info.tiny)


SIZE_TEMPLATE = Case(2, 3, 4, 8, layer_index=5, seed=11, perturb=0.3)
"""The case the profile's ``size_rows`` resize (perturbed off the init, where symmetric
parameters hide an orientation)."""


def oracle_n_values(ctx: Context, min_n: int = 1) -> tuple[int, ...]:
    """The expansion rates an oracle-comparing property draws: ``min_n`` to the profile's
    ``oracle_max_n``, those the target declares (``supported_expansion_rates``; all when it
    declares none). Empty when the declaration excludes every one."""
    rates = ctx.conventions.supported_expansion_rates
    return tuple(n for n in range(min_n, max(ctx.profile.oracle_max_n, min_n) + 1)
                 if rates is None or n in rates)


def size_rows(ctx: Context, template: Case, *, min_n: int = 1,
              d_more_than_n: bool = False) -> list[Case]:
    """``template`` resized to each ``(n, d)`` of the profile's ``size_rows`` (``d`` raised
    past ``n`` when ``d_more_than_n``), the rows of ``n < min_n`` and those the target's
    declared sizes exclude (``Conventions.unsupported_size``) left out, the run seed added
    (once per row; ``template.seed`` plus the row's position)."""
    out = []
    for i, (n, d) in enumerate(ctx.profile.size_rows):
        d = max(d, n + 1) if d_more_than_n else d
        if n < min_n or ctx.conventions.unsupported_size(n, d, parameters=False) is not None:
            continue  # a row past max_parameters stays: the builder leaves it out, counted
        out.append(dataclasses.replace(template, n=n, d=d, seed=template.seed + i + ctx.seed,
                                       layer_index=template.layer_index + i))
    return out


@dataclass(frozen=True, kw_only=True)
class Cases:
    """How a property's cases depart from the defaults (a property declares only what differs):
    the one source of its explicit examples (:meth:`examples`), its hypothesis strategy
    (:meth:`strategy`) and its domain (:meth:`admits`).

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
        oracle: the property compares with an oracle (a closed form, the published formulas,
            finite differences): it draws the profile's spread of sizes
            (:attr:`hcspec.conformance.profiles.Profile.oracle_max_n`, ``ragged_d``) within the
            target's declared sizes, and its standard examples add the profile's
            ``size_rows`` (:func:`size_rows`).
        narrower: why a property of an oracle-comparing family does not draw that spread
            (``tests/conformance/test_sizes.py`` requires ``oracle`` or this reason).
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
    oracle: bool = False
    narrower: str = ""

    def admits(self, case: Case) -> str | None:
        """Why ``case`` lies outside these bounds (the property's domain), or None when it lies
        inside. The shrinker (:mod:`hcspec.conformance.run.shrink`) only tries cases inside: a
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
        """The explicit examples replayed before hypothesis explores: :data:`STANDARD_ROWS`
        with the examples' ``branch``, without the rows of ``n < min_n`` (and of ``d ≤ n``
        when ``d_more_than_n``), at init when ``at_init``, the batch and tokens raised to
        their minima, the run seed added."""
        out = []
        for row in STANDARD_ROWS:
            if row.n < self.min_n or (self.d_more_than_n and row.d <= row.n):
                continue
            out.append(dataclasses.replace(
                row, branch=self.branch, perturb=0.0 if self.at_init else row.perturb,
                batch=max(row.batch, self.min_batch), tokens=max(row.tokens, self.min_tokens)))
        out = shift(ctx, out)
        if self.oracle:
            out += size_rows(ctx, dataclasses.replace(
                SIZE_TEMPLATE, branch=self.branch, perturb=0.0 if self.at_init else 0.3,
                batch=max(SIZE_TEMPLATE.batch, self.min_batch),
                tokens=max(SIZE_TEMPLATE.tokens, self.min_tokens)),
                min_n=self.min_n, d_more_than_n=self.d_more_than_n)
        return out

    def strategy(self, ctx: Context) -> st.SearchStrategy[Case]:
        """Cases bounded by the profile and by these bounds: perturbed unless ``at_init``
        (``perturbations`` when given), the ``branches`` and ``param_scales``, extreme
        magnitudes in profiles that ask for them (and when ``extreme_scales``), the run seed
        added."""
        p = ctx.profile
        scales = strategies.NORMAL_SCALES
        if p.extreme and self.extreme_scales:
            scales = scales + representable_scales(ctx, strategies.EXTREME_SCALES)
        perturbations = self.perturbations
        if perturbations is None:
            perturbations = (0.0,) if self.at_init else strategies.PERTURBATIONS
        min_tokens = self.min_tokens
        n_values: tuple[int, ...] | None = None
        ragged: tuple[int, ...] = ()
        if self.oracle:
            n_values, ragged = oracle_n_values(ctx, self.min_n) or None, p.ragged_d
        base = strategies.cases(
            max_batch=max(p.max_batch, self.min_batch),
            max_tokens=max(p.max_tokens, min_tokens), min_n=self.min_n,
            max_n=max(p.max_n, self.min_n), max_d=p.max_d, d_more_than_n=self.d_more_than_n,
            min_batch=self.min_batch, branches=self.branches, perturbations=perturbations,
            scales=scales, param_scales=self.param_scales, n_values=n_values, ragged_d=ragged,
        )
        return base.map(lambda c: dataclasses.replace(
            c, tokens=max(c.tokens, min_tokens), seed=c.seed + ctx.seed))
