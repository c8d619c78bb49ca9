"""Declared-conventions family: what an adapter declares
(:class:`hcspec.conformance.protocol.Conventions`)
holds — the branch receives the declared input, ``expand`` replicates (HC: ``X₀ = 1_n h₀ᵀ``),
``reduce`` sums or averages the streams as declared (HC: ``h_L = 1ᵀ X_L``), and every impl the
factory builds declares the same conventions (the report shows one declaration).
"""

from __future__ import annotations

import torch

from hcspec.conformance import rules, salts, tolerances
from hcspec.conformance.properties.base import Context, Inconclusive, f64
from hcspec.conformance.properties.cases import Cases
from hcspec.conformance.properties.declaration import declare
from hcspec.conformance.properties.requirements import capability
from hcspec.conformance.protocol import EXPAND, REDUCE, conventions_of
from hcspec.conformance.strategies import Case, gaussian

BASE = ("shape.output",)
NORM_SLACK = 1e-2


@declare(
    "conventions.declaration",
    statement="every impl the factory builds declares the same conventions",
    prerequisites=BASE)
def check_declaration(ctx: Context, case: Case) -> None:
    """Every impl declares the conventions of the first one the run inspected."""
    impl = ctx.build.make(case)
    try:
        declared = conventions_of(impl)
    except TypeError as exc:
        ctx.record.require(False, str(exc))
        raise
    ctx.record.require(declared == ctx.conventions,
                       f"impl for n={case.n}, d={case.d}, layer_index={case.layer_index} declares "
                       f"{declared}, the run's first impl declared {ctx.conventions}")


@declare(
    "conventions.branch_input",
    statement="the branch receives the declared input (x_in = h_preᵀX, or its declared norm)",
    theorems=("layout.paper_rows",), tolerance=rules.LAW,
    cases=Cases(d_more_than_n=True, extreme_scales=False),
    prerequisites=(*BASE, "shape.branch_once"))
def check_branch_input(ctx: Context, case: Case) -> None:
    """The branch receives the declared input: ``x_in = h_preᵀ X`` lies in the row space of X;
    a declared RMS norm has unit RMS, a declared LayerNorm zero mean and unit variance."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    branch = ctx.inputs.branch(case)
    ctx.observe.forward(impl, x, branch)
    got = f64(branch.inputs[0])
    X = f64(x)
    kind = ctx.conventions.branch_input
    if kind == "x_in":
        h = (got.unsqueeze(-2) @ torch.linalg.pinv(X)).squeeze(-2)
        rebuilt = (h.unsqueeze(-2) @ X).squeeze(-2)
        ctx.record.expect("branch input minus its projection on the streams (x_in = h_preᵀX)",
                          tolerances.scaled_error(rebuilt, got))
        return
    centred = got - got.mean(-1, keepdim=True) if kind == "layer_norm" else got
    ms = centred.pow(2).mean(-1)
    # v = u / sqrt(mean(u²) + eps) has mean(v²) = 1 − eps / (mean(u²) + eps): at most 1, and
    # within NORM_SLACK of 1 unless mean(u²) < eps / NORM_SLACK (not at the kit's magnitudes).
    ctx.record.expect(f"mean square of the branch input − 1 (declared {kind})",
                      max(float((ms - 1).max()), float((1 - ms).max()) - NORM_SLACK, 0.0))
    if kind == "layer_norm":
        ctx.record.expect("mean of the branch input (declared layer_norm)",
                          float(got.mean(-1).abs().max()))


@declare(
    "conventions.expand_replicates", statement="expand(h) puts h on every stream (X₀ = 1_n hᵀ)",
    theorems=("init.static_prenorm",), requires=(capability(EXPAND),), tolerance=rules.LAW,
    prerequisites=("shape.expand",))
def check_expand(ctx: Context, case: Case) -> None:
    """``expand(h)`` puts ``h`` on every stream: ``X₀ = 1_n hᵀ`` (HC §2)."""
    impl = ctx.build.make(case)
    h = gaussian((case.batch, case.tokens, case.d), case.seed, salts.EXPAND_INPUT.at(),
                 ctx.dtype, ctx.device)
    out = ctx.observe.expand(impl, h)
    ctx.record.require(isinstance(out, torch.Tensor),
                       f"expand(h) returned {type(out).__name__}, expected a tensor")
    assert isinstance(out, torch.Tensor)
    want = f64(h).unsqueeze(-2).expand(case.batch, case.tokens, case.n, case.d)
    ctx.record.expect("expand(h) vs 1_n hᵀ", tolerances.scaled_error(out, want))


@declare(
    "conventions.reduce_scale",
    statement="reduce(X) is the declared sum (1ᵀX) or mean, or a learned mix wᵀX, of the streams",
    theorems=("init.static_prenorm",), requires=(capability(REDUCE),), tolerance=rules.LAW,
    prerequisites=("shape.reduce",))
def check_reduce(ctx: Context, case: Case) -> None:
    """``reduce(X)`` is ``1ᵀ X`` (declared ``sum``) or ``1ᵀ X / n`` (declared ``mean``). A
    declared ``learned`` head (input-dependent weights, DeepSeek-V4's HyperHead) has no closed
    form; what every such head satisfies is checked instead: ``reduce(X) = wᵀX`` for some
    weights ``w`` per token, i.e. it lies in the span of the token's n streams. That is shown
    only where the streams do not span every vector (``d > n``); a case with ``d ≤ n`` is
    inconclusive for a learned head."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    out = ctx.observe.reduce(impl, x)
    ctx.record.require(isinstance(out, torch.Tensor),
                       f"reduce(x) returned {type(out).__name__}, expected a tensor")
    assert isinstance(out, torch.Tensor)
    X = f64(x)
    if ctx.conventions.reduce == "learned":
        if case.d <= case.n:
            raise Inconclusive(
                f"declared reduce='learned': with d = {case.d} ≤ n = {case.n} the streams span "
                "every vector, so no output could fail 'a combination of the streams'")
        got = f64(out)
        w = (got.unsqueeze(-2) @ torch.linalg.pinv(X)).squeeze(-2)
        rebuilt = (w.unsqueeze(-2) @ X).squeeze(-2)
        ctx.record.expect("reduce(X) minus its projection on the streams (declared learned "
                          "head: reduce(X) = wᵀX)",
                          tolerances.scaled_error(rebuilt, got, float(X.abs().sum(-2).max())))
        return
    want = X.sum(-2) if ctx.conventions.reduce == "sum" else X.mean(-2)
    ctx.record.expect(f"reduce(X) vs the declared {ctx.conventions.reduce} over streams",
               tolerances.scaled_error(out, want, float(X.abs().sum(-2).max())))
