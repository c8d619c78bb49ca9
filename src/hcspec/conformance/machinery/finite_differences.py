"""Finite differences against autograd, shared by the families that check gradients
(``gradients.fd_*``, ``stack.fd_gradients``): the directional derivative of a scalar loss
``t ↦ L(x + t v)`` by a central difference (Richardson-extrapolated for an impl computing in
float32, a least-squares fit for one returning bfloat16/float16), the step and the measured
rounding terms for the run's effective dtype (``ctx.precision.output``), and one recorded
comparison with autograd's ``⟨∇L, v⟩`` under :data:`hcspec.conformance.rules.FD` (whose
budget is stated there)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import torch

from hcspec.conformance.machinery.base import Context, Inconclusive
from hcspec.conformance.rules import eps

# to the derivative. Cancellation: each L = ⟨G', X'⟩ = Σ G'_i X'_i is computed with a rounding
# error of about √k·eps·M (k ≤ 768 terms adding like a random walk, M = Σ|G'_i X'_i|), so the
# difference quotient carries ~√k·eps·M/h — with M ≈ 2000 (scale-10 states) that is 4e-7,
# measured 1.3e-6 absolute on the reference (soak, 30 seeds; 0.43 of a fixed 1e-6 allowance).
# The check divides by max(1, |autograd|), so the allowance is the rule's budget
# (hcspec.conformance.rules.FD: FD_DIRECTIONAL) plus :func:`fd_cancellation` over that divisor.
# torch.autograd.gradcheck uses the same step (with atol 1e-5 / rtol 1e-3 by default).
FD_STEP: Final = 1e-6
"""The float64 step (see above)."""
FD_CANCELLATION: Final = 32.0
"""√k for the kit's largest k = 768 terms of ⟨G', X'⟩ (see above)."""


def fd_cancellation(dtype: torch.dtype, loss_magnitude: float) -> float:
    """Absolute cancellation allowance of a float64 central difference (step :data:`FD_STEP`)
    of ``L = ⟨G', X'⟩`` whose terms have magnitude ``loss_magnitude = Σ|G'_i X'_i|``; 0 for an
    impl computing in float32 or coarser inside, whose measured budget
    (:data:`hcspec.conformance.rules.gradients.FD_DIRECTIONAL_COARSE`) already includes it."""
    if dtype != torch.float64:
        return 0.0
    return FD_CANCELLATION * eps(torch.float64) * loss_magnitude / FD_STEP


# An impl that declares it computes in float32 inside (Conventions.compute_dtype) rounds every
# loss evaluation to float32 even for float64 input: with step 1e-6 the cancellation error is
# eps32/1e-6 ≈ 0.1, so finite differences measure noise (hyper-connections' mHC: 0.22–0.79).
# A step that rises above float32 rounding must be relative to the state's magnitude, and its
# O(h²) truncation error is then removed by Richardson extrapolation over h and h/2
# (O(h⁴) remains). Measured on hyper-connections 0.4.11 ManifoldConstrainedHyperConnections
# (float32 inside, float64 input; 6 seeds × n ∈ {2, 4, 8} × d ∈ {5, 12, 24} × state scale
# {0.1, 1, 10} × parameter noise {0, 0.3, 1}, 3 directions each): plain central differences
# worst 7.4e-3 (step 1e-3) and 6.7e-2 (step 3e-3); Richardson with step 3e-3 worst 2.7e-3.
# The rounding noise of each float32 loss evaluation is proportional to the magnitude of the
# loss's terms, which grows with the state's magnitude, so the difference is compared relative to
# max(1, |autograd|, state scale) (:func:`fd_denominator`); w.r.t. the parameters the same step
# (the perturbed parameters are O(0.01–1)) gave worst 5.9e-3 relative to max(1, |autograd|)
# over the grid above, and 1.2e-2 on one ci case at state scale 10 with |autograd| = 0.48
# (1.2e-3 relative to the scale): the rule allows 1e-2 (hcspec.conformance.rules.FD,
# FD_DIRECTIONAL_COARSE, ≈ 4× the worst measured).
FD_STEP_COARSE: Final = 3e-3
"""The float32-inside step, relative to the magnitude of what is varied (see above)."""


