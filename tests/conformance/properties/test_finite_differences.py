"""Finite differences below float32: every step of the ladder is tried, the closest agreeing
step with a demonstrating allowance is the one recorded, and a loss too rough for any step to
demonstrate the property is inconclusive, never a pass."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from hcspec.conformance import rules
from hcspec.conformance.machinery.base import PropertyFailure
from hcspec.conformance.machinery.errors import Inconclusive
from hcspec.conformance.machinery.finite_differences import (
    VACUOUS_RELATIVE,
    _closest_demonstrating,
    _Tried,
    expect_directional,
)
from tests.conformance.properties.support import context

BF16_OUTPUT = "tests.conformance.properties.precision_standins:make_bf16_output"


def _tried(error: float, allowed: float, step: float) -> _Tried:
    return _Tried(error / allowed, error, allowed, {}, 0.0, step)


def test_the_closest_step_that_demonstrates_comes_first() -> None:
    agrees_barely = _tried(0.475, 0.5, 0.03)  # 0.95 of its allowance
    agrees_well = _tried(0.05, 0.4, 0.01)  # 0.125
    agrees_vacuously = _tried(0.01, 2 * VACUOUS_RELATIVE, 0.003)  # 0.005, but demonstrates nothing
    disagrees = _tried(0.9, 0.1, 0.1)
    order = sorted([disagrees, agrees_vacuously, agrees_barely, agrees_well],
                   key=_closest_demonstrating)
    assert order == [agrees_well, agrees_barely, agrees_vacuously, disagrees]


def _expect(loss_at: Callable[[float], float], ad: float) -> tuple[str, float]:
    """Run the bfloat16 finite differences of ``loss_at`` against ``ad``; the recorded
    comparison's label and error ÷ allowance."""
    ctx = context(BF16_OUTPUT)
    ctx.record.declared = (rules.FD,)
    expect_directional(ctx, "directional derivative", loss_at, 1.0, ad, max(1.0, abs(ad)),
                       (1.0, 1.0))
    worst = ctx.record.worst
    assert worst is not None
    return worst.label, worst.error / worst.tolerance


def test_a_loss_curved_over_the_full_step_is_recorded_at_the_smaller_one() -> None:
    label, ratio = _expect(lambda t: math.sin(60.0 * t), 60.0)  # 1.8 rad over the full step
    assert "step 0.01" in label and ratio < 0.05, (label, ratio)


def test_a_wrong_slope_fails_at_every_step() -> None:
    with pytest.raises(PropertyFailure, match=r"other steps: 0\.03: fd 3"):
        _expect(lambda t: 3.0 * t, 1.0)


def test_a_step_that_agrees_only_vacuously_gives_way_to_one_that_demonstrates() -> None:
    noise = torch.Generator().manual_seed(0)

    def rough_outside(t: float) -> float:  # slope 2, noisy only beyond the smaller step
        jitter = 5.0 * float(torch.randn((), generator=noise, dtype=torch.float64))
        return 2.0 * t + (jitter if abs(t) > 0.015 else 0.0)

    label, ratio = _expect(rough_outside, 2.0)
    assert "step 0.01" in label and ratio < 0.01, (label, ratio)


def test_a_loss_too_rough_at_every_step_is_inconclusive() -> None:
    noise = torch.Generator().manual_seed(0)

    def rough(t: float) -> float:  # slope 1 under noise far above what the fit can average
        return t + 10.0 * float(torch.randn((), generator=noise, dtype=torch.float64))

    with pytest.raises(Inconclusive, match="cannot demonstrate the property"):
        _expect(rough, 0.0)
