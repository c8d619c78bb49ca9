"""Dtype family: low-precision forwards and float32 gradients."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance.machinery.base import PropertyFailure
from tests.conformance.properties.support import run, unmet


def test_reference_passes_low_precision() -> None:
    ctx = run("dtype.low_precision", "reference:hc-static")
    assert ctx.worst.label == "torch.float16 forward vs float32 forward" or "bfloat16" in (
        ctx.worst.label)


@pytest.mark.slow
def test_a_float32_cast_in_the_backward_fails() -> None:
    with pytest.raises(PropertyFailure, match="float32 − float64"):
        run("dtype.float32_gradients", "mutant:grad_float32_cast")


def test_float32_gradients_need_float64() -> None:
    assert unmet("dtype.float32_gradients", dtype=torch.float32) is not None
    assert unmet("dtype.low_precision", dtype=torch.float32) is None


@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-dynamic"])
def test_reference_low_precision_at_scale_passes(target: str) -> None:
    ctx = run("dtype.low_precision_at_scale", target)
    assert "n = 8, d = 257" in ctx.worst.label
    assert ctx.worst.error < ctx.worst.tolerance / 4


def test_a_low_precision_accumulator_fails_only_at_scale() -> None:
    run("dtype.low_precision", "mutant:low_precision_accumulation")  # the small cases pass
    with pytest.raises(PropertyFailure, match=r"bfloat16 forward vs float32 forward at n = 8"):
        run("dtype.low_precision_at_scale", "mutant:low_precision_accumulation")


def test_at_scale_reaches_the_largest_state_scale_each_dtype_holds() -> None:
    from hcspec.conformance.families import dtype as family

    assert family.largest_state_scale(torch.float16, 8, 257) == 1e3
    assert family.largest_state_scale(torch.bfloat16, 8, 257) == 1e6
    # with headroom: 64 × the scale fits float16, and the float32 sum of the squares is finite
    assert 64 * 1e3 <= torch.finfo(torch.float16).max < 64 * 1e4
    scales = {c.scale for c in family.AT_SCALE}
    assert scales == {1.0, 10.0, family.LARGEST_SCALE}
    # a float16 sum of the n·d squares at RMS 10 overflows, which scale 1 never showed
    x = torch.full((8 * 257,), 10.0, dtype=torch.float16)
    assert torch.isinf(x.square().sum()) and torch.isfinite((x / 10).square().sum())
