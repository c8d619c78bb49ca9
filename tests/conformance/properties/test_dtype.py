"""Dtype family: low-precision forwards and float32 gradients."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance.properties import PropertyFailure
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
