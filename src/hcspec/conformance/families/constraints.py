"""Constraints family (mHC): H_res doubly stochastic and non-negative, H_pre ∈ [0, 1],
H_post ∈ [0, 2] (and reaching above 1: the factor 2 of 2σ), mixing preserves the stream sum and
is non-expansive, and robustness at extreme logits.

Source: mHC arXiv:2512.24880 Eq. 8–9 (σ, 2σ, Sinkhorn–Knopp with t_max rounds of column then
row normalisation); spec theorems ``ds.*``. The axis Sinkhorn–Knopp normalised last is checked
at dtype precision, the other against the Birkhoff–Hopf bound of
:func:`hcspec.conformance.rules.sinkhorn_other_axis_bound` for the declared iteration count.
Every implementation normalises X before computing its weights, so the kit stresses
Sinkhorn–Knopp by scaling the weight-generating parameters (capability ``parameters``).
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

from hcspec.conformance.author import (
    PARAMETERS,
    WEIGHTS,
    WEIGHTS_OR_PROBING,
    Case,
    Cases,
    Context,
    Inconclusive,
    MHCWeights,
    NotApplicable,
    axis_sums,
    by_exact_axis,
    capability,
    declare,
    eps_exact_axis,
    f64,
    kinds,
    rules,
    salts,
    shift,
    worst_eps_token,
)
from hcspec.conformance.machinery.bug_classes import sums_pattern
from hcspec.conformance.machinery.sinkhorn_bounds import (
    both_axes,
    expect_orthostochastic_rows,
    gain_ceiling,
    other_axis_bound,
    other_axis_convergence,
    other_axis_given,
    summed_terms,
    vacuous_ceiling,
    worst_demonstrable,
)
from hcspec.conformance.machinery.steering import (
    check_sinkhorn_vertices,
    check_spanned_vertices,
    perturb_relative,
)

BASE = ("shape.output", "shape.branch_once")
PERTURBATIONS = (0.0, 0.03, 0.1, 0.3, 1.0)
MHC_REQUIRES = (kinds("mhc"), WEIGHTS_OR_PROBING)
"""Every constraint: mHC, its weights reported or probed."""
MHC_CASES = Cases(d_more_than_n=True, perturbations=PERTURBATIONS)
"""The constraints family's cases: d > n (the weights may be probed), more small
perturbations."""


def _sums(ctx: Context, H: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sums along the exactly normalised axis, sums along the other axis), ``[..., n]``."""
    return axis_sums(H, ctx.conventions.formula.sinkhorn.exact_axis)


def _axis_names(ctx: Context) -> tuple[str, str]:
    return by_exact_axis(ctx.conventions.formula.sinkhorn.exact_axis, "row", "column")



def _span_examples(ctx: Context) -> list[Case]:
    return shift(ctx, [Case(8, 4, 4, 8, seed=0, perturb=1.0, param_scale=100.0),
                       Case(8, 4, 2, 5, seed=1, perturb=1.0, param_scale=100.0)])


def _extreme_scales(ctx: Context) -> tuple[float, ...]:
    return (1e2, 1e4, 1e6) if ctx.profile.extreme else (1e2, 1e4)


def _extreme_examples(ctx: Context) -> list[Case]:
    return shift(ctx, [
        Case(2, 3, 4, 8, seed=0, perturb=1.0, param_scale=1e4),
        Case(2, 3, 4, 8, seed=1, perturb=0.3, param_scale=1e2),
        Case(3, 2, 2, 5, seed=2, perturb=1.0, param_scale=1e4, scale=10.0),
        Case(1, 2, 3, 7, seed=3, perturb=0.0, param_scale=1e4),
    ])


def _extreme_strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return Cases(d_more_than_n=True, perturbations=(0.0, 0.3, 1.0),
                 param_scales=_extreme_scales(ctx)).strategy(ctx)


@declare(
    "constraints.h_res_nonnegative", statement="every entry of H_res is >= 0",
    requires=MHC_REQUIRES, tolerance=rules.RANGE_SLACK, cases=MHC_CASES, prerequisites=BASE)
