"""Dtype family: a bfloat16/float16 forward is close to the float32 forward of the same impl
(same seed, same perturbation, the same state and branch rounded to the low dtype), within
:func:`hcspec.conformance.rules.low_precision`, and returns the low dtype; float32
gradients are
close to float64 ones. Every forward of the family starts from the same global RNG state, so
an impl that draws random numbers (dropout) is compared with itself under the same draws: its
randomness is the business of the law and state families, not of this one. A dtype the factory
rejects is skipped, with the factory's message; both rejected makes the property not
applicable.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from hcspec.conformance.author import (
    DIFFERENTIABLE,
    LOGITS,
    SCALE_HEADROOM,
    SMOOTH_BRANCHES,
    WEIGHTS_OR_PROBING,
    Branch,
    Case,
    Cases,
    Context,
    FactoryRejected,
    HyperConnectionImpl,
    MHCWeights,
    NotApplicable,
    PropertyFailure,
    declare,
    expected_output,
    f64,
    float64,
    floating_parameters,
    forward_backward,
    metrics,
    probes,
    rules,
    salts,
    seeded_global_rng,
    shift,
    strategies,
)
from hcspec.conformance.machinery.precision import SpecAtPrecision
from hcspec.conformance.machinery.sinkhorn_variant import declared, target_logits
from hcspec.formulas import mhc

BASE = ("shape.output", "shape.branch_once")
LOW = (torch.bfloat16, torch.float16)
JITTER_SEED_STRIDE = 7919
"""Jitter sample k of a case draws its signs from ``case.seed·JITTER_SEED_STRIDE + k``."""


class _Float32Branch(torch.autograd.Function):
    """The kit's branch evaluated in float32 (forward and backward) inside a float64 graph:
    what the float32 run's branch contributes to its gradients' error, and nothing else."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, fn: Branch) -> torch.Tensor:
        """``fn(t)`` evaluated on ``t`` rounded to float32, returned in ``t``'s dtype (same
        shape as ``fn``'s output, on ``t``'s device); ``t`` and ``fn`` are kept for
        :meth:`backward`."""
        ctx.save_for_backward(t)
        ctx.fn = fn
        return fn(t.detach().to(torch.float32)).to(t.dtype)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, None]:
        """The VJP of ``fn`` at ``t`` rounded to float32, with the upstream gradient rounded to
        float32, returned in ``t``'s dtype and shape; None for ``fn`` (not differentiable)."""
        (t,) = ctx.saved_tensors
        with torch.enable_grad():
            t32 = t.detach().to(torch.float32).requires_grad_(True)
            (g,) = torch.autograd.grad(ctx.fn(t32), t32, grads[0].to(torch.float32))
        return g.to(t.dtype), None


def _float32_branch(case: Case, device: str) -> Branch:
    """The case's branch with float32 constants, applied through :class:`_Float32Branch`."""
    fn32 = strategies.make_branch(case.branch, case.d, torch.float32, device, seed=case.seed)

    def branch(t: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = _Float32Branch.apply(t, fn32)  # type: ignore[no-untyped-call]
        return out

    return branch


def _gradients(ctx: Context, impl: HyperConnectionImpl, case: Case, dtype: torch.dtype,
               jitter: int | None = None, branch32: bool = False,
               ) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """(∂L/∂x, ∂L/∂θ for the floating parameters, X') of ``L = ⟨G', X'⟩`` in ``dtype``;
    with ``jitter``, at ``x`` and ``θ`` moved by one float32 unit roundoff, relative, with
    random signs (sample ``jitter``; the parameters are restored afterwards); with
    ``branch32``, the kit's branch computes in float32 (:class:`_Float32Branch`)."""
    x = ctx.inputs.state(case, dtype=dtype)
    gen = None if jitter is None else torch.Generator().manual_seed(
        case.seed * JITTER_SEED_STRIDE + jitter)
    if gen is not None:  # one factor per stream-0 entry when the state must stay replicated
        factors = _unit_roundoff_factors(x[..., :1, :] if ctx.replicated else x, gen)
        x = x * factors.expand_as(x)
    G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), dtype, ctx.device)
    params = floating_parameters(impl, trainable=True)
    fn = (_float32_branch(case, ctx.device) if branch32 else
          strategies.make_branch(case.branch, case.d, dtype, ctx.device, seed=case.seed))

    def forward(leaf: torch.Tensor) -> torch.Tensor:
        out = probes.forward_on_copy(impl, leaf, fn)
        ctx.record.require(out.requires_grad,
                           f"the {dtype} forward's output is not connected to autograd")
        return out

    saved = [p.detach().clone() for p in params] if gen is not None else []
    try:
        if gen is not None:
            with torch.no_grad():
                for p in params:
                    p.mul_(_unit_roundoff_factors(p, gen))
        with seeded_global_rng(case.seed, ctx.device):  # every call draws the same numbers
            out, grads = forward_backward(forward, x, G, params)
    finally:
        if gen is not None:
            with torch.no_grad():
                for p, value in zip(params, saved, strict=True):
                    p.copy_(value)
    filled = [torch.zeros_like(t) if g is None else g for t, g in zip([x, *params], grads,
                                                                         strict=True)]
    return filled[0], filled[1:], out


