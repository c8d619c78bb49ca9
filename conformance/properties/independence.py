"""Independence family: no mixing across batch elements (any branch) or across tokens (a
token-wise branch). This is what catches streams folded into the batch (``[B·n, T, d]``) with
the wrong reshape order, and weights normalised over the wrong axes.

Source: DESIGN.md §1 — the connection is per token: ``X'_t`` depends on ``X_t`` only (the
branch may mix tokens; the connection never does). Spec: ``forward.shapes`` (per-token form).
"""

from __future__ import annotations

from hypothesis import strategies as st

from hcspec.conformance import tolerances
from hcspec.conformance.properties.base import Context, Property
from hcspec.conformance.properties.common import law_tol, standard_examples, standard_strategy
from hcspec.conformance.protocol import KINDS
from hcspec.conformance.strategies import TOKEN_WISE_BRANCHES, Case

ALL = frozenset(KINDS)
BASE = ("shape.output", "shape.branch_once")


def check_batch(ctx: Context, case: Case) -> None:
    """Batch element b's output is unchanged when the other elements change, and equals the
    output of running element b alone."""
    impl = ctx.make(case)
    x = ctx.state(case)
    keep = case.seed % case.batch
    out = ctx.forward(impl, x, ctx.branch(case, record=False))
    other = ctx.state(case, salt=17)
    other[keep] = x[keep]
    out_other = ctx.forward(impl, other, ctx.branch(case, record=False))
    alone = ctx.forward(impl, x[keep:keep + 1], ctx.branch(case, record=False))
    tol = law_tol(ctx)
    scale = float(out[keep].detach().abs().max().cpu())
    ctx.expect(f"output of batch element {keep} after changing the other elements",
               tolerances.scaled_error(out_other[keep], out[keep], scale), tol)
    ctx.expect(f"output of batch element {keep} run alone vs in the batch",
               tolerances.scaled_error(alone[0], out[keep], scale), tol)


def check_token(ctx: Context, case: Case) -> None:
    """With a token-wise branch, token t's output is unchanged when the other tokens change,
    and equals the output of running token t alone."""
    impl = ctx.make(case)
    x = ctx.state(case)
    keep = case.seed % case.tokens
    out = ctx.forward(impl, x, ctx.branch(case, record=False))
    other = ctx.state(case, salt=23)
    other[:, keep] = x[:, keep]
    out_other = ctx.forward(impl, other, ctx.branch(case, record=False))
    alone = ctx.forward(impl, x[:, keep:keep + 1].contiguous(), ctx.branch(case, record=False))
    tol = law_tol(ctx)
    scale = float(out[:, keep].detach().abs().max().cpu())
    ctx.expect(f"output of token {keep} after changing the other tokens",
               tolerances.scaled_error(out_other[:, keep], out[:, keep], scale), tol)
    ctx.expect(f"output of token {keep} run alone vs in the sequence",
               tolerances.scaled_error(alone[:, 0], out[:, keep], scale), tol)


def _batch_examples(ctx: Context) -> list[Case]:
    cases = standard_examples(ctx, d_more_than_n=False, min_batch=2)
    cases += standard_examples(ctx, d_more_than_n=False, min_batch=2, branch="token_mixing")[:2]
    return cases


def _batch_strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, d_more_than_n=False, min_batch=2,
                             branches=("mlp", "token_mixing", "identity"))


def _token_examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx, d_more_than_n=False, min_tokens=2)


def _token_strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, d_more_than_n=False, min_tokens=2,
                             branches=TOKEN_WISE_BRANCHES)


PROPERTIES = [
    Property("independence.batch", "independence",
             "a batch element's output does not depend on the other batch elements",
             "forward.shapes", frozenset(), ALL, check_batch, _batch_examples, _batch_strategy,
             prerequisites=BASE),
    Property("independence.token", "independence",
             "with a token-wise branch, a token's output does not depend on the other tokens",
             "forward.shapes", frozenset(), ALL, check_token, _token_examples, _token_strategy,
             prerequisites=BASE),
]
