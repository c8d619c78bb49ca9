"""Law family: ``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` per token (HC Eq. 3–5, mHC Eq. 3),
against the reported weights, against black-box probed weights, and reported ≡ probed.

The spec's closed form (:func:`spec.numeric.forward`) computes the expected output; the
theorem ``layout.paper_rows`` proves it equals the papers' matrix form.
"""

from __future__ import annotations

import dataclasses

import torch
from hypothesis import strategies as st

from conformance import tolerances
from conformance.properties.base import Context, Property, f64
from conformance.properties.common import (
    branch64,
    expected_output,
    law_tol,
    standard_examples,
    standard_strategy,
)
from conformance.protocol import KINDS, WEIGHTS
from conformance.strategies import Case
from spec import numeric

ALL = frozenset(KINDS)
BASE = ("shape.output", "shape.branch_once")


def check_reported(ctx: Context, case: Case) -> None:
    """Output equals the law evaluated with the impl's own ``weights(x)``; the branch received
    the declared input ``h_preᵀ X`` (or its declared norm)."""
    impl = ctx.make(case)
    x = ctx.state(case)
    h_pre, h_post, H_res = (f64(w) for w in ctx.weights(impl, x))
    branch = ctx.branch(case)
    out = ctx.forward(impl, x, branch)
    want, inp, scale = expected_output(ctx, case, x, h_pre, h_post, H_res)
    tol = law_tol(ctx)
    ctx.expect("branch input vs h_preᵀX from weights(x)",
               tolerances.scaled_error(branch.inputs[0], inp), tol,
               f"declared branch input: {ctx.conventions.branch_input}")
    ctx.expect("X' vs H_res X + h_post F(h_preᵀX)ᵀ with weights(x)",
               tolerances.scaled_error(out, want, scale), tol)


def check_probed(ctx: Context, case: Case) -> None:
    """Black-box: ``F ≡ 0`` gives a linear mix ``H_res X``, a constant branch writes
    ``h_post cᵀ``, the branch reads ``h_preᵀ X``, the identity branch is consistent with both,
    and the case's branch gives the law with these probed weights."""
    impl = ctx.make(case)
    x = ctx.state(case)
    probed = ctx.probe(impl, x, case)
    tol = law_tol(ctx)
    for name, what in (
        ("mix", "F ≡ 0: X'(0) is H_res X for some H_res (X'(0) − X'(0) X⁺ X)"),
        ("write", "F ≡ c: X'(c) − X'(0) = h_post cᵀ"),
        ("read", "branch input = h_preᵀ X for some h_pre"),
        ("identity", "F = id: X'(id) − X'(0) = h_post x_inᵀ"),
    ):
        if name in probed.residuals:
            ctx.expect(f"probe {what}", probed.residuals[name], tol)
    branch = ctx.branch(case)
    out = ctx.forward(impl, x, branch)
    if probed.h_pre is not None:
        want, _, scale = expected_output(ctx, case, x, probed.h_pre, probed.h_post, probed.H_res)
    else:  # the branch input is a declared norm of x_in: use what the branch received
        z = branch64(ctx, case)(f64(branch.inputs[0]))
        want = torch.from_numpy(numeric.forward(
            f64(x).numpy(), probed.h_post.numpy(), probed.H_res.numpy(), z.numpy()))
        scale = max(float(f64(x).abs().max()), float(want.abs().max()))
    ctx.expect(f"X' ({case.branch} branch) vs the law with probed weights",
               tolerances.scaled_error(out, want, scale), tol)


def check_reported_matches_probed(ctx: Context, case: Case) -> None:
    """``weights(x)`` equals the weights read through the branch."""
    impl = ctx.make(case)
    x = ctx.state(case)
    reported = [f64(w) for w in ctx.weights(impl, x)]
    probed = ctx.probe(impl, x, case)
    tol = law_tol(ctx) * max(1, case.n)
    pairs = [("h_post", reported[1], probed.h_post), ("H_res", reported[2], probed.H_res)]
    if probed.h_pre is not None:
        pairs.insert(0, ("h_pre", reported[0], probed.h_pre))
    for name, rep, prb in pairs:
        ctx.expect(f"reported {name} vs probed {name}", tolerances.scaled_error(rep, prb), tol,
                   f"max |reported| {float(rep.abs().max()):.3g}")


def check_token_mixing(ctx: Context, case: Case) -> None:
    """With a branch that mixes tokens (a causal running mean), the branch sees the whole
    ``[B, T, d]`` sequence of ``x_in`` and the law holds with probed weights."""
    check_probed(ctx, dataclasses.replace(case, branch="token_mixing"))


def _examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx)


def _strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, branches=("mlp", "linear", "identity", "constant"))


def _mixing_examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx, branch="token_mixing", min_tokens=2)


def _mixing_strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, branches=("token_mixing",), min_tokens=2)


def _reported_examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx, d_more_than_n=False)


def _reported_strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, d_more_than_n=False,
                             branches=("mlp", "linear", "identity", "constant"))


PROPERTIES = [
    Property("law.reported", "law",
             "X' = H_res X + h_post F(h_preᵀX)ᵀ per token with the impl's reported weights",
             "layout.paper_rows", frozenset({WEIGHTS}), ALL, check_reported,
             _reported_examples, _reported_strategy, prerequisites=(*BASE, "shape.weights")),
    Property("law.probed", "law",
             "black-box probes (F ≡ 0, F ≡ c, F = id, X⁺) give weights under which the law holds",
             "layout.paper_rows", frozenset(), ALL, check_probed, _examples, _strategy,
             prerequisites=BASE),
    Property("law.reported_matches_probed", "law",
             "weights(x) equals the weights read through the branch",
             "layout.paper_rows", frozenset({WEIGHTS}), ALL, check_reported_matches_probed,
             _examples, _strategy, prerequisites=(*BASE, "shape.weights")),
    Property("law.token_mixing_branch", "law",
             "a token-mixing branch receives the whole [B,T,d] sequence and the law holds",
             "layout.paper_rows", frozenset(), ALL, check_token_mixing, _mixing_examples,
             _mixing_strategy, prerequisites=(*BASE, "law.probed")),
]
