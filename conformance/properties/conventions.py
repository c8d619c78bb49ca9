"""Declared-conventions family: what an adapter declares
(:class:`hcspec.conformance.protocol.Conventions`)
holds — the branch receives the declared input, ``expand`` replicates (HC: ``X₀ = 1_n h₀ᵀ``),
``reduce`` sums or averages the streams as declared (HC: ``h_L = 1ᵀ X_L``), and every impl the
factory builds declares the same conventions (the report shows one declaration).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from hcspec.conformance import tolerances
from hcspec.conformance.properties.base import Context, Property, f64
from hcspec.conformance.properties.common import law_tol, standard_examples, standard_strategy
from hcspec.conformance.protocol import EXPAND, KINDS, REDUCE, conventions_of
from hcspec.conformance.strategies import Case, gaussian

ALL = frozenset(KINDS)
NORM_SLACK = 1e-2


def check_declaration(ctx: Context, case: Case) -> None:
    """Every impl declares the conventions of the first one the run inspected."""
    impl = ctx.make(case)
    try:
        declared = conventions_of(impl)
    except TypeError as exc:
        ctx.require(False, str(exc))
        raise
    ctx.require(declared == ctx.conventions,
                f"impl for n={case.n}, d={case.d}, layer_index={case.layer_index} declares "
                f"{declared}, the run's first impl declared {ctx.conventions}")


def check_branch_input(ctx: Context, case: Case) -> None:
    """The branch receives the declared input: ``x_in = h_preᵀ X`` lies in the row space of X;
    a declared RMS norm has unit RMS, a declared LayerNorm zero mean and unit variance."""
    impl = ctx.make(case)
    x = ctx.state(case)
    branch = ctx.branch(case)
    ctx.forward(impl, x, branch)
    got = f64(branch.inputs[0])
    X = f64(x)
    kind = ctx.conventions.branch_input
    tol = law_tol(ctx)
    if kind == "x_in":
        h = (got.unsqueeze(-2) @ torch.linalg.pinv(X)).squeeze(-2)
        rebuilt = (h.unsqueeze(-2) @ X).squeeze(-2)
        ctx.expect("branch input minus its projection on the streams (x_in = h_preᵀX)",
                   tolerances.scaled_error(rebuilt, got), tol)
        return
    centred = got - got.mean(-1, keepdim=True) if kind == "layer_norm" else got
    ms = centred.pow(2).mean(-1)
    # v = u / sqrt(mean(u²) + eps) has mean(v²) = 1 − eps / (mean(u²) + eps): at most 1, and
    # within NORM_SLACK of 1 unless mean(u²) < eps / NORM_SLACK (not at the kit's magnitudes).
    ctx.expect(f"mean square of the branch input − 1 (declared {kind})",
               max(float((ms - 1).max()), float((1 - ms).max()) - NORM_SLACK, 0.0), tol)
    if kind == "layer_norm":
        ctx.expect("mean of the branch input (declared layer_norm)",
                   float(got.mean(-1).abs().max()), tol)


def check_expand(ctx: Context, case: Case) -> None:
    """``expand(h)`` puts ``h`` on every stream: ``X₀ = 1_n hᵀ`` (HC §2, DESIGN.md §1)."""
    impl = ctx.make(case)
    h = gaussian((case.batch, case.tokens, case.d), case.seed, 11, ctx.dtype, ctx.device)
    out = impl.expand(h)  # type: ignore[attr-defined]
    want = f64(h).unsqueeze(-2).expand(case.batch, case.tokens, case.n, case.d)
    ctx.expect("expand(h) vs 1_n hᵀ", tolerances.scaled_error(out, want), law_tol(ctx))


def check_reduce(ctx: Context, case: Case) -> None:
    """``reduce(X)`` is ``1ᵀ X`` (declared ``sum``) or ``1ᵀ X / n`` (declared ``mean``)."""
    impl = ctx.make(case)
    x = ctx.state(case)
    out = impl.reduce(x)  # type: ignore[attr-defined]
    X = f64(x)
    want = X.sum(-2) if ctx.conventions.reduce == "sum" else X.mean(-2)
    ctx.expect(f"reduce(X) vs the declared {ctx.conventions.reduce} over streams",
               tolerances.scaled_error(out, want, float(X.abs().sum(-2).max())), law_tol(ctx))


def _examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx, d_more_than_n=False)


def _strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, d_more_than_n=False)


def _probe_examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx)


def _probe_strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, extreme_scales=False)


BASE = ("shape.output",)

PROPERTIES = [
    Property("conventions.declaration", "conventions",
             "every impl the factory builds declares the same conventions",
             None, frozenset(), ALL, check_declaration, _examples, _strategy,
             prerequisites=BASE),
    Property("conventions.branch_input", "conventions",
             "the branch receives the declared input (x_in = h_preᵀX, or its declared norm)",
             "layout.paper_rows", frozenset(), ALL, check_branch_input, _probe_examples,
             _probe_strategy, prerequisites=(*BASE, "shape.branch_once")),
    Property("conventions.expand_replicates", "conventions",
             "expand(h) puts h on every stream (X₀ = 1_n hᵀ)",
             "init.static_prenorm", frozenset({EXPAND}), ALL, check_expand, _examples,
             _strategy, prerequisites=("shape.expand",)),
    Property("conventions.reduce_scale", "conventions",
             "reduce(X) is the declared sum (1ᵀX) or mean of the streams",
             "init.static_prenorm", frozenset({REDUCE}), ALL, check_reduce, _examples,
             _strategy, prerequisites=("shape.reduce",)),
]