def _gradient_examples(ctx: Context) -> list[Case]:
    return Cases().examples(ctx) + Cases(branch="linear").examples(ctx)[1:3]


@declare(
    "dtype.float32_gradients",
    statement="float32 gradients w.r.t. x and the parameters match float64 (dtype-aware)",
    theorems=("backward.closed_form",),
    requires=(DIFFERENTIABLE, float64("compares float32 gradients with float64 ones")),
    tolerance=rules.GRADIENT_FLOAT32, examples=_gradient_examples,
    cases=Cases(branches=SMOOTH_BRANCHES, extreme_scales=False), prerequisites=BASE)
def check_float32_gradients(ctx: Context, case: Case) -> None:
    """float32 gradients (w.r.t. x and the parameters, one vector) equal the float64 ones
    (same parameter values) in relative 2-norm within
    :func:`hcspec.conformance.rules.gradient_float32` at the case's measured conditioning (how
    far the float64 gradients move when x and θ move by one float32 unit roundoff) — catches
    a backward that is wrong only in float32 (e.g. a cast inside a custom backward), which
    float64 finite differences cannot see. The allowance includes the error of the kit's own
    branch: the float64 gradients recomputed with only the branch in float32
    (:class:`_Float32Branch`), which a residual path without gradient does not dilute."""
    ctx.build.make(case)  # a configuration the factory rejects in the working dtype: skip the case
    impl64 = ctx.build.make(case, dtype=torch.float64)
    try:
        impl32 = ctx.build.make(case, dtype=torch.float32)
    except FactoryRejected as exc:
        raise NotApplicable(f"needs float64 and float32: {exc}") from exc
    ctx.build.align(impl64, impl32)
    gx64, gp64, _ = _gradients(ctx, impl64, case, torch.float64)
    gx32, gp32, _ = _gradients(ctx, impl32, case, torch.float32)
    names = ["x"] + [f"parameter {i} {list(g.shape)}" for i, g in enumerate(gp64)]
    want = [f64(g) for g in (gx64, *gp64)]
    got = [f64(g) for g in (gx32, *gp32)]
    error, diffs = _relative_error(got, want)
    if not all(bool(torch.isfinite(g).all()) for g in got):
        error = math.inf
    worst = names[int(torch.stack(diffs).argmax())]
    sensitivity = max(
        _relative_error([f64(g) for g in (gx, *gp)], want)[0]
        for gx, gp, _ in (_gradients(ctx, impl64, case, torch.float64, jitter=k)
                          for k in range(rules.GRADIENT_SENSITIVITY_SAMPLES)))
    if not math.isfinite(sensitivity):  # non-finite float64 gradients: no allowance
        sensitivity = 0.0
    gx_b, gp_b, _ = _gradients(ctx, impl64, case, torch.float64, branch32=True)
    branch_error = _relative_error([f64(g) for g in (gx_b, *gp_b)], want)[0]
    if not math.isfinite(branch_error):
        branch_error = 0.0
    ctx.record.expect("‖float32 − float64‖ / ‖float64‖ over (∂L/∂x, ∂L/∂θ)", error,
               sensitivity=sensitivity, branch_error=branch_error, detail=
               f"largest difference in ∂L/∂{worst}; float64 gradients move by "
               f"{sensitivity:.2g} (relative) when x and θ move by one float32 unit roundoff; "
               f"the kit's own branch in float32 alone moves them by {branch_error:.2g}")


def _relative_error(got: list[torch.Tensor],
                    want: list[torch.Tensor]) -> tuple[float, list[torch.Tensor]]:
    """‖got − want‖ / ‖want‖ over the concatenated tensors (the absolute norm when ``want``
    is 0), and the per-tensor difference norms."""
    diffs = [(g - w).norm() for g, w in zip(got, want, strict=True)]
    total = float(torch.stack([w.norm() for w in want]).norm())
    norm = float(torch.stack(diffs).norm())
    return (norm / total if total > 0 else norm), diffs


