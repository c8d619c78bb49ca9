"""Scale family: the law, the mHC constraints and batch composition at the sizes where kernels
switch path; sizes an impl declares unsupported are left out with the reason."""

from __future__ import annotations

import dataclasses

import pytest

from hcspec.conformance.families import scale
from hcspec.conformance.machinery.base import NotApplicable, PropertyFailure
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


def test_max_parameters_is_validated_and_counts_the_declared_construction() -> None:
    for bad in (0, -1, True, 1.5e6, "12000000"):
        with pytest.raises(TypeError, match="max_parameters"):
            Conventions.from_mapping({"max_parameters": bad})
    # mHC: φ [n·d, 2n + n²], biases [2n + n²], three α
    assert Conventions().parameter_count(4, 8) == 32 * 24 + 24 + 3
    # mHC-lite: n! columns for H_res, or the declared set's size
    assert Conventions(h_res_construction="birkhoff").parameter_count(8, 33) == (
        264 * (16 + 40320) + 16 + 40320 + 3)
    two = Conventions(h_res_construction="birkhoff",
                      birkhoff_permutations=((0, 1, 2), (2, 0, 1)))
    assert two.parameter_count(3, 5) == 15 * 8 + 8 + 3
    assert Conventions(max_parameters=795).unsupported_size(4, 8) is None
    assert Conventions(max_parameters=794).unsupported_size(4, 8) == (
        "n=4, d=8 has 795 parameters (sinkhorn, φ [n·d, 2n + 16]), more than the declared "
        "max_parameters=794")


def test_sizes_past_max_parameters_are_left_out_before_the_factory_runs() -> None:
    """The float32 mHC-lite declares 48 M parameters: n = 8 keeps d = 129 and leaves out the
    d = 257 of ``dtype.low_precision_at_scale``, with the reason, and the factory never builds
    it (the at-scale property: not applicable)."""
    from hcspec.conformance.families import dtype
    from hcspec.conformance.machinery.base import FactoryRejected
    from hcspec.conformance.strategies import Case

    ctx = context("tests.conformance.properties.precision_standins:make_float32_lite")
    assert ctx.conventions.max_parameters == 48_000_000
    assert ctx.conventions.unsupported_size(8, 129) is None
    assert ctx.conventions.unsupported_size(8, 257) is not None
    assert ctx.conventions.unsupported_size(8, 257, parameters=False) is None
    # kept in the lists (the builder leaves them out and counts them) ...
    assert [(c.n, c.d) for c in dtype._at_scale(ctx)] == [(8, 257)] * 3
    calls: list[tuple[int, int]] = []
    made = ctx.build.factory

    def counting(n: int, d: int, **kw: object) -> object:
        calls.append((n, d))
        return made(n, d, **kw)

    ctx.build.factory = counting
    # ... and never built
    with pytest.raises(FactoryRejected, match=r"left out by the declaration: n=8, d=257 has"):
        ctx.build.make(Case(1, 1, 8, 257))
    assert calls == [] and ctx.rejected[-1].startswith("left out by the declaration")
    assert ctx.build.make(Case(1, 1, 8, 33), perturb=False).n == 8 and calls == [(8, 33)]
    from hcspec.conformance.families import BY_ID
    from hcspec.conformance.outputs import report as rp
    from hcspec.conformance.run.execution import run_property

    outcome, _ = run_property(BY_ID["dtype.low_precision_at_scale"], context(
        "tests.conformance.properties.precision_standins:make_float32_lite"))
    assert outcome.status == rp.NOT_APPLICABLE
    assert outcome.note.startswith("every case (3) is past the declared max_parameters, e.g. "
                                   "n=8, d=257 has 82971155 parameters")


def test_a_pass_says_which_cases_the_parameter_bound_left_out() -> None:
    """reference:mhc declared with a bound below n = 5, d = 13 (the quick profile's size row):
    the oracle property still passes on the smaller cases and its note names the ones left
    out, with the reason."""
    from hcspec.conformance.families import BY_ID
    from hcspec.conformance.machinery.base import Context
    from hcspec.conformance.outputs import report as rp
    from hcspec.conformance.run.execution import run_property

    base = context("reference:mhc")
    bound = Conventions().parameter_count(5, 13) - 1
    ctx = Context(factory=base.factory, target_name="reference:mhc", kind=base.kind,
                  conventions=dataclasses.replace(base.conventions, max_parameters=bound),
                  capabilities=base.capabilities, dtype=base.dtype, device="cpu",
                  profile=base.profile)
    outcome, checked = run_property(BY_ID["exact.one_hot_copy"], ctx)
    assert outcome.status == rp.PASSED and checked > 0
    assert outcome.note.startswith("left out past the declared max_parameters: "
                                   f"{len(ctx.rejected)} case(s), e.g. n=")
    assert f"more than the declared max_parameters={bound}" in outcome.note
    assert any(m.startswith("left out by the declaration: n=5, d=13 ") for m in ctx.rejected)


def test_the_float32_lite_passes_the_constraints_at_n_8() -> None:
    """Its float32 sum of 8! = 40320 weighted permutations is checked against the floor that
    grows with the terms summed (n = 8, d = 33: 10.7 M parameters)."""
    target = "tests.conformance.properties.precision_standins:make_float32_lite"
    examples = scale.supported(context(target), scale.SIZES + scale.SPREAD)
    k = next(k for k, c in enumerate(examples) if (c.n, c.d) == (8, 33))
    ctx = run("scale.constraints", target, example=k)
    assert 0 < ctx.worst.error < ctx.worst.tolerance
