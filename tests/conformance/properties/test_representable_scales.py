"""The thorough profile's extreme state magnitudes stop where the run's effective dtype ends: a
correct float16-output target returned inf for a state of scale 1e6 (float16's largest value
is 65504) and failed ``shape.output``, which blocked every other property; at scale 1e-6, among
float16's subnormals, it failed constraints.nonexpansive (both found by
``python -m tools.soak --low-precision``)."""

from __future__ import annotations

import pytest
from hypothesis import find, settings
from hypothesis.errors import NoSuchExample

from hcspec.conformance.machinery.cases import Cases, representable_scales
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.profiles import get_profile
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.strategies import EXTREME_SCALES
from tests.conformance.properties import support

STANDINS = "tests.conformance.properties.precision_standins"


def _thorough(target: str):  # type: ignore[no-untyped-def]
    ctx = support.context(f"{STANDINS}:{target}")
    ctx.profile = get_profile("thorough")
    return ctx


def test_float16_output_drops_the_scales_it_cannot_hold() -> None:
    # 1e6 overflows float16 (65504); 1e-6 lies among its subnormals (spacing 6e-8): a correct
    # float16 target failed constraints.nonexpansive there (‖X'‖/‖X‖ − 1 = 0.092 with F ≡ 0)
    assert representable_scales(_thorough("make_float16_output"), EXTREME_SCALES) == (
        1e-3, 1e3)
    assert representable_scales(_thorough("make_bf16_output"), EXTREME_SCALES) == EXTREME_SCALES
    assert representable_scales(support.context("reference:mhc"), EXTREME_SCALES) == (
        EXTREME_SCALES)


@pytest.mark.parametrize(("target", "drawn"), [("make_float16_output", False),
                                               ("make_bf16_output", True)])
def test_thorough_strategy_draws_only_representable_states(target: str, drawn: bool) -> None:
    strategy = Cases().strategy(_thorough(target))
    quick = settings(max_examples=2000, database=None, derandomize=True)
    if drawn:
        assert find(strategy, lambda c: c.scale == 1e6, settings=quick).scale == 1e6
    else:
        with pytest.raises(NoSuchExample):
            find(strategy, lambda c: c.scale > 1e3 or c.scale < 1e-3, settings=quick)


def test_float16_output_passes_shape_output_under_thorough() -> None:
    report = check_implementation(f"{STANDINS}:make_float16_output", profile="thorough",
                                  only=["shape.output"])
    (result,) = [r for r in report.results if r.id == "shape.output"]
    assert result.status == rp.PASSED, result.message