# An impl that *returns* bfloat16 or float16 (declared output_dtype, as DeepSeek's TileKernels
# references) rounds every output entry by up to eps/2 of its magnitude: with the float32 step
# (3e-3 × the state's magnitude) X' moves by less than one ulp, and the difference quotient is
# an ulp over 2h (fd 0.535 vs autograd 0.327 seen). For such an output the kit evaluates the
# loss at FD_FIT_POINTS evenly spaced points of [−h, h] with h = FD_STEP_LOW × the magnitude of
# what is varied (X' then moves by ~8 ulps over the interval) and takes the slope at 0 of the
# least-squares polynomial of degree FD_FIT_DEGREE (truncation O(h⁴), as Richardson's). The
# slope is a fixed linear combination Σ w_j L(t_j), so the rounding in the L(t_j) changes it by
# at most max_j|δ_j| · Σ|w_j|. The rounding is a staircase in t (neighbouring points share
# ulps), so it is not averaged away, but the fit's residuals L(t_j) − p(t_j) measure it on the
# output the impl returned: the kit allows max_j|residual_j| · Σ|w_j| on top of
# the rule's FD_DIRECTIONAL_COARSE. Where the loss moves by less than its rounding over the whole
# interval (a weak direction: n = 1, d = 2, one token, seen fd 0 vs autograd −0.044) the
# staircase may not step at all and the residuals are 0, so the kit adds the resolution of the
# returned output, eps/2 · ‖G' ⊙ X'‖₂ / h: the slope that one rounding unit of the loss over
# the half-interval makes (:func:`fd_resolution`). A smaller step would be buried in the
# staircase, a larger one leaves the range where a saturating branch (tanh at state scale 10)
# is a polynomial of degree 4.
FD_STEP_LOW: Final = 0.03
FD_STEP_LOW_LADDER: Final = (1.0, 1 / 3)
"""Fractions of :data:`FD_STEP_LOW` tried in turn: a strongly perturbed impl (parameters
N(0, 1) on an N(0, 0.02) init: logits ~10 at d = 20, state scale 10) is not a quartic over
[−h, h] (TileKernels' references: fd 6.3 vs autograd 39 at h = 0.3), and a smaller step has
more rounding; the property passes when one step of the ladder agrees within its own
allowance, and every step is evaluated so that the closest one is recorded (its ratio is the
verdict's margin). A wrong gradient disagrees at every step, but the allowance of bfloat16 finite
differences is wide: a detached residual in a bfloat16-output stand-in fails 24 of 180 cases
(n = 1–8, d = 2–12, state scale 0.1–10), against every case in float64."""
FD_FIT_POINTS: Final = 32
FD_FIT_DEGREE: Final = 4


def fd_fit(dtype: torch.dtype) -> bool:
    """Whether finite differences are a least-squares polynomial fit over
    :data:`FD_FIT_POINTS` points (a bfloat16/float16 effective dtype) instead of a central
    difference."""
    return eps(dtype) > eps(torch.float32)


def fd_fit_matrix() -> torch.Tensor:
    """``pinv(V) [FD_FIT_DEGREE + 1, FD_FIT_POINTS]`` float64 for the Vandermonde matrix ``V``
    of ``u = linspace(−1, 1, FD_FIT_POINTS)``: row k gives the coefficient of ``u^k`` of the
    least-squares polynomial (row 1 over the step: the slope at 0)."""
    u = torch.linspace(-1.0, 1.0, FD_FIT_POINTS, dtype=torch.float64)
    vandermonde = torch.stack([u ** k for k in range(FD_FIT_DEGREE + 1)], dim=1)
    pinv: torch.Tensor = torch.linalg.pinv(vandermonde)
    return pinv


def fd_fit_slope(values: torch.Tensor, step: float) -> tuple[float, float]:
    """``(slope at 0, rounding allowance)`` of the loss ``values [FD_FIT_POINTS]`` float64 taken
    at ``t = step · linspace(−1, 1)``: the least-squares polynomial's slope, and
    ``max|residual| · Σ|w|`` where ``w`` (row 1 of :func:`fd_fit_matrix` over ``step``) are the
    weights of the slope and the residuals those of the fit (see the comment above)."""
    pinv = fd_fit_matrix()
    u = torch.linspace(-1.0, 1.0, FD_FIT_POINTS, dtype=torch.float64)
    coefficients = pinv @ values
    vandermonde = torch.stack([u ** k for k in range(FD_FIT_DEGREE + 1)], dim=1)
    residual = values - vandermonde @ coefficients
    weights = pinv[1] / step
    return float(coefficients[1]) / step, float(residual.abs().max() * weights.abs().sum())


def fd_resolution(dtype: torch.dtype, weighted_norm: float, step: float) -> float:
    """``eps/2 · weighted_norm / step`` for a bfloat16/float16 effective dtype, where
    ``weighted_norm = ‖G' ⊙ X'‖₂`` is measured on the returned output: the smallest slope the
    rounded loss can show over ``[−step, step]``; 0 for float32 and float64."""
    if not fd_fit(dtype):
        return 0.0
    return eps(dtype) / 2 * weighted_norm / step


