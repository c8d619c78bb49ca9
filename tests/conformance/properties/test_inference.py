"""Inference family: no_grad, inference_mode, eval and train mode give the training output,
also on a second call (same shape, new input) and on a decode step."""

from __future__ import annotations

import dataclasses

import pytest

from hcspec.conformance.families import inference
from hcspec.conformance.machinery.base import PropertyFailure
from tests.conformance.properties.support import context, factory, run


@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-dynamic",
                                    "reference:mhc-fast"])
def test_reference_passes(target: str) -> None:
    run("inference.modes", target)
    run("inference.repeated_calls", target)


def test_fewer_rounds_under_inference_mode_fails() -> None:
    with pytest.raises(PropertyFailure, match=r"inference_mode\(\) vs the training path"):
        run("inference.modes", "mutant:inference_fewer_rounds")


def test_weights_cached_by_shape_fail_the_second_call() -> None:
    run("inference.modes", "mutant:cache_keyed_by_shape")
    with pytest.raises(PropertyFailure, match=r"second call under torch.inference_mode\(\)"):
        run("inference.repeated_calls", "mutant:cache_keyed_by_shape")


def test_train_mode_is_compared_only_when_nothing_random_is_declared() -> None:
    ctx = context("reference:mhc")
    impl = factory("reference:mhc")(4, 8)
    assert any(train for _, train, _ in inference._paths(ctx, impl))
    ctx.conventions = dataclasses.replace(ctx.conventions, deterministic=False)
    assert not any(train for _, train, _ in inference._paths(ctx, impl))