def check_nonnegative(ctx: Context, case: Case) -> None:
    """Every entry of H_res is ≥ 0."""
    w = MHCWeights(ctx, ctx.build.make(case), ctx.inputs.state(case), case)
    low = float(w.H_res.min())
    ctx.record.expect(f"most negative H_res entry ({w.source})", max(0.0, -low),
                      probed=w.probed)


@declare(
    "constraints.h_res_exact_axis",
    statement="H_res sums to 1 along the axis Sinkhorn–Knopp normalises last, to dtype precision",
    theorems=("mhc.sinkhorn_rows_exact",), requires=MHC_REQUIRES, tolerance=rules.EXACT_AXIS,
    cases=MHC_CASES, prerequisites=BASE)
def check_exact_axis(ctx: Context, case: Case) -> None:
    """The sums along the axis Sinkhorn–Knopp normalises last are 1 to dtype precision. A
    declared orthostochastic ``H_res`` has no exact axis: its rows (and columns, the other
    axis) are compared per token with the Newton–Schulz defect (:func:`orthostochastic_defect`,
    the rule's ``defect`` input) on top of the rounding."""
    w = MHCWeights(ctx, ctx.build.make(case), ctx.inputs.state(case), case)
    if ctx.conventions.formula.construction == "orthostochastic":
        expect_orthostochastic_rows(ctx, case, w)
        return
    exact, _ = _sums(ctx, w.H_res)
    name, _ = _axis_names(ctx)
    declared_eps = eps_exact_axis(ctx, w, exact)
    if declared_eps is not None:  # compared with 1 − δ at the token nearest its allowance
        error, previous = declared_eps
        worst = worst_eps_token(ctx, w, case.n, error, previous)
        delta = rules.sinkhorn_eps_center(ctx.precision)
        ctx.record.expect(f"max |H_res {name} sum − (1 − δ)| ({w.source}, exact axis, declared "
                          f"δ = {delta:g})", float(error.flatten()[worst]), n=case.n,
                          probed=w.probed, previous=float(previous.flatten()[worst]))
        return
    terms = summed_terms(ctx, case.n)
    extra: dict[str, Any] = {"terms": terms} if terms else {}
    tol = ctx.record.allowance(n=case.n, probed=w.probed, **extra).allowance
    ctx.record.expect(f"max |H_res {name} sum − 1| ({w.source}, exact axis)",
                      float((exact - 1).abs().max()), n=case.n, probed=w.probed, **extra,
                      hint=sums_pattern(w.H_res, ctx.conventions.formula.sinkhorn.exact_axis, tol))


@declare(
    "constraints.h_res_other_axis",
    statement="H_res sums to 1 along the other axis within the Birkhoff–Hopf bound (declared "
              "rounds)",
    requires=MHC_REQUIRES, tolerance=rules.SINKHORN_OTHER_AXIS, cases=MHC_CASES,
    prerequisites=BASE)
def check_other_axis(ctx: Context, case: Case) -> None:
    """The sums along the other axis are within the Birkhoff–Hopf bound for the declared
    iteration count and the measured logit spread (exactly 1 for a declared
    ``residual_mixing="identity"``). Only tokens whose bound can fail are compared
    (:func:`other_axis_bound`, :func:`vacuous_ceiling`); a case with none, or with n = 1 (one
    sum, the exact one), is inconclusive."""
    _, name = _axis_names(ctx)
    if case.n == 1:
        raise Inconclusive(f"with n = 1 the {name} sum is the exact axis's sum: nothing else "
                           "to show")
    w = MHCWeights(ctx, ctx.build.make(case), ctx.inputs.state(case), case)
    _, other = _sums(ctx, w.H_res)
    err = (other - 1).abs().amax(dim=-1)  # [B, T]
    bound, conv, why = other_axis_bound(ctx, w, case.n)
    worst = worst_demonstrable(err, bound, f"H_res {name} sums", why, vacuous_ceiling(case.n))
    e = float(err.flatten()[worst])
    exact = ctx.record.allowance(n=case.n, probed=w.probed, convergence=0.0,
                                 terms=summed_terms(ctx, case.n)).allowance
    ctx.record.expect(f"max |H_res {name} sum − 1| ({w.source})", e, detail=why[worst],
                      hint=sums_pattern(w.H_res, ctx.conventions.formula.sinkhorn.exact_axis,
                                        exact),
                      **other_axis_given(conv, w, case.n, worst, summed_terms(ctx, case.n)))