def step_size(dtype: torch.dtype, scale: float = 1.0) -> float:
    """Finite-difference step for an impl whose effective dtype is ``dtype`` (the coarsest of
    the working, compute and output dtypes): :data:`FD_STEP` for float64;
    :data:`FD_STEP_COARSE` × ``scale`` (the magnitude of what is varied) for float32;
    :data:`FD_STEP_LOW` × ``scale`` for bfloat16/float16."""
    if dtype == torch.float64:
        return FD_STEP
    return (FD_STEP_COARSE if dtype == torch.float32 else FD_STEP_LOW) * scale


def fd_richardson(dtype: torch.dtype) -> bool:
    """Whether finite differences are Richardson-extrapolated (float32 and coarser inside)."""
    return dtype != torch.float64


def fd_denominator(dtype: torch.dtype, autograd: float, scale: float) -> float:
    """What ``|fd − autograd|`` is divided by: ``max(1, |autograd|)`` for float64;
    ``max(1, |autograd|, scale)`` for float32 and coarser inside, whose rounding noise grows
    with the state's magnitude ``scale``."""
    if dtype == torch.float64:
        return max(1.0, abs(autograd))
    return max(1.0, abs(autograd), scale)


def precision_note(ctx: Context, step: float) -> str:
    """Which precision the finite differences were chosen for, as the report shows it."""
    output = ctx.conventions.output_dtype
    returned = f", returns {output}" if output is not None else ""
    if fd_fit(ctx.precision.output):
        how = f", degree-{FD_FIT_DEGREE} fit over {FD_FIT_POINTS} points"
    else:
        how = ", Richardson" if fd_richardson(ctx.precision.output) else ""
    return f"compared in {ctx.precision.output}{returned}: step {step:.2g}{how}"


def fd_given(ctx: Context, magnitude: tuple[float, float], rounding: float, step: float,
             denominator: float) -> dict[str, Any]:
    """The inputs of :data:`hcspec.conformance.rules.FD` for ``|fd − autograd| /
    denominator``: float64 cancellation, the measured low-precision output rounding and the
    output's resolution at ``step`` (the rule adds the effective dtype's budget)."""
    return {"denominator": denominator,
            "cancellation": fd_cancellation(ctx.precision.output, magnitude[0]),
            "rounding": rounding,
            "resolution": fd_resolution(ctx.precision.output, magnitude[1], step)}


def expect_directional(ctx: Context, label: str, loss_at: Callable[[float], float],
                       scale: float, ad: float, denominator: float,
                       magnitude: tuple[float, float]) -> None:
    """Record ``|fd − ad| / denominator`` under :data:`hcspec.conformance.rules.FD` with the
    inputs :func:`fd_given` computes (``magnitude``:
    ``(Σ|terms of L|, ‖terms of L‖₂)``, the size of the loss's terms); for an effective dtype
    of float32, each of :func:`attempts` until one agrees; for bfloat16/float16, every step of
    the ladder. The check passes when one step agrees with an allowance below
    :data:`VACUOUS_RELATIVE`, so the step recorded is the closest such one: its error ÷
    allowance is the verdict's margin (the first step that agreed could read 0.95 of its
    allowance, its fit bent by the loss's curvature, where the other read 0.13). A step that
    agrees only vacuously no longer hides a later one that demonstrates the property.

    Raises:
        PropertyFailure: no step agrees.
        Inconclusive: every step that agrees has an allowance of :data:`VACUOUS_RELATIVE` or
            more.
    """
    tried: list[_Tried] = []
    whole_ladder = fd_fit(ctx.precision.output)
    for fraction, fit in attempts(ctx):
        step_scale = scale * fraction
        fd, rounding = directional(ctx, loss_at, step_scale, fit)
        step = step_size(ctx.precision.output, step_scale)
        given = fd_given(ctx, magnitude, rounding, step, denominator)
        allowed = ctx.record.allowance(**given).allowance
        error = abs(fd - ad) / denominator
        tried.append(_Tried(error / allowed if allowed > 0 else math.inf, error, allowed,
                            given, fd, step))
        if error <= allowed and not whole_ladder:
            break
    _, error, allowed, given, fd, step = min(tried, key=_closest_demonstrating)
    if error <= allowed and allowed >= VACUOUS_RELATIVE:
        smallest = min(t.allowed for t in tried if t.error <= t.allowed)
        raise Inconclusive(
            f"{label}: every step that agrees has an allowance of {smallest:.3g} of the "
            f"derivative or more (fd {fd:.6g}, autograd {ad:.6g}): the loss is too rough at "
            "these steps (rounding or randomness the fit's residuals measured), so even a zero "
            "gradient would pass; this case cannot demonstrate the property")
    others = "; other steps: " + ", ".join(f"{t.step:.2g}: fd {t.fd:.6g}" for t in tried
                                          if t.step != step) if len(tried) > 1 else ""
    if ctx.precision.output != torch.float64:  # say which precision the step was chosen for
        label = f"{label} ({precision_note(ctx, step)})"
    ctx.record.expect(label, error, detail=f"fd {fd:.6g}, autograd {ad:.6g}{others}", **given)


