"""Precision handling on stand-ins (tests/conformance/properties/precision_standins.py): a
declared output dtype is honoured; finite differences, float32 gradients and the law are
judged in the precision the target returns, without false alarms on correct code and still
catching a detached residual and a transposed H_res."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance import rules
from hcspec.conformance.machinery import finite_differences
from hcspec.conformance.machinery.base import Inconclusive, PropertyFailure
from hcspec.conformance.strategies import Case
from tests.conformance.properties import support

STANDINS = "tests.conformance.properties.precision_standins"
BF16 = f"{STANDINS}:make_bf16_output"
PERTURBED = Case(2, 3, 4, 8, seed=0, perturb=1.0, branch="mlp")


def test_declared_output_dtype_is_accepted() -> None:
    support.run("shape.output", BF16)
    support.run("shape.weights", BF16)


def test_output_dtype_other_than_declared_fails() -> None:
    with pytest.raises(PropertyFailure, match=r"bfloat16.*expected.*float64 \(the input's\)"):
        support.run("shape.output", f"{STANDINS}:make_bf16_undeclared")


def test_tolerances_use_the_declared_output_dtype() -> None:
    ctx = support.context(BF16)
    assert ctx.precision.output == torch.bfloat16
    assert rules.effective_dtype(torch.float64, torch.float32, None) == torch.float32
    assert rules.effective_dtype(torch.float64, None, torch.float16) == torch.float16


@pytest.mark.slow
@pytest.mark.parametrize("prop", ["gradients.fd_input", "gradients.fd_parameters"])
@pytest.mark.parametrize("case", [
    Case(2, 3, 4, 8, seed=0, branch="mlp"),
    Case(2, 3, 4, 12, seed=1, scale=10.0, branch="mlp"),
    Case(2, 3, 2, 5, seed=1, scale=0.1, perturb=1.0, branch="linear"),
])
def test_finite_differences_pass_a_correct_bfloat16_output(prop: str, case: Case) -> None:
    """Never a failure: a pass within an allowance below 1 (relative), or, where bfloat16's
    rounding of the loss makes the fit's allowance 1 or more (a zero gradient would pass),
    an inconclusive case that says so, never a pass shown next to such an allowance."""
    try:
        ctx = support.run(prop, BF16, case)
    except Inconclusive as exc:
        assert "even a zero gradient would pass" in str(exc)
        return
    assert "bfloat16" in ctx.worst.label and "fit over" in ctx.worst.label  # said in the report
    assert ctx.worst.error <= ctx.worst.tolerance < 1.0


def test_finite_differences_still_catch_a_detached_residual_in_bfloat16() -> None:
    with pytest.raises(PropertyFailure, match="finite differences vs autograd"):
        support.run("gradients.fd_input", f"{STANDINS}:make_bf16_detached",
                    Case(2, 3, 1, 2, seed=1, scale=0.1, perturb=0.3, branch="linear"))


def test_fit_slope_is_exact_on_a_quartic() -> None:
    step = 0.5
    t = torch.linspace(-step, step, finite_differences.FD_FIT_POINTS, dtype=torch.float64)
    quartic = 1 + 3 * t - t ** 2 + 2 * t ** 3 + t ** 4
    slope, rounding = finite_differences.fd_fit_slope(quartic, step)
    assert slope == pytest.approx(3.0, abs=1e-12) and rounding < 1e-10


def test_float32_gradients_allow_the_kits_own_branch_error() -> None:
    # residual without gradient: only the branch path (tanh saturated at d = 1, scale 10)
    case = Case(2, 3, 2, 1, seed=3, scale=10.0, branch="mlp")
    ctx = support.run("dtype.float32_gradients", f"{STANDINS}:make_branch_only_gradient", case)
    assert 3e-4 < ctx.worst.error <= ctx.worst.tolerance  # the error is the branch's own


@pytest.mark.parametrize("precision", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("prop", ["law.reported", "law.reported_matches_probed"])
def test_transposed_weights_fail_at_every_precision(prop: str, precision: str) -> None:
    support.run(prop, f"{STANDINS}:make_{precision}_output" if precision != "bfloat16"
                else BF16, PERTURBED)
    with pytest.raises(PropertyFailure, match=r"H_res|X'"):
        support.run(prop, f"{STANDINS}:make_transposed_{precision}", PERTURBED)


@pytest.mark.parametrize("prop", ["law.reported", "law.probed", "law.reported_matches_probed"])
def test_low_precision_law_tolerance_is_measured(prop: str) -> None:
    ctx = support.run(prop, BF16, PERTURBED)
    # 8 × the closed form's bfloat16 error (law.reported_matches_probed: plus the probes'
    # rounding resolution, about 0.012 here), not 256·eps = 2
    assert ctx.worst.tolerance < 0.08
    assert rules.law_measured(torch.bfloat16, 0.0) == 4 * rules.eps(torch.bfloat16)
    assert rules.law_measured(torch.float32, 1.0) == rules.law(torch.float32)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["make_bf16_output", "make_float16_output",
                                    "make_bf16_hc_static", "make_float16_hc_dynamic"])
def test_every_property_runs_on_a_declared_low_precision_output(target: str) -> None:
    """A correct mHC or HC that declares (and returns) a bfloat16/float16 output: no property may
    end in an error (a kit crash such as a dtype mismatch in a family that forgets the declared
    output dtype), and none may fail."""
    from hcspec.conformance.outputs import report as rp
    from hcspec.conformance.run.session import check_implementation

    report = check_implementation(
        f"tests.conformance.properties.precision_standins:{target}", profile="quick")
    bad = {r.id: (r.status, r.message) for r in report.results
           if r.status in (rp.ERROR, rp.FAILED)}
    assert bad == {}