@declare(
    "constraints.h_pre_range", statement="H_pre lies in [0, 1] (σ; [eps, 1 + eps] for a declared "
                                         "h_pre_eps)",
    theorems=("mhc.h_pre_range",), requires=MHC_REQUIRES, tolerance=rules.RANGE_SLACK,
    cases=MHC_CASES, prerequisites=BASE)
def check_h_pre_range(ctx: Context, case: Case) -> None:
    """H_pre ∈ [0, 1] (σ, mHC Eq. 8); with a declared ``h_pre_eps`` (``σ(·) + eps``,
    DeepSeek-V4) H_pre ∈ [eps, 1 + eps]."""
    w = MHCWeights(ctx, ctx.build.make(case), ctx.inputs.state(case), case)
    ctx.record.require(w.h_pre is not None,
                       "h_pre is not identifiable by probing under the declared branch input "
                       f"{ctx.conventions.branch_input!r} (needs the weights capability)")
    assert w.h_pre is not None
    eps = ctx.conventions.formula.h_pre.eps
    low, high = eps, 1.0 + eps
    outside = max(0.0, low - float(w.h_pre.min()), float(w.h_pre.max()) - high)
    ctx.record.expect(f"H_pre distance outside [{low:g}, {high:.7g}] ({w.source})", outside,
                      detail=f"range [{float(w.h_pre.min()):.4g}, {float(w.h_pre.max()):.4g}]",
                      probed=w.probed)


@declare(
    "constraints.h_post_range", statement="H_post lies in [0, 2] (2σ; shifted by a declared "
                                          "h_post_eps)",
    theorems=("mhc.h_post_range",), requires=MHC_REQUIRES, tolerance=rules.RANGE_SLACK,
    cases=MHC_CASES, prerequisites=BASE)
def check_h_post_range(ctx: Context, case: Case) -> None:
    """H_post ∈ [0, 2] (2σ, mHC Eq. 8); with a declared ``h_post_eps`` (``c·σ(·) + eps``)
    H_post ∈ [eps, 2 + eps]."""
    w = MHCWeights(ctx, ctx.build.make(case), ctx.inputs.state(case), case)
    eps = ctx.conventions.formula.h_post.eps
    low, high = eps, 2.0 + eps
    outside = max(0.0, low - float(w.h_post.min()), float(w.h_post.max()) - high)
    ctx.record.expect(f"H_post distance outside [{low:g}, {high:.7g}] ({w.source})", outside,
                      detail=f"range [{float(w.h_post.min()):.4g}, "
                             f"{float(w.h_post.max()):.4g}]", probed=w.probed)


SPAN_DIRECTIONS = 3
"""Random perturbation directions per case; each is applied with both signs."""
SPAN_SATURATED = 1e-3
"""How close to an asymptote of σ a value must be to count as saturated there."""


@declare(
    "constraints.h_post_span",
    statement="H_post exceeds 1 once the parameters are scaled up (2σ, not σ)",
    theorems=("mhc.h_post_range",), requires=(*MHC_REQUIRES, capability(PARAMETERS)),
    tolerance=rules.RANGE_SLACK, examples=_span_examples,
    cases=Cases(d_more_than_n=True, min_n=2, min_batch=8, min_tokens=4, perturbations=(1.0,),
                param_scales=(100.0,), extreme_scales=False),
    prerequisites=BASE)