class _Tried(NamedTuple):
    """One step of :func:`expect_directional`: error ÷ allowance, error, allowance, the rule's
    inputs, the finite difference and the step."""

    ratio: float
    error: float
    allowed: float
    given: dict[str, Any]
    fd: float
    step: float


def _closest_demonstrating(tried: _Tried) -> tuple[bool, bool, float]:
    """Sort key of a tried step: those that agree with a demonstrating allowance (below
    :data:`VACUOUS_RELATIVE`) first, then those that agree only with a vacuous one, then those
    that disagree; the closest first within each."""
    agrees = tried.error <= tried.allowed
    return not agrees, agrees and tried.allowed >= VACUOUS_RELATIVE, tried.ratio


VACUOUS_RELATIVE: Final = 1.0
"""An allowance of ``|fd − autograd| / denominator`` at or above 1 lets a zero gradient pass:
the comparison demonstrates nothing (a loss whose fit residuals are large: a forward that draws
random numbers, dropout on the residual path)."""


def attempts(ctx: Context) -> list[tuple[float, bool]]:
    """``(fraction of the step, polynomial fit?)`` tried in turn by :func:`expect_directional`
    (float32: until one agrees; bfloat16/float16: all of them). bfloat16/float16 effective
    dtype: the fit at each step of :data:`FD_STEP_LOW_LADDER`. float32 inside:
    Richardson, then :data:`FD_FIT_FALLBACK`: the least-squares fit over the same interval,
    whose residuals measure the rounding of the loss evaluations (at a strongly perturbed case
    the float32 loss's rounding, amplified by the step, exceeded the fixed Richardson budget:
    fd 1377 vs autograd 1076 on a correct DeepSeek-V4 module; fd −3.715 vs −3.828 on the
    DeepSeek-V4 formula stand-in at n = 4, d = 128, state scale 10). float64: one central
    difference."""
    if fd_fit(ctx.precision.output):
        return [(fraction, True) for fraction in FD_STEP_LOW_LADDER]
    if fd_richardson(ctx.precision.output):
        return [(1.0, False), *FD_FIT_FALLBACK]
    return [(1.0, False)]


FD_FIT_FALLBACK: Final[tuple[tuple[float, bool], ...]] = ((1.0, True), (1 / 3, True))
"""The fits tried (fraction of the float32 step) after a float32 Richardson difference
disagrees: the whole interval, then a third of it (a loss too curved for a quartic over it)."""


def directional(ctx: Context, loss_at: Callable[[float], float],
                scale: float, fit: bool | None = None) -> tuple[float, float]:
    """``(directional derivative, rounding allowance)`` of ``t ↦ loss_at(t)`` at 0 with
    :func:`step_size`: a central difference; for an impl computing in float32 inside,
    Richardson-extrapolated from steps h and h/2 (truncation O(h⁴), so a step large enough to
    rise above float32 rounding stays accurate); for an impl returning bfloat16/float16, the
    slope of a least-squares polynomial over :data:`FD_FIT_POINTS` points of
    ``[−h, h]`` with the rounding allowance its residuals give
    (:func:`fd_fit_slope`; ``fit`` forces or forbids the fit, default: by dtype); the
    allowance is 0 otherwise."""
    h = step_size(ctx.precision.output, scale)
    if fd_fit(ctx.precision.output) if fit is None else fit:
        points = torch.linspace(-h, h, FD_FIT_POINTS, dtype=torch.float64)
        values = torch.tensor([loss_at(float(t)) for t in points], dtype=torch.float64)
        return fd_fit_slope(values, h)
    central = (loss_at(h) - loss_at(-h)) / (2 * h)
    if not fd_richardson(ctx.precision.output):
        return central, 0.0
    half = (loss_at(h / 2) - loss_at(-h / 2)) / h
    return (4 * half - central) / 3, 0.0
