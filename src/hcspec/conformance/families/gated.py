"""Gated family: Qwen4-exp's element-wise gated read, checked where it fails in its own ways.

Applies to a target that declares ``conventions.read = "elementwise"`` (spec ``gated.*``):

* ``gated.unmixed``: with ``F ≡ 0`` the state passes unchanged, ``X' = X`` (H_res = I exactly;
  spec ``gated.general_law``);
* ``gated.law``: ``X' = X + h_post F(x_in)ᵀ`` with the reported read: ``x_in = Σ_s h_pre_s ⊙
  X_s`` of ``elementwise_weights``, else ``read_map``'s ``x_in`` (the branch receives it);
* ``gated.read``: the branch input, read directly, is the gated read of the target's own
  published tensors, ``x_in = mean_s(G_s ⊙ N_s)``, ``G = σ(U silu(D vec(N)/n))``: catches a sum
  over the streams, a gate read from the raw streams, a gate applied after the mean, a dropped
  ``/n`` in the silu; a mismatch names the variant the output matches;
* ``gated.write``: the write probed with a constant branch, ``(X'(c) − X'(0)) / c``, is
  ``h_post = 2σ(W vec(N)/n)`` of the published tensors: catches σ for 2σ, a dropped ``/n``,
  the raw state in the inject;
* ``gated.ranges``: the gate recovered from the reported read, ``G = n ρ h_pre / (1 + w)``,
  lies in (0, 1), and ``h_post`` in (0, 2).

The oracle is :mod:`hcspec.formulas.gated` in float64 (which the reference imports too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch

from hcspec.conformance.author import (
    ELEMENTWISE_READ,
    ELEMENTWISE_WEIGHTS,
    PUBLISHED_PARAMETERS,
    READ_MAP,
    READ_REPORTED,
    Case,
    Cases,
    Context,
    CountingBranch,
    HyperConnectionImpl,
    PropertyFailure,
    Requirement,
    capability,
    declare,
    f64,
    metrics,
    rules,
)
from hcspec.formulas import gated as formula

BASE = ("shape.output", "shape.branch_once")
PUBLISHED = Requirement(
    "conventions.published = qwen4-exp",
    "compares with the published qwen4-exp step of the target's own tensors; the target does "
    "not declare conventions.published='qwen4-exp'",
    lambda s: s.conventions.published == formula.LAYOUT.name)
CASES = Cases(min_n=2, perturbations=(0.3, 1.0), extreme_scales=False)
"""n ≥ 2 (a sum and a mean agree at n = 1); parameters perturbed so that the gate varies."""

VARIANTS: tuple[tuple[str, formula.GatedFormula], ...] = (
    ("the sum over the streams instead of the mean", formula.GatedFormula(streams="sum")),
    ("the gate read from the raw streams instead of the normalised ones",
     formula.GatedFormula(gate_input="raw")),
    ("the gate applied after the mean", formula.GatedFormula(gate_after_mean=True)),
    ("the /n dropped in the silu's input", formula.GatedFormula(gate_scale_n=False)),
    ("the /n dropped in the inject", formula.GatedFormula(inject_scale_n=False)),
    ("σ instead of 2σ in the write", formula.GatedFormula(post_multiplier=1.0)),
    ("the inject read from the raw streams instead of the normalised ones",
     formula.GatedFormula(inject_input="raw")),
)
"""The departures a mismatch is matched against (:func:`_diagnosis`)."""


def _params(ctx: Context, impl: HyperConnectionImpl) -> dict[str, object]:
    got = getattr(impl, PUBLISHED_PARAMETERS)()
    if not isinstance(got, Mapping):
        raise PropertyFailure(f"published_parameters() returned {type(got).__name__}")
    try:
        formula.check_parameters(got, impl.n, impl.d)
    except (TypeError, ValueError) as exc:
        raise PropertyFailure(f"published_parameters(): {exc}") from exc
    return {k: (v.detach().to("cpu", torch.float64) if isinstance(v, torch.Tensor) else v)
            for k, v in got.items()}


def _diagnosis(got: torch.Tensor, want_of: dict[str, torch.Tensor], tol: float) -> str:
    matches = [name for name, want in want_of.items()
               if metrics.scaled_error(got, want) <= tol]
    return ("matches " + "; ".join(matches)) if matches else "matches none of the known variants"


@declare(
    "gated.unmixed",
    statement="with F ≡ 0 the streams pass unchanged, X' = X (H_res = I exactly)",
    theorems=("gated.general_law", "gated.stream_sum"), requires=(ELEMENTWISE_READ,),
    tolerance=rules.LAW, cases=CASES, prerequisites=BASE)
def check_unmixed(ctx: Context, case: Case) -> None:
    """``forward(x, F ≡ 0)`` equals ``x``."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    with torch.no_grad():
        out = ctx.observe.forward(impl, x, CountingBranch(torch.zeros_like, record=False))
    ctx.record.expect("X'(F ≡ 0) vs X", metrics.scaled_error(out, x))