def check_h_post_span(ctx: Context, case: Case) -> None:
    """H_post = 2σ(H̃_post), not σ(H̃_post) (mHC Eq. 8): shown by driving the post logits to
    saturation through the parameters, the only handle a black box offers.

    What the kit can force. It never sees the logits H̃_post, only H_post = c·σ(H̃_post) with
    c = 2 (correct) or c = 1 (the bug), and it can move the exposed parameters θ. From the
    init θ₀ it builds, for each of :data:`SPAN_DIRECTIONS` random directions ε (entries
    N(0, perturb²)), the two impls ``θ₀ ± param_scale·(1 + |θ₀|)⊙ε`` (×100 in the examples).
    The step is relative to the init, so no init can outweigh it, and it is taken with both
    signs: a post logit that depends on a parameter affinely (the bias b_post of mHC Eq. 7,
    which is the *whole* logit when H_post has no input-dependent part) is driven far positive
    by one of the signs, whatever its init; a product such as α_post·(x'φ_post) varies in sign
    across tokens and is driven far both ways by either. H_post is read (reported, else
    probed) at every token of the case's state for all 2·:data:`SPAN_DIRECTIONS` impls.

    A declared ``h_post_multiplier`` other than 2 fails at once, naming the deviation (a
    declaration never turns a deviation from the paper into a pass). A declared
    ``h_post_eps`` is subtracted from every value before the verdict (``σ(·) + eps`` reaches
    ``1 + eps``, which is not the factor 2).

    Verdict on the finite values, per case:

    * some H_post > 1 (beyond the range slack of ``rules.range_slack``): only 2σ gets
      there — the factor 2 is demonstrated, the case passes;
    * else, when the values reach both asymptotes, min H_post ≤ :data:`SPAN_SATURATED` and
      max H_post ≥ 1 − :data:`SPAN_SATURATED`, the logits were driven to both saturations
      and the upper one is σ's 1, not 2σ's 2 — the case fails. For a 2σ this would need every
      post logit of every perturbed impl ≤ 0 while the largest lies within
      2·:data:`SPAN_SATURATED` of 0, although one sign of the perturbation drives an affine
      logit far positive: the verdict is only given when the observation discriminates;
    * H_post did not change under any perturbation (a constant, e.g. a one-hot with no logits):
      nothing was driven anywhere, so the case is :class:`Inconclusive` whatever its values;
    * otherwise (H_post did not move — e.g. post logits the kit cannot reach, such as a
      buffer — or never came near 1, or nothing finite was read) the case cannot show the
      range either way: it is :class:`Inconclusive`, not counted as evidence. A property
      with no conclusive case is reported not applicable, "not demonstrated", never passed.
    """
    multiplier = ctx.conventions.formula.h_post.multiplier
    softmax = ctx.conventions.formula.h_post.activation == "softmax"
    act = "softmax" if softmax else "σ"
    # a declared softmax gate gets no σ-vs-2σ hint: its bug classes are not σ's
    sigma = " — H_post = σ, missing the factor 2" if multiplier == 1 and not softmax else ""
    ctx.record.require(
        multiplier == 2.0,
        f"declared h_post_multiplier={multiplier:g}: H_post = {multiplier:g}·{act}(·) differs from "
        f"the paper's 2σ (mHC Eq. 8){sigma} (a declared deviation still fails; list it in an "
        "expected-failures file to accept it)",
        hint="known bug class: H_post saturates at 1 (σ instead of 2σ)" if sigma else None)
    eps = ctx.conventions.formula.h_post.eps
    x = ctx.inputs.state(case)
    init = MHCWeights(ctx, ctx.build.make(case, perturb=False), x, case).h_post.flatten()
    values: list[torch.Tensor] = []
    source, probed = "reported", False
    for direction in range(SPAN_DIRECTIONS):
        for sign in (1.0, -1.0):
            impl = ctx.build.make(case, perturb=False)
            perturb_relative(impl, case, salts.SPAN_PERTURBATION, direction, sign)
            w = MHCWeights(ctx, impl, x, case)
            source, probed = w.source, w.probed
            values.append(w.h_post.flatten())
    h = torch.cat(values) - eps  # the declared additive eps is not part of c·σ
    finite = h[torch.isfinite(h)]
    where = (f"{2 * SPAN_DIRECTIONS} perturbations θ₀ ± {case.param_scale:g}·(1 + |θ₀|)⊙ε × "
             f"{case.batch * case.tokens} tokens × {case.n} streams ({source})"
             + (f", less the declared h_post_eps {eps:g}" if eps else ""))
    if finite.numel() == 0:
        raise Inconclusive(f"every H_post read is non-finite over {where}")
    top, bottom = float(finite.max()), float(finite.min())
    slack = ctx.record.allowance(probed=probed).allowance
    if top > 1.0 + slack:
        ctx.record.expect(f"1 − max H_post over {where}", max(0.0, 1.0 - top), probed=probed)
        return
    moved = torch.stack(values) - init.unsqueeze(0)
    moved = moved[torch.isfinite(moved)]
    if moved.numel() == 0 or float(moved.abs().max()) <= slack:
        raise Inconclusive(
            f"H_post did not change when the parameters were perturbed (it stayed in "
            f"[{bottom + eps:.4g}, {top + eps:.4g}] over {where}): it depends on no parameter "
            "the kit can reach (no post logits it can drive), so whether it is 2σ or σ cannot "
            "be shown")
    if bottom <= SPAN_SATURATED and top >= 1.0 - SPAN_SATURATED:
        ctx.record.require(False,
                    f"H_post saturates at 1, not 2: max H_post = {top + eps:.6g}, min = "
                    f"{bottom + eps:.3g} over {where}; the perturbed parameters drove the post "
                    "logits to both saturations and the upper one is σ's bound 1",
                    hint=None if softmax else
                    "known bug class: H_post saturates at 1 (σ instead of 2σ, mHC Eq. 8)")
    raise Inconclusive(
        f"H_post stayed in [{bottom + eps:.4g}, {top + eps:.4g}] over {where}: never above 1 "
        "(which shows 2σ) nor saturated at both 0 and 1 (which shows σ)")


