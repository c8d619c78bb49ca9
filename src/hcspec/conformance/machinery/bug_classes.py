"""Naming the known bug class behind a failure, in one line, where the failing case's own
figures match its pattern (docs/conformance.md, "Bug classes").

The runner asks :func:`known_bug_class` after a property failed on a case; the checks that can
tell a class from what they already computed (``constraints.h_res_exact_axis``: the exact axis
is the other one; ``constraints.h_post_span``: σ instead of 2σ; …) give it as their failure's
hint themselves (:func:`sums_pattern`, :func:`branch_input_pattern`). A pattern is only named
when the evidence is specific: each test below compares the failing error with the error
under the alternative explanation and names the class only when the alternative removes it.
"""

from __future__ import annotations

import torch

from hcspec.conformance import metrics, rules
from hcspec.conformance.machinery import precision, variant_fit
from hcspec.conformance.machinery.base import Context, f64
from hcspec.conformance.machinery.common import axis_sums, by_exact_axis, expected_output
from hcspec.conformance.protocol import has_weights
from hcspec.conformance.strategies import Case

TRANSPOSED_LAW = frozenset({"law.reported", "law.reported_matches_probed"})
"""Properties whose failure may be a transposed H_res (the output mixes with H_resᵀ while
``weights`` reports H_res)."""


def law_pattern(ctx: Context, case: Case) -> str | None:
    """Re-run ``case`` with the reported weights: "the branch sees Norm(x_in)" when the branch
    input is x_in scaled to unit RMS (:func:`branch_input_pattern`); "H_res looks transposed"
    when the output misses the law with the reported H_res beyond the law tolerance (in
    bfloat16/float16 the measured one of ``law.reported``,
    :func:`hcspec.conformance.machinery.precision.law_oracles`) but meets it with H_resᵀ;
    else None. Needs ``weights``; never raises (a target that cannot be re-run
    gives None)."""
    try:
        impl = ctx.build.make(case)
        reports_weights = has_weights(impl)
        if not reports_weights:
            return None
        x = ctx.inputs.state(case)
        h_pre, h_post, H_res = (f64(w) for w in ctx.observe.weights(impl, x))
        branch = ctx.inputs.branch(case)
        out = ctx.observe.forward(impl, x, branch)
        want, inp, scale = expected_output(ctx, case, x, h_pre, h_post, H_res)
        flipped, _, _ = expected_output(ctx, case, x, h_pre, h_post, H_res.transpose(-1, -2))
        got_input = f64(branch.inputs[0])
        oracle, oracle_in = precision.law_oracles(ctx, case, x, (h_pre, h_post, H_res),
                                                  (want, inp, scale))
        tol = rules.LAW.apply(ctx.precision, oracle=oracle).allowance
        tol_in = rules.LAW.apply(ctx.precision, oracle=oracle_in).allowance
    except Exception:
        return None
    if ctx.conventions.branch_input == "x_in":
        normed = branch_input_pattern(got_input, f64(inp), tol_in)
        if normed is not None:
            return normed
    straight = metrics.scaled_error(out, want, scale)
    against_t = metrics.scaled_error(out, flipped, scale)
    if straight > tol and against_t <= tol:
        return (f"known bug class: H_res looks transposed — the output misses the law by "
                f"{straight:.3g} with the reported H_res and by {against_t:.3g} (within "
                f"{tol:.3g}) with H_resᵀ at {case.to_json()}")
    return None


def sums_pattern(H: torch.Tensor, exact_axis: str, slack: float) -> str | None:
    """The known class a non-doubly-stochastic ``H [..., n, n]`` (float64) matches, or None:
    all ones (every entry 1: a mixing matrix of ones, sums n); a stream dropped (a row or
    column sum ≈ 0); the exact axis being the other one (the declared exact sums are off
    but the other axis's are 1 to ``slack``: the impl normalises the columns last, the
    mixing is transposed, or only one axis is normalised)."""
    n = H.shape[-1]
    if n >= 2 and bool(((H - 1).abs() <= max(slack, 1e-6)).all()):
        return (f"known bug class: the mixing matrix is all ones (every sum is {n}, not 1): "
                "the residual path adds all the streams to each")
    exact, other = axis_sums(H, exact_axis)
    _, other_name = by_exact_axis(exact_axis, "rows", "columns")
    if n >= 2 and bool((torch.cat([exact, other], -1).abs() <= max(slack, 1e-12)).any()):
        return ("known bug class: a stream was dropped — an H_res row or column sums to "
                f"{float(torch.cat([exact, other], -1).abs().min()):.3g}")
    exact_err = float((exact - 1).abs().max())
    other_err = float((other - 1).abs().max())
    if n >= 2 and exact_err > slack and other_err <= slack:
        return (f"known bug class: the exact axis is {other_name}, not {exact_axis} (the "
                f"{other_name} sum to 1 within {other_err:.3g}, the {exact_axis} only within "
                f"{exact_err:.3g}): Sinkhorn–Knopp ends with a {other_name[:-1]} step (declare "
                f"sinkhorn_exact_axis='{other_name}'), or the mixing is transposed, or only "
                f"the {other_name} are normalised (then the {exact_axis} stay off after any "
                "number of iterations)")
    return None


def branch_input_pattern(got: torch.Tensor, x_in: torch.Tensor, tol: float) -> str | None:
    """"the branch sees Norm(x_in)" when the branch received ``x_in`` normalised to unit RMS
    (``got [..., d]`` vs ``x_in [..., d]``, float64), else None."""
    rms = x_in.pow(2).mean(-1, keepdim=True).clamp_min(1e-300).sqrt()
    if metrics.scaled_error(got, x_in / rms) <= max(tol, 1e-4) < metrics.scaled_error(
            got, x_in):
        return ("known bug class: the branch sees Norm(x_in) (x_in scaled to unit RMS), not "
                "x_in = h_preᵀX: declare branch_input='rms_norm' if the norm belongs to the "
                "hyper-connection, else the pre-norm is applied twice")
    return None


def known_bug_class(prop_id: str, ctx: Context, case: Case) -> str | None:
    """The one-line known bug class behind ``prop_id``'s failure on ``case``, found by
    re-running the case under the class's alternative explanation, or None."""
    if prop_id in TRANSPOSED_LAW:
        return law_pattern(ctx, case)
    if prop_id in variant_fit.SINKHORN_PROPERTIES:  # other rounds or eps than declared
        return variant_fit.diagnose(ctx, case)
    return None