@declare(
    "gated.law",
    statement="X' = X + h_post F(x_in)ᵀ with the reported read (elementwise_weights or read_map)",
    theorems=("gated.general_law",),
    requires=(ELEMENTWISE_READ, READ_REPORTED), tolerance=rules.LAW,
    cases=CASES, prerequisites=BASE)
def check_law(ctx: Context, case: Case) -> None:
    """The output and the branch's input equal the law with the reported read:
    ``Σ_s h_pre_s ⊙ X_s`` of ``elementwise_weights(x)`` when offered, else ``read_map(x)``."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    elementwise = callable(getattr(impl, ELEMENTWISE_WEIGHTS, None))
    with torch.no_grad():
        if elementwise:
            h_pre, h_post = (f64(w) for w in getattr(impl, ELEMENTWISE_WEIGHTS)(x))
            what = "Σ_s h_pre_s ⊙ X_s of elementwise_weights(x)"
        else:
            x_in, h_post = (f64(w) for w in getattr(impl, READ_MAP)(x))
            what = "x_in of read_map(x)"
        branch = ctx.inputs.branch(case)
        recording = CountingBranch(branch)
        out = ctx.observe.forward(impl, x, recording)
        seen = [f64(a) for a in recording.inputs]
    if tuple(h_post.shape) != tuple(x.shape[:-1]):
        raise PropertyFailure(f"the reported h_post: expected {list(x.shape[:-1])}, got "
                              f"{list(h_post.shape)}")
    if elementwise:
        if tuple(h_pre.shape) != tuple(x.shape):
            raise PropertyFailure(f"elementwise_weights(x): expected h_pre {list(x.shape)}, "
                                  f"got {list(h_pre.shape)}")
        x_in = (h_pre * f64(x)).sum(dim=-2)
    elif tuple(x_in.shape) != tuple(seen[0].shape):
        raise PropertyFailure(f"read_map(x): expected x_in {list(seen[0].shape)}, got "
                              f"{list(x_in.shape)}")
    ctx.record.expect(f"branch input vs {what}", metrics.scaled_error(seen[0], x_in))
    want = f64(x) + h_post.unsqueeze(-1) * f64(branch(x_in.to(x.dtype))).unsqueeze(-2)
    ctx.record.expect("X' vs X + h_post F(x_in)ᵀ", metrics.scaled_error(out, want))


@declare(
    "gated.read",
    statement="the branch receives mean_s(G_s ⊙ N_s), G = σ(U silu(D vec(N)/n)) of the published "
              "tensors",
    theorems=("published.qwen4_exp_step", "gated.constant_gate"),
    requires=(ELEMENTWISE_READ, PUBLISHED, capability(PUBLISHED_PARAMETERS)),
    tolerance=rules.LAW, cases=CASES, prerequisites=BASE)
def check_read(ctx: Context, case: Case) -> None:
    """The branch's input (read directly) vs the float64 gated read of
    ``published_parameters()``; a mismatch names the variant it matches."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    params = _params(ctx, impl)
    recording = CountingBranch(torch.zeros_like)
    with torch.no_grad():
        ctx.observe.forward(impl, x, recording)
        seen = [f64(a) for a in recording.inputs]
        want = formula.parts(params, f64(x)).x_in
        error = metrics.scaled_error(seen[0], want)
        tol = ctx.record.allowance().allowance
        detail = "" if error <= tol else _diagnosis(seen[0], {
            name: formula.parts(params, f64(x), variant).x_in for name, variant in VARIANTS}, tol)
    ctx.record.expect("branch input vs mean_s(G_s ⊙ N_s) of published_parameters()", error,
                      detail=detail)