@declare(
    "constraints.stream_sum_preserved",
    statement="with F ≡ 0 the stream sum 1ᵀX is preserved (up to H_res's column error)",
    theorems=("ds.stream_sum_preserved",), requires=MHC_REQUIRES,
    tolerance=rules.SINKHORN_OTHER_AXIS, cases=MHC_CASES, prerequisites=BASE)
def check_stream_sum(ctx: Context, case: Case) -> None:
    """With F ≡ 0 the stream sum is preserved, 1ᵀ X' = 1ᵀ X, up to the column error of H_res
    (spec ``ds.stream_sum_preserved``)."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    w = MHCWeights(ctx, impl, x, case)
    out = f64(ctx.observe.forward(impl, x, ctx.inputs.branch(case, "zero", record=False)))
    X = f64(x)
    drift = (out.sum(dim=-2) - X.sum(dim=-2)).abs()  # [B, T, d]
    mass = X.abs().sum(dim=-2).clamp_min(1.0)  # Σ_j |X_jk| bounds |(1ᵀH − 1ᵀ) X_k| / col error
    rel = (drift / mass).amax(dim=-1)  # [B, T]
    if ctx.conventions.formula.construction == "sinkhorn" and (
            ctx.conventions.formula.sinkhorn.exact_axis == "columns"):  # 1ᵀ H = 1ᵀ is exact
        conv = torch.zeros_like(rel)
        why = ["the column sums are the exact axis"] * conv.numel()
    else:
        conv, why = other_axis_convergence(ctx, w)
    tol = rules.other_axis_allowances(ctx.precision, conv, case.n, w.probed,
                                      mixing=True, terms=summed_terms(ctx, case.n))
    worst = worst_demonstrable(rel, tol, "the stream sum with F ≡ 0", why,
                                vacuous_ceiling(case.n))
    exact = ctx.record.allowance(n=case.n, probed=w.probed, convergence=0.0, mixing=True,
                                 terms=summed_terms(ctx, case.n))
    ctx.record.expect("max |1ᵀX' − 1ᵀX| / Σ|X| with F ≡ 0", float(rel.flatten()[worst]),
                      detail=f"bounded by the column error of H_res ({why[worst]})",
                      hint=sums_pattern(w.H_res, ctx.conventions.formula.sinkhorn.exact_axis,
                                        exact.allowance),
                      **other_axis_given(conv, w, case.n, worst, summed_terms(ctx, case.n),
                                         mixing=True))


@declare(
    "constraints.nonexpansive",
    statement="with F ≡ 0 mixing is non-expansive: ‖H_res x‖₂ ≤ ‖x‖₂ per feature",
    theorems=("ds.nonexpansive",), requires=MHC_REQUIRES, tolerance=rules.SINKHORN_OTHER_AXIS,
    cases=MHC_CASES, prerequisites=BASE)
def check_nonexpansive(ctx: Context, case: Case) -> None:
    """With F ≡ 0, ‖X'_{:,k}‖₂ ≤ ‖X_{:,k}‖₂ for every feature k (‖H_res‖₂ ≤ 1, spec
    ``ds.nonexpansive``), up to √((1 + column error)(1 + row error)). Only tokens whose
    allowance is below :func:`gain_ceiling` count (a large logit spread makes the
    Birkhoff–Hopf column bound, and so the allowance, exceed any possible gain: 4.7e5 and
    6.8e8 were shown next to "passed" before); a case with none is inconclusive."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    w = MHCWeights(ctx, impl, x, case)
    out = f64(ctx.observe.forward(impl, x, ctx.inputs.branch(case, "zero", record=False)))
    X = f64(x)
    gain = (out.norm(dim=-2) / X.norm(dim=-2).clamp_min(1e-300)).amax(dim=-1)  # [B, T]
    allowed, conv, why = other_axis_bound(ctx, w, case.n, mixing=True, norm=True)
    worst = worst_demonstrable((gain - 1).clamp_min(0.0), allowed,
                                "the stream mixing's norm gain", why, gain_ceiling(case.n))
    exact = ctx.record.allowance(n=case.n, probed=w.probed, convergence=0.0, mixing=True,
                                 terms=summed_terms(ctx, case.n))
    ctx.record.expect("max ‖X'_k‖/‖X_k‖ − 1 with F ≡ 0", max(0.0, float(gain.flatten()[worst]) - 1),
                      detail=why[worst],
                      hint=sums_pattern(w.H_res, ctx.conventions.formula.sinkhorn.exact_axis,
                                        exact.allowance),
                      **other_axis_given(conv, w, case.n, worst, summed_terms(ctx, case.n),
                                         mixing=True, norm=True, both=both_axes(ctx)))


