"""Determinism family: repeated eval-mode forwards and backwards are bitwise equal, or the
declared non-deterministic impl's spread is recorded."""

from __future__ import annotations

import dataclasses

import pytest

from hcspec.conformance.properties import BY_ID, PropertyFailure
from tests.conformance.properties.support import context, run


@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-static",
                                    "reference:mhc-fast"])
def test_reference_passes(target: str) -> None:
    ctx = run("determinism.forward_backward", target)
    assert ctx.worst.error == 0.0


def test_a_backward_accumulated_in_a_changing_order_fails() -> None:
    with pytest.raises(PropertyFailure, match=r"pass \d differs from pass 1 in ∂L/∂x"):
        run("determinism.forward_backward", "mutant:backward_atomic_order")


def test_declared_non_determinism_records_the_spread() -> None:
    ctx = context("mutant:backward_atomic_order")
    ctx.conventions = dataclasses.replace(ctx.conventions, deterministic=False)
    prop = BY_ID["determinism.forward_backward"]
    prop.run(ctx, prop.examples(ctx)[0])
    assert "run-to-run spread (declared deterministic=False)" in ctx.worst.label
    assert 0.0 < ctx.worst.error < 1e-14