@declare(
    "gated.write",
    statement="the write (X'(c) − X'(0))/c is h_post = 2σ(W vec(N)/n) of the published tensors",
    theorems=("published.qwen4_exp_step",),
    requires=(ELEMENTWISE_READ, PUBLISHED, capability(PUBLISHED_PARAMETERS)),
    tolerance=rules.LAW, cases=CASES, prerequisites=BASE)
def check_write(ctx: Context, case: Case) -> None:
    """A constant branch ``F ≡ c`` (c = 1 in every feature) writes ``h_post`` onto each stream;
    compared with the float64 published ``h_post``, a mismatch names the variant."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    params = _params(ctx, impl)
    with torch.no_grad():
        out = f64(ctx.observe.forward(impl, x, CountingBranch(torch.ones_like, record=False)))
        probed = (out - f64(x)).mean(dim=-1)
        want = formula.parts(params, f64(x)).h_post
        assert want is not None
        error = metrics.scaled_error(probed, want)
        tol = ctx.record.allowance().allowance
        variants: dict[str, torch.Tensor] = {}
        for name, variant in VARIANTS:
            h = formula.parts(params, f64(x), variant).h_post
            assert h is not None
            variants[name] = h
        detail = "" if error <= tol else _diagnosis(probed, variants, tol)
    ctx.record.expect("probed h_post vs 2σ(W vec(N)/n) of published_parameters()", error,
                      detail=detail)


@declare(
    "gated.ranges",
    statement="the gate G = n ρ h_pre / (1 + w) of the reported read lies in (0, 1), h_post in "
              "(0, 2)",
    theorems=("gated.constant_gate",),
    requires=(ELEMENTWISE_READ, PUBLISHED, capability(PUBLISHED_PARAMETERS),
              capability(ELEMENTWISE_WEIGHTS)),
    tolerance=rules.RANGE_SLACK, cases=dataclasses.replace(CASES, perturbations=(1.0, 3.0)),
    prerequisites=BASE)
def check_ranges(ctx: Context, case: Case) -> None:
    """Distance of G outside [0, 1] and of h_post outside [0, 2]."""
    impl = ctx.build.make(case)
    x = ctx.inputs.state(case)
    params = _params(ctx, impl)
    with torch.no_grad():
        h_pre, h_post = (f64(w) for w in getattr(impl, ELEMENTWISE_WEIGHTS)(x))
        n, d = case.n, case.d
        eps = formula.LAYOUT.setting(params, "norm_eps")
        norm = params[formula.NORM]
        assert isinstance(norm, torch.Tensor)
        rho = torch.sqrt(f64(x).square().mean(dim=-1, keepdim=True) + eps)
        gate = n * rho * h_pre / (1.0 + norm).reshape(n, d)
    outside = float((gate.clamp(max=0.0).abs() + (gate - 1.0).clamp(min=0.0)).max())
    ctx.record.expect("gate outside [0, 1]", outside)
    outside_post = float((h_post.clamp(max=0.0).abs() + (h_post - 2.0).clamp(min=0.0)).max())
    ctx.record.expect("h_post outside [0, 2]", outside_post)