@declare(
    "constraints.extreme_logits",
    statement="parameters scaled ×1e2–1e4: finite, H_res ≥ 0, exact axis sums 1, no stream dropped",
    requires=(*MHC_REQUIRES, capability(PARAMETERS)), tolerance=rules.EXACT_AXIS,
    secondary=(rules.RANGE_SLACK,), examples=_extreme_examples, strategy=_extreme_strategy,
    prerequisites=BASE,
    cases=Cases(param_scales=(1e2, 1e4), perturbations=(0.0, 0.3, 1.0)))  # the domain
def check_extreme(ctx: Context, case: Case) -> None:
    """With the parameters scaled ×1e2…×1e4 (logits far beyond exp's range), the output and
    the weights stay finite, H_res ≥ 0 with its exact axis summing to 1 (orthostochastic: to
    1 within the Newton–Schulz defect, ``sinkhorn_bounds.expect_orthostochastic_rows``) and no
    all-zero row or column (no stream silently dropped)."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    for name in ("zero", case.branch):
        out = ctx.observe.forward(impl, x, ctx.inputs.branch(case, name, record=False))
        ctx.record.require(bool(torch.isfinite(out).all()),
                    f"forward ({name} branch) is non-finite with parameters ×{case.param_scale:g}")
    w = MHCWeights(ctx, impl, x, case)
    for label, t in (("h_pre", w.h_pre), ("h_post", w.h_post), ("H_res", w.H_res)):
        ctx.record.require(t is None or bool(torch.isfinite(t).all()),
                    f"{label} ({w.source}) is non-finite with parameters ×{case.param_scale:g}")
    slack = ctx.record.allowance(rules.RANGE_SLACK, probed=w.probed).allowance
    ctx.record.expect("most negative H_res entry", max(0.0, -float(w.H_res.min())),
                      rule=rules.RANGE_SLACK, probed=w.probed)
    exact, other = _sums(ctx, w.H_res)
    smallest = float(other.min())
    ctx.record.require(smallest > slack,
                f"an H_res {_axis_names(ctx)[1]} sums to {smallest:.3g}: a stream is dropped "
                f"(parameters ×{case.param_scale:g})",
                hint="known bug class: a stream was dropped (an underflowing Sinkhorn–Knopp: "
                     "normalise in the log domain)")
    if ctx.conventions.formula.construction == "orthostochastic":
        expect_orthostochastic_rows(ctx, case, w)
    elif (declared_eps := eps_exact_axis(ctx, w, exact)) is not None:
        error, previous = declared_eps
        worst = worst_eps_token(ctx, w, case.n, error, previous)
        ctx.record.expect("max |exact-axis sum − (1 − δ)| (declared δ)",
                          float(error.flatten()[worst]), n=case.n, probed=w.probed,
                          previous=float(previous.flatten()[worst]))
    else:
        tol = ctx.record.allowance(n=case.n, probed=w.probed).allowance
        ctx.record.expect("max |exact-axis sum − 1|", float((exact - 1).abs().max()),
                          n=case.n, probed=w.probed,
                          hint=sums_pattern(w.H_res, ctx.conventions.formula.sinkhorn.exact_axis,
                                            tol))


def _vertex_examples(ctx: Context) -> list[Case]:
    return shift(ctx, [Case(1, 2, 3, 7, seed=0, perturb=0.0, branch="zero"),
                       Case(1, 2, 2, 5, seed=1, perturb=0.0, branch="zero")])


@declare(
    "constraints.h_res_vertices",
    statement="H_res can be steered next to every permutation (Sinkhorn: logits c·P)",
    theorems=("constructions.birkhoff_exact", "mhc.sinkhorn_variants"),
    requires=(kinds("mhc"), capability(PARAMETERS), capability(WEIGHTS)),
    tolerance=rules.LAW, examples=_vertex_examples,
    cases=Cases(d_more_than_n=True, min_n=2, branch="zero"),
    prerequisites=BASE, explore=False)
def check_h_res_vertices(ctx: Context, case: Case) -> None:
    """For each permutation P of ``n`` streams the kit steers the parameters (Gauss–Newton,
    damped: :func:`steer_damped`) until the reported H_res is ``0.9·P + 0.1·H̄₀`` at every
    token. A construction that spans the polytope reaches every such target; mHC-lite whose
    permutation set misses one (a duplicated set: spec ``constructions.birkhoff_exact`` keeps
    it doubly stochastic, so no sum check sees it) cannot: the case fails when some targets
    are reached and another stays more than ``steering.VERTEX_GAP`` away. No target reached: not
    applicable (the parameters cannot steer H_res). A declared orthostochastic construction
    does not span the polytope (not every doubly stochastic matrix is orthostochastic for
    n ≥ 3): not applicable. Sinkhorn–Knopp is steered through its logits instead
    (:func:`hcspec.conformance.machinery.steering.check_sinkhorn_vertices`)."""
    construction = ctx.conventions.formula.construction
    if construction == "orthostochastic":
        raise NotApplicable("H_res is declared orthostochastic, which does not span the "
                            "Birkhoff polytope: its vertices are not all targets")
    if case.n < 2:
        raise Inconclusive("with n = 1 the only permutation is [1]")
    if construction == "sinkhorn":
        check_sinkhorn_vertices(ctx, case)
        return
    check_spanned_vertices(ctx, case)
