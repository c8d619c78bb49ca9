"""constraints.h_post_span is sound: a correct 2σ never fails, whatever its init (a fresh user
saw it fail on fixed post logits initialised below 0, n = 2), σ is caught, and a case that
cannot show the range either way is not counted as evidence."""

from __future__ import annotations

import pytest

from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from tests.conformance import fixed_logit_mhc

SPAN = "constraints.h_post_span"


def _span(factory: object, profile: str = "ci") -> rp.PropertyResult:
    report = check_implementation(factory, profile=profile, device="cpu", only=[SPAN])
    return next(r for r in report.results if r.id == SPAN)


@pytest.mark.parametrize("post_init", [
    -1000.0, *(pytest.param(v, marks=pytest.mark.slow) for v in (-50.0, -3.0, -1.0, 0.0, 1.0)),
    20.0])
def test_correct_fixed_logit_mhc_passes_whatever_its_post_init(post_init: float) -> None:
    result = _span(fixed_logit_mhc.factory(post_init))
    assert result.status == rp.PASSED, result.message
    assert result.examples >= 2 and result.inconclusive == 0


def test_the_fresh_users_case_passes() -> None:
    """n = 2, post logits initialised at −1, seed 104: a nudge θ ← 100·(θ₀ + ε) in one
    direction leaves every post logit negative; the two-sided span still shows 2σ."""
    from hcspec.conformance.strategies import Case

    report = check_implementation(fixed_logit_mhc.make_negative, device="cpu", only=[SPAN],
                                  case=Case(8, 4, 2, 8, seed=104, perturb=1.0,
                                            param_scale=100.0))
    result = next(r for r in report.results if r.id == SPAN)
    assert result.status == rp.PASSED and result.examples == 1, result.message


def test_sigma_is_caught_under_ci() -> None:
    result = _span(fixed_logit_mhc.make_sigma)
    assert result.status == rp.FAILED
    assert "H_post saturates at 1, not 2" in result.message
    assert "σ's bound 1" in result.message


@pytest.mark.slow
def test_post_logits_the_kit_cannot_move_are_not_demonstrated_never_passed() -> None:
    result = _span(fixed_logit_mhc.make_buffer, profile="quick")
    assert result.status == rp.NOT_APPLICABLE
    assert result.message.startswith("not demonstrated: none of the")
    assert "H_post did not change" in result.message and "stayed in [1, 1]" in result.message
    assert result.examples == 0 and result.inconclusive > 0
