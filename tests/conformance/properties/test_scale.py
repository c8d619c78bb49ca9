"""Scale family: the law, the mHC constraints and batch composition at the sizes where kernels
switch path; sizes an impl declares unsupported are left out with the reason."""

from __future__ import annotations

import dataclasses

import pytest

from hcspec.conformance.families import scale
from hcspec.conformance.properties.base import NotApplicable, PropertyFailure
from hcspec.conformance.protocol import Conventions
from tests.conformance.properties.support import context, run


@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-dynamic"])
def test_reference_passes_at_every_size(target: str) -> None:
    for pid in ("scale.law", "scale.batch_composition"):
        cases = scale.SIZES if pid == "scale.law" else scale.COMPOSITION
        for k in range(len(cases)):
            run(pid, target, example=k)
    if target == "reference:mhc":
        for k in range(len(scale.SIZES)):
            run("scale.constraints", target, example=k)


def test_the_cases_cross_the_thresholds() -> None:
    ns = {c.n for c in scale.SIZES}
    assert {1, 3, 5, 6, 8} <= ns and all(c.d % 64 for c in scale.SIZES if c.d > 64)
    tokens = {c.batch * c.tokens for c in scale.SIZES}
    assert min(tokens) == 1 and max(tokens) >= 100
    assert all(c.batch * c.tokens >= 100 for c in scale.COMPOSITION)


def test_rms_over_half_the_lanes_fails_past_64_features() -> None:
    with pytest.raises(PropertyFailure, match=r"branch input .* d=65.*received.* = 1\.3"):
        run("scale.law", "mutant:rms_half_lanes")


def test_a_sinkhorn_kernel_written_for_4x4_fails_at_n_5() -> None:
    n5 = next(k for k, c in enumerate(scale.SIZES) if c.n == 5)
    with pytest.raises(PropertyFailure, match=r"H_res row sum − 1.*n=5"):
        run("scale.constraints", "mutant:sinkhorn_4x4_tile", example=n5)
    run("scale.constraints", "mutant:sinkhorn_4x4_tile", example=2)  # n = 4 is right


def test_a_token_count_path_fails_batch_composition() -> None:
    with pytest.raises(PropertyFailure, match="alone vs the same outputs in the batch"):
        run("scale.batch_composition", "mutant:token_count_path")


def test_declared_sizes_leave_cases_out_with_the_reason() -> None:
    ctx = context("reference:mhc")
    ctx.conventions = dataclasses.replace(ctx.conventions, supported_expansion_rates=(4,))
    kept = scale.supported(ctx, scale.SIZES)
    assert kept and all(c.n == 4 for c in kept)
    ctx.conventions = dataclasses.replace(ctx.conventions, hidden_size_multiple=64)
    with pytest.raises(NotApplicable, match=r"d=257 is not a multiple .*=64.*n=1 is not"):
        scale.supported(ctx, scale.SIZES)


def test_size_declarations_are_validated() -> None:
    assert Conventions.from_mapping(
        {"supported_expansion_rates": [4, 2, 4]}).supported_expansion_rates == (2, 4)
    for bad in ({"supported_expansion_rates": []}, {"supported_expansion_rates": [0]},
                {"supported_expansion_rates": "4"}, {"hidden_size_multiple": 0},
                {"contiguous_input": "yes"}, {"deterministic": 1}):
        with pytest.raises(TypeError, match="conventions"):
            Conventions.from_mapping(bad)
    assert Conventions().unsupported_size(7, 65) is None


def test_every_token_of_the_composition_is_compared() -> None:
    """T = 33 (odd): the last token of each sequence is wrong; one token per case missed it."""
    with pytest.raises(PropertyFailure, match=r"worst at token \(\d, 32\)"):
        run("scale.batch_composition", "mutant:odd_tail_token", example=1)
