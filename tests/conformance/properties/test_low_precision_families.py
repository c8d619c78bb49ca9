"""The families that compare a target with itself (strides, inference, batch composition) or
with float64 math (scale.law, variant, depth, the bug-class hints) still catch their bugs when
the target returns bfloat16/float16, and still pass a correct target of that precision; in
float64/float32 their tolerances are the law's."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance import rules
from hcspec.conformance.machinery.base import PropertyFailure
from hcspec.conformance.machinery.bug_classes import known_bug_class
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.strategies import Case
from tests.conformance.properties import support

STANDINS = "tests.conformance.properties.precision_standins"
PERTURBED = Case(2, 3, 4, 8, seed=0, perturb=1.0, branch="mlp")
MANY_TOKENS = Case(1, 200, 2, 40, layer_index=2, seed=8, perturb=1.0)

# (property, buggy stand-in, correct stand-in of the same precision, case or example number)
BUGS = [
    ("inference.repeated_calls", "make_bf16_shape_cached", "make_bf16_output", 1),
    ("inference.repeated_calls", "make_float16_shape_cached", "make_float16_output", 0),
    ("strides.non_contiguous", "make_bf16_contiguous_kernel", "make_bf16_output", 0),
    ("depth.mhc_bounded", "make_bf16_deep_unnormalised", "make_bf16_output", 0),
    ("scale.batch_composition", "make_bf16_batched_path", "make_bf16_output", MANY_TOKENS),
    ("variant.h_res", "make_transposed_bfloat16", "make_bf16_output", PERTURBED),
    ("variant.h_res", "make_transposed_float16", "make_float16_output", PERTURBED),
    ("law.permutation_mixing", "make_bf16_hc_unmixed", "make_bf16_hc_static", 0),
    ("law.permutation_mixing", "make_float16_hc_unmixed", "make_float16_hc_static", 2),
]


def _run(prop: str, target: str, where: Case | int) -> None:
    if isinstance(where, Case):
        support.run(prop, f"{STANDINS}:{target}", where)
    else:
        support.run(prop, f"{STANDINS}:{target}", example=where)


@pytest.mark.parametrize(("prop", "buggy", "correct", "where"), BUGS,
                         ids=[f"{p}-{b}" for p, b, _, _ in BUGS])
def test_low_precision_bug_is_caught(prop: str, buggy: str, correct: str,
                                     where: Case | int) -> None:
    _run(prop, correct, where)
    with pytest.raises(PropertyFailure):
        _run(prop, buggy, where)


@pytest.mark.parametrize("prop", ["strides.non_contiguous", "inference.modes",
                                  "inference.repeated_calls", "scale.batch_composition"])
def test_self_consistency_is_a_few_units_of_roundoff(prop: str) -> None:
    ctx = support.run(prop, f"{STANDINS}:make_bf16_output")
    bf16 = rules.eps(torch.bfloat16)
    # float32 inside, bfloat16 out: 4·eps (batch composition grows it with d past 64)
    assert 4 * bf16 <= ctx.worst.tolerance <= 4 * bf16 * 257 / 64
    assert ctx.worst.error <= ctx.worst.tolerance


def test_self_consistency_keeps_the_law_in_float64_and_float32() -> None:
    for dtype in (torch.float64, torch.float32):
        assert rules.self_consistency(dtype) == rules.law(dtype)
        assert rules.self_consistency(dtype, torch.float32) == rules.law(dtype)
    bf16 = rules.eps(torch.bfloat16)
    assert rules.self_consistency(torch.bfloat16, torch.float32) == 4 * bf16
    assert rules.self_consistency(torch.bfloat16, torch.bfloat16) == 8 * bf16
    assert rules.BY_NAME["self_consistency"] is rules.SELF_CONSISTENCY


@pytest.mark.parametrize("target", ["make_bf16_hc_static", "make_bf16_hc_dynamic",
                                    "make_float16_hc_static", "make_float16_hc_dynamic"])
def test_permutation_mixing_is_measured_in_low_precision(target: str) -> None:
    for example in range(3):  # at init, perturbed, state scale 10
        ctx = support.run("law.permutation_mixing", f"{STANDINS}:{target}", example=example)
        eps = rules.eps(ctx.precision.output)
        # steered to P within 4·eps, then max(4·eps, 8 × the closed form's error): not 256·eps·n
        assert ctx.worst.error <= ctx.worst.tolerance <= 8 * eps, (example, ctx.worst)


def test_permutation_mixing_keeps_the_law_in_float64() -> None:
    ctx = support.run("law.permutation_mixing", "reference:hc-dynamic")
    assert ctx.worst.tolerance == rules.law(torch.float64) * 4  # n = 4


@pytest.mark.parametrize("prop", ["scale.law", "variant.h_res", "variant.gates"])
def test_comparisons_with_float64_math_are_measured_in_bfloat16(prop: str) -> None:
    ctx = support.run(prop, f"{STANDINS}:make_bf16_output", PERTURBED if prop != "scale.law"
                      else None)
    assert ctx.worst.tolerance < 0.05  # max(4·eps, 8 × the closed form's error), not 2.0
    assert ctx.worst.error <= ctx.worst.tolerance


def test_depth_bounds_are_measured_in_bfloat16() -> None:
    ctx = support.run("depth.mhc_bounded", f"{STANDINS}:make_bf16_output")
    # the bfloat16 stand-in passes with the exact axis of float32 plus one output eps
    assert ctx.worst.error <= ctx.worst.tolerance < 2.0


@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_transposed_hint_fires_in_low_precision(precision: str) -> None:
    ctx = support.context(f"{STANDINS}:make_transposed_{precision}")
    with pytest.raises(PropertyFailure):
        support.run("law.reported", f"{STANDINS}:make_transposed_{precision}", PERTURBED)
    hint = known_bug_class("law.reported", ctx, PERTURBED)
    assert hint is not None and "H_res looks transposed" in hint


def test_transposed_hint_spares_a_correct_bfloat16_output() -> None:
    ctx = support.context(f"{STANDINS}:make_bf16_output")
    assert known_bug_class("law.reported", ctx, PERTURBED) is None


@pytest.mark.parametrize("prop", ["exact.one_hot_copy", "exact.cancelling_streams"])
def test_exact_accepts_a_branch_input_before_the_output_rounding(prop: str) -> None:
    support.run(prop, f"{STANDINS}:make_bf16_unrounded_branch_input")
    support.run(prop, f"{STANDINS}:make_bf16_output")


SUMS = ("constraints", "scale.constraints")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 3])
def test_a_correct_bf16_state_v4_stays_below_half_of_every_sum_allowance(seed: int) -> None:
    """The serving-engine DeepSeek-V4 stand-in (float32 weights, bfloat16 state, 20 rounds as
    declared): every constraint passes along its dtype chain, each at most half its
    allowance (no false positive, and room to spare)."""
    report = check_implementation(f"{STANDINS}:make_bf16_state_v4", profile="ci", device="cpu",
                                  only=SUMS, seed=seed)
    # constraints.h_res_vertices steers a declared birkhoff construction only (not applicable
    # to Sinkhorn–Knopp, with its reason): every other sum check runs and passes
    checked = [r for r in report.results if r.family in ("constraints", "scale")
               and r.id != "constraints.h_res_vertices"]
    assert checked and all(r.status == rp.PASSED for r in checked), [
        (r.id, r.status, r.message) for r in checked if r.status != rp.PASSED]
    for r in checked:
        if r.achieved and r.achieved["tolerance"] > 0:
            assert r.achieved["error"] <= 0.5 * r.achieved["tolerance"], (r.id, r.achieved)


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["quick", "ci"])
def test_bf16_state_v4_running_two_of_twenty_rounds_fails_without_logits(profile: str) -> None:
    """The same stand-in running 2 Sinkhorn–Knopp rounds while declaring 20, no ``logits``:
    judged against bfloat16's 16·(n + 1)·eps it passed; along its chain its row sums fail,
    the message naming the rule, the floor and the allowance."""
    report = check_implementation("tests.mutants.sinkhorn_bf16_state_two_rounds:make",
                                  profile=profile, device="cpu", only=SUMS)
    results = {r.id: r for r in report.results}
    other = results["constraints.h_res_other_axis"]
    assert other.status == rp.FAILED, other.message
    assert "[rule sinkhorn_other_axis: floor " in other.message
    assert results["scale.constraints"].status == rp.FAILED


@pytest.mark.slow
def test_closed_form_gradients_are_measured_in_low_precision() -> None:
    """gradients.closed_form in bfloat16/float16: 8 × the closed form's error along the chain
    (at least eps: a backward rounds twice), not the law's fixed 256·eps = 2.0 (the measured
    allowance stays an eighth of that or less). Correct stand-ins stay at or below half of it;
    a detached residual, which bfloat16 finite differences see in few cases, fails it."""
    for target in ("make_bf16_state_v4", "make_bf16_hc_dynamic", "make_float16_output",
                   "make_bf16_output"):
        report = check_implementation(f"{STANDINS}:{target}", profile="ci", device="cpu",
                                      only=("gradients.closed_form",))
        r = next(r for r in report.results if r.id == "gradients.closed_form")
        assert r.status == rp.PASSED and r.achieved is not None, (target, r.message)
        assert r.achieved["rule"] == "law" and r.achieved["floor"] is not None
        assert r.achieved["tolerance"] == pytest.approx(8 * r.achieved["floor"])
        assert r.achieved["tolerance"] <= 32 * rules.eps(torch.bfloat16)
        assert r.achieved["error"] <= 0.5 * r.achieved["tolerance"], (target, r.achieved)
    report = check_implementation(f"{STANDINS}:make_bf16_detached", profile="ci", device="cpu",
                                  only=("gradients.closed_form",))
    r = next(r for r in report.results if r.id == "gradients.closed_form")
    assert r.status == rp.FAILED and "[rule law: floor" in r.message
