"""Finite differences against autograd, shared by the families that check gradients
(``gradients.fd_*``, ``stack.fd_gradients``): the directional derivative of a scalar loss
``t ↦ L(x + t v)`` by a central difference (Richardson-extrapolated for an impl computing in
float32, a least-squares fit for one returning bfloat16/float16), its allowance for the run's
effective dtype, and one recorded comparison with autograd's ``⟨∇L, v⟩``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import torch

from hcspec.conformance import tolerances
from hcspec.conformance.properties.base import Context, Inconclusive


def precision_note(ctx: Context, step: float) -> str:
    """Which precision the finite differences were chosen for, as the report shows it."""
    output = ctx.conventions.output_dtype
    returned = f", returns {output}" if output is not None else ""
    if tolerances.fd_fit(ctx.tol_dtype):
        how = f", degree-{tolerances.FD_FIT_DEGREE} fit over {tolerances.FD_FIT_POINTS} points"
    else:
        how = ", Richardson" if tolerances.fd_richardson(ctx.tol_dtype) else ""
    return f"compared in {ctx.tol_dtype}{returned}: step {step:.2g}{how}"


def fd_step(ctx: Context, scale: float) -> float:
    """:func:`hcspec.conformance.tolerances.fd_step` for the run's effective dtype."""
    return tolerances.fd_step(ctx.tol_dtype, scale)


def fd_given(ctx: Context, magnitude: tuple[float, float], rounding: float, step: float,
             denominator: float) -> dict[str, Any]:
    """The inputs of :data:`hcspec.conformance.rules.FD` for ``|fd − autograd| /
    denominator``: float64 cancellation, the measured low-precision output rounding and the
    output's resolution at ``step`` (the rule adds the effective dtype's budget)."""
    return {"denominator": denominator,
            "cancellation": tolerances.fd_cancellation(ctx.tol_dtype, magnitude[0]),
            "rounding": rounding,
            "resolution": tolerances.fd_resolution(ctx.tol_dtype, magnitude[1], step)}


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
    whole_ladder = tolerances.fd_fit(ctx.tol_dtype)
    for fraction, fit in attempts(ctx):
        step_scale = scale * fraction
        fd, rounding = directional(ctx, loss_at, step_scale, fit)
        given = fd_given(ctx, magnitude, rounding, fd_step(ctx, step_scale), denominator)
        allowed = ctx.record.allowance(**given).allowance
        error = abs(fd - ad) / denominator
        tried.append(_Tried(error / allowed if allowed > 0 else math.inf, error, allowed,
                            given, fd, fd_step(ctx, step_scale)))
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
    if ctx.tol_dtype != torch.float64:  # say which precision the step was chosen for
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
    dtype: the fit at each step of :data:`tolerances.FD_STEP_LOW_LADDER`. float32 inside:
    Richardson, then :data:`FD_FIT_FALLBACK`: the least-squares fit over the same interval,
    whose residuals measure the rounding of the loss evaluations (at a strongly perturbed case
    the float32 loss's rounding, amplified by the step, exceeded the fixed Richardson budget:
    fd 1377 vs autograd 1076 on a correct DeepSeek-V4 module; fd −3.715 vs −3.828 on the
    DeepSeek-V4 formula stand-in at n = 4, d = 128, state scale 10). float64: one central
    difference."""
    if tolerances.fd_fit(ctx.tol_dtype):
        return [(fraction, True) for fraction in tolerances.FD_STEP_LOW_LADDER]
    if tolerances.fd_richardson(ctx.tol_dtype):
        return [(1.0, False), *FD_FIT_FALLBACK]
    return [(1.0, False)]


FD_FIT_FALLBACK: Final[tuple[tuple[float, bool], ...]] = ((1.0, True), (1 / 3, True))
"""The fits tried (fraction of the float32 step) after a float32 Richardson difference
disagrees: the whole interval, then a third of it (a loss too curved for a quartic over it)."""


def directional(ctx: Context, loss_at: Callable[[float], float],
                scale: float, fit: bool | None = None) -> tuple[float, float]:
    """``(directional derivative, rounding allowance)`` of ``t ↦ loss_at(t)`` at 0 with
    :func:`tolerances.fd_step`: a central difference; for an impl computing in float32 inside,
    Richardson-extrapolated from steps h and h/2 (truncation O(h⁴), so a step large enough to
    rise above float32 rounding stays accurate); for an impl returning bfloat16/float16, the
    slope of a least-squares polynomial over :data:`tolerances.FD_FIT_POINTS` points of
    ``[−h, h]`` with the rounding allowance its residuals give
    (:func:`tolerances.fd_fit_slope`; ``fit`` forces or forbids the fit, default: by dtype); the
    allowance is 0 otherwise."""
    h = fd_step(ctx, scale)
    if tolerances.fd_fit(ctx.tol_dtype) if fit is None else fit:
        points = torch.linspace(-h, h, tolerances.FD_FIT_POINTS, dtype=torch.float64)
        values = torch.tensor([loss_at(float(t)) for t in points], dtype=torch.float64)
        return tolerances.fd_fit_slope(values, h)
    central = (loss_at(h) - loss_at(-h)) / (2 * h)
    if not tolerances.fd_richardson(ctx.tol_dtype):
        return central, 0.0
    half = (loss_at(h / 2) - loss_at(-h / 2)) / h
    return (4 * half - central) / 3, 0.0