def _unit_roundoff_factors(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``1 ± eps32`` per entry of ``t`` (random signs from ``gen``), in ``t``'s dtype/device."""
    signs = torch.randint(0, 2, t.shape, generator=gen, dtype=torch.float64) * 2 - 1
    factors = 1 + torch.finfo(torch.float32).eps * signs
    return factors.to(device=t.device, dtype=t.dtype)


@declare(
    "dtype.low_precision",
    statement="bfloat16/float16 forward is close to float32 (dtype-aware) and keeps its dtype",
    tolerance=rules.LOW_PRECISION, cases=Cases(extreme_scales=False), prerequisites=BASE)
def check_low_precision(ctx: Context, case: Case) -> None:
    """bfloat16/float16 forward vs float32 forward (scaled error ≤ 32·eps of the low dtype)."""
    ctx.build.make(case)  # a configuration the factory rejects in the working dtype: skip the case
    try:
        impl32 = ctx.build.make(case, dtype=torch.float32)
    except FactoryRejected as exc:
        raise NotApplicable(f"the factory rejects float32: {exc}") from exc
    x32 = ctx.inputs.state(case, dtype=torch.float32)
    with torch.no_grad(), seeded_global_rng(case.seed, ctx.device):
        branch32 = ctx.inputs.branch(case, dtype=torch.float32, record=False)
        out32 = ctx.observe.forward(impl32, x32, branch32)
    ran = []
    for dtype in LOW:
        try:
            impl = ctx.build.make(case, dtype=dtype)
        except FactoryRejected:
            continue
        ran.append(dtype)
        ctx.build.align(impl32, impl)
        x = ctx.inputs.state(case, dtype=dtype)
        with torch.no_grad(), seeded_global_rng(case.seed, ctx.device):  # the same draws
            branch = ctx.inputs.branch(case, dtype=dtype, record=False)
            out = probes.forward_on_copy(impl, x, branch)
        returns = ctx.observe.output_dtype(dtype)
        ctx.record.require(isinstance(out, torch.Tensor) and out.dtype == returns,
                           f"{dtype} forward returned {getattr(out, 'dtype', type(out).__name__)}, "
                           f"expected {ctx.observe.describe_output_dtype(dtype)}")
        scale = max(float(x32.abs().max()), float(out32.abs().max()))
        precision = rules.effective_dtype(dtype, None, ctx.conventions.output_dtype)
        ctx.record.expect(f"{dtype} forward vs float32 forward",
                   metrics.scaled_error(out, out32, scale), detail=f"compared in {precision}",
                   dtype=precision)
    if not ran:
        raise NotApplicable("the factory rejects bfloat16 and float16: "
                            + " | ".join(ctx.rejected[-2:]))


LARGEST_SCALE = 1e6
"""The state scale of the at-scale case that stresses the magnitudes: capped, per dtype, at
:func:`largest_state_scale` (float16: 1e3; bfloat16: the cap itself, 1e6, the largest
extreme scale the kit draws)."""

AT_SCALE: tuple[Case, ...] = (
    Case(2, 9, 8, 257, layer_index=1, seed=0, perturb=0.3),
    Case(1, 5, 8, 257, layer_index=2, seed=1, perturb=1.0, scale=10.0),
    Case(1, 4, 8, 257, layer_index=3, seed=2, perturb=0.3, scale=LARGEST_SCALE),
)
"""The sizes of ``dtype.low_precision_at_scale``: n = 8 streams of d = 257 features, so the
weights' reductions run over n·d = 2056 terms (the other dtype cases have n·d ≤ 48), at state
scales 1, 10 and the largest the dtype holds (:func:`largest_state_scale`): a float16 sum of
the n·d squares overflows from an RMS of √(65504 / 2056) ≈ 5.6 on, so a reduction that sums
squares in float16 shows at scale 10 and beyond and never at scale 1."""


def largest_state_scale(dtype: torch.dtype, n: int, d: int, cap: float = LARGEST_SCALE) -> float:
    """The largest power of ten ``s ≤ cap`` whose state a correct impl of ``dtype`` holds with
    headroom: its output (entries up to :data:`SCALE_HEADROOM` · s) is finite in ``dtype``, and
    the float32 sum of the n·d squares of such entries, what a correct kernel accumulates,
    is finite in float32. float16 → 1e3 (1e3 · 64 = 64000 ≤ 65504); bfloat16 → ``cap``."""
    top = min(torch.finfo(dtype).max / SCALE_HEADROOM,
              math.sqrt(torch.finfo(torch.float32).max / (n * d)) / SCALE_HEADROOM, cap)
    return float(10.0 ** math.floor(math.log10(top)))


def _for_dtype(case: Case, dtype: torch.dtype) -> Case:
    """``case`` with its state scale capped at the largest ``dtype`` holds."""
    return dataclasses.replace(case, scale=min(case.scale,
                                               largest_state_scale(dtype, case.n, case.d)))


def _at_scale(ctx: Context) -> list[Case]:
    kept = [c for c in AT_SCALE  # past max_parameters: left out (and counted) by the builder
            if ctx.conventions.unsupported_size(c.n, c.d, parameters=False) is None]
    if not kept:
        raise NotApplicable("the impl declares sizes that exclude n = 8, d = 257: "
                            + str(ctx.conventions.unsupported_size(8, 257)))
    return shift(ctx, kept)


ROUNDING_SAMPLES = 2
"""Random-sign samples of the rounding floor of ``dtype.low_precision_at_scale``."""


def _rounding_floor(ctx: Context, impl32: HyperConnectionImpl, x32: torch.Tensor,
                    out32: torch.Tensor, case: Case, dtype: torch.dtype, scale: float) -> float:
    """How far the float32 forward moves when its state and parameters move by one unit
    roundoff of ``dtype`` (relative, random signs; the largest of :data:`ROUNDING_SAMPLES`):
    the conditioning a correct ``dtype`` impl's own roundings (its parameters, the weights'
    intermediates) act through (a replicated-domain impl's state moves as one stream). The
    parameters are restored afterwards."""
    unit = torch.finfo(dtype).eps / 2
    params = floating_parameters(impl32, trainable=False)
    saved = [p.detach().clone() for p in params]
    worst = 0.0
    try:
        for k in range(ROUNDING_SAMPLES):
            gen = torch.Generator().manual_seed(case.seed * JITTER_SEED_STRIDE + k)

            def factors(t: torch.Tensor, gen: torch.Generator = gen) -> torch.Tensor:
                signs = torch.randint(0, 2, t.shape, generator=gen, dtype=torch.float64) * 2 - 1
                return (1 + unit * signs).to(device=t.device, dtype=t.dtype)

            with torch.no_grad():
                for p, value in zip(params, saved, strict=True):
                    p.copy_(value * factors(value))
                # a replicated-domain impl takes only 1_n hᵀ: move h, keep the streams equal
                moved = x32 * (factors(x32[..., :1, :]).expand_as(x32) if ctx.replicated
                               else factors(x32))
                with seeded_global_rng(case.seed, ctx.device):
                    out = ctx.observe.forward(impl32, moved, ctx.inputs.branch(
                        case, dtype=torch.float32, record=False))
            worst = max(worst, metrics.scaled_error(out, out32, scale))
    finally:
        with torch.no_grad():
            for p, value in zip(params, saved, strict=True):
                p.copy_(value)
    return worst


def _logits_floor(ctx: Context, impl32: HyperConnectionImpl, x32: torch.Tensor,
                  case: Case, dtype: torch.dtype, scale: float) -> float:
    """How far the closed-form output moves when the float32 impl's own logits (``logits(x)``,
    where the target offers them) are held in the compute dtype and the weights are the
    declared formula's of them: an intermediate a correct ``dtype`` impl must round, whose
    effect the random-sign jitter of :func:`_rounding_floor` averages away. A logit of
    magnitude L rounds by up to ``L·u``, which moves ``exp`` (and so Sinkhorn–Knopp's
    ``H_res``) by the relative ``L·u``: at the logits near 150 of a state scale of 10, a
    bfloat16 logit moves H_res by ~0.035 (0 where the compute dtype is declared float32).
    0 for a target without logits, a kind other than mHC, or logits of another form."""
    if not (ctx.kind == "mhc" and LOGITS in ctx.capabilities):
        return 0.0
    compute = ctx.conventions.compute_dtype or dtype
    f = declared(ctx)
    try:
        with torch.no_grad():
            logits = target_logits(impl32, x32, f)
    except PropertyFailure:
        return 0.0
    exact = mhc.weights(f, *(f64(t) for t in logits))
    held = mhc.weights(f, *(f64(t.to(compute)) for t in logits))
    want = expected_output(ctx, case, x32, *exact)[0]
    moved = expected_output(ctx, case, x32, *held)[0]
    return metrics.scaled_error(moved, want, scale)


@declare(
    "dtype.low_precision_at_scale",
    statement="at n = 8, d = 257, bfloat16/float16 forward vs float32 within 8 × the measured "
              "floor",
    theorems=("layout.paper_rows",), requires=(WEIGHTS_OR_PROBING,),
    tolerance=rules.MEASURED_FLOOR, examples=_at_scale, prerequisites=BASE, explore=False)
def check_low_precision_at_scale(ctx: Context, case: Case) -> None:
    """At the sizes real models use (:data:`AT_SCALE`), the bfloat16/float16 forward equals the
    float32 forward of the same impl (the same parameter values and the same rounded state)
    within :func:`hcspec.conformance.rules.law_measured` of the measured floor: the error
    the spec's closed form (HC Eq. 3–5, mHC Eq. 3) makes in that precision
    (:class:`hcspec.conformance.machinery.precision.SpecAtPrecision`, the float32 impl's
    weights rounded to the compute dtype) against float64 on the same case. A reduction
    accumulated in the low precision (the RMS of vec(X) or the projections, 2056 terms here)
    exceeds it; one accumulated in float32 does not.

    Raises:
        PropertyFailure: a low-precision output differs beyond the allowance, or is not the
            declared output dtype.
        NotApplicable: the factory rejects float32, or both bfloat16 and float16; ``h_pre``
            cannot be probed under the declared branch input.
    """
    ctx.build.make(case)  # a configuration the factory rejects in the working dtype: skip it
    try:
        impl32 = ctx.build.make(case, dtype=torch.float32)
    except FactoryRejected as exc:
        raise NotApplicable(f"the factory rejects float32: {exc}") from exc
    ran = []
    given = case
    for dtype in LOW:
        try:
            impl = ctx.build.make(given, dtype=dtype)
        except FactoryRejected:
            continue
        ran.append(dtype)
        ctx.build.align(impl32, impl)
        case = _for_dtype(given, dtype)
        x = ctx.inputs.state(case, dtype=dtype)
        x32 = x.to(torch.float32)  # the same rounded values
        w = MHCWeights(ctx, impl32, x32, case)
        if w.h_pre is None:
            raise NotApplicable("h_pre is not identifiable by probing under the declared branch "
                                f"input {ctx.conventions.branch_input!r} (needs the weights "
                                "capability)")
        with torch.no_grad(), seeded_global_rng(case.seed, ctx.device):
            out32 = ctx.observe.forward(impl32, x32, ctx.inputs.branch(
                case, dtype=torch.float32, record=False))
        with torch.no_grad(), seeded_global_rng(case.seed, ctx.device):
            out = probes.forward_on_copy(impl, x, ctx.inputs.branch(case, dtype=dtype,
                                                                      record=False))
        returns = ctx.observe.output_dtype(dtype)
        ctx.record.require(isinstance(out, torch.Tensor) and out.dtype == returns,
                           f"{dtype} forward returned {getattr(out, 'dtype', type(out).__name__)}"
                           f", expected {ctx.observe.describe_output_dtype(dtype)}")
        precision = rules.effective_dtype(dtype, None, ctx.conventions.output_dtype)
        want, _, scale = expected_output(ctx, case, x32, w.h_pre, w.h_post, w.H_res)
        spec = SpecAtPrecision(w.h_pre, w.h_post, w.H_res,
                               ctx.conventions.compute_dtype or dtype, precision,
                               ctx.observe.branch_input)
        spec_floor = metrics.scaled_error(spec.forward(x, ctx.inputs.branch(
            case, dtype=dtype, record=False)), want, scale)
        floor = max(spec_floor, _rounding_floor(ctx, impl32, x32, out32, case, dtype, scale),
                    _logits_floor(ctx, impl32, x32, case, dtype, scale))
        error = metrics.scaled_error(out, out32, scale)
        ctx.record.expect(f"{dtype} forward vs float32 forward at n = {case.n}, d = {case.d}, "
                          f"state scale {case.scale:g}",
                          error, dtype=precision, floor=floor,
                          detail=f"compared in {precision}; measured floor {floor:.3g} (the closed "
                          f"form in {precision}: {spec_floor:.3g}; the float32 forward moved by "
                          f"{dtype}'s rounding of x and θ, or by its logits held in the "
                          f"compute dtype: the rest), error/floor "
                          f"{error / max(floor, 1e-300):.3g}",
                          hint="a reduction accumulated in the low precision? (the RMS of "
                               "vec(X) and the projections have n·d terms)")
    if not ran:
        raise NotApplicable("the factory rejects bfloat16 and float16: "
                            + " | ".join(ctx.rejected[-2:]))
