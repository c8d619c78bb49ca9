"""Independence family: no mixing across batch elements (any branch) or across tokens (a
token-wise branch). This is what catches streams folded into the batch (``[B·n, T, d]``) with
the wrong reshape order, and weights normalised over the wrong axes.

The connection is per token: ``X'_t`` depends on ``X_t`` only (the branch may mix tokens; the
connection never does). Spec: ``forward.shapes`` (per-token form).
"""

from __future__ import annotations

from hcspec.conformance.author import (
    Case,
    Cases,
    Context,
    declare,
    metrics,
    rules,
    salts,
)

BASE = ("shape.output", "shape.branch_once")


def _batch_examples(ctx: Context) -> list[Case]:
    cases = Cases(min_batch=2).examples(ctx)
    cases += Cases(min_batch=2, branch="token_mixing").examples(ctx)[:2]
    return cases


@declare(
    "independence.batch",
    statement="a batch element's output does not depend on the other batch elements",
    theorems=("forward.shapes",), tolerance=rules.SELF_CONSISTENCY,
    examples=_batch_examples,
    cases=Cases(min_batch=2, branches=("mlp", "token_mixing", "identity")),
    prerequisites=BASE)
def check_batch(ctx: Context, case: Case) -> None:
    """Every batch element's output is unchanged when the other elements change (the elements
    of one parity kept, the others redrawn, then the reverse: every element kept once), and
    equals the output of running that element alone."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    out = ctx.observe.forward(impl, x, ctx.inputs.branch(case, record=False))
    other = ctx.inputs.state(case, salt=salts.OTHER_BATCH_STATE)
    for kept in _parities(case.batch):
        mixed = other.clone()
        mixed[kept] = x[kept]
        out_other = ctx.observe.forward(impl, mixed, ctx.inputs.branch(case, record=False))
        for keep in kept:
            scale = float(out[keep].detach().abs().max().cpu())
            ctx.record.expect(f"output of batch element {keep} after changing the other elements",
                              metrics.scaled_error(out_other[keep], out[keep], scale))
    for keep in range(case.batch):
        alone = ctx.observe.forward(impl, x[keep:keep + 1],
                                    ctx.inputs.branch(case, record=False))
        scale = float(out[keep].detach().abs().max().cpu())
        ctx.record.expect(f"output of batch element {keep} run alone vs in the batch",
                          metrics.scaled_error(alone[0], out[keep], scale))


@declare(
    "independence.token",
    statement="with a token-wise branch, a token's output does not depend on the other tokens",
    theorems=("forward.shapes",), tolerance=rules.SELF_CONSISTENCY, cases=Cases(min_tokens=2),
    prerequisites=BASE)
def check_token(ctx: Context, case: Case) -> None:
    """With a token-wise branch, every token's output is unchanged when the other tokens
    change (the tokens of one parity kept, the others redrawn, then the reverse: every token
    kept once, so an odd last token too), and equals the output of running that token alone."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    out = ctx.observe.forward(impl, x, ctx.inputs.branch(case, record=False))
    other = ctx.inputs.state(case, salt=salts.OTHER_TOKENS_STATE)
    for kept in _parities(case.tokens):
        mixed = other.clone()
        mixed[:, kept] = x[:, kept]
        out_other = ctx.observe.forward(impl, mixed, ctx.inputs.branch(case, record=False))
        for keep in kept:
            scale = float(out[:, keep].detach().abs().max().cpu())
            ctx.record.expect(f"output of token {keep} after changing the other tokens",
                              metrics.scaled_error(out_other[:, keep], out[:, keep], scale))
    for keep in range(case.tokens):
        alone = ctx.observe.forward(impl, x[:, keep:keep + 1].contiguous(),
                                    ctx.inputs.branch(case, record=False))
        scale = float(out[:, keep].detach().abs().max().cpu())
        ctx.record.expect(f"output of token {keep} run alone vs in the sequence",
                          metrics.scaled_error(alone[:, 0], out[:, keep], scale))


def _parities(size: int) -> list[list[int]]:
    """The indices ``0 … size − 1`` split by parity (even, then odd; an empty half left out):
    keeping one half and redrawing the other keeps every index once in two forwards."""
    return [kept for kept in (list(range(0, size, 2)), list(range(1, size, 2))) if kept]
