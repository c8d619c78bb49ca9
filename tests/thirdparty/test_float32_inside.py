"""A declared float32-inside compute dtype: the law and the finite-difference gradient checks
use float32-appropriate tolerances (and are not skipped); undeclared, the same impl fails at
float64 precision; a real gradient bug is still caught under the declaration."""

from __future__ import annotations

import functools

from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from tests.thirdparty.standins import make_float32_inside

ONLY = ["law.reported", "gradients.fd_input", "gradients.fd_parameters", "gradients.closed_form"]


def _statuses(**options: bool) -> dict[str, rp.PropertyResult]:
    report = check_implementation(functools.partial(make_float32_inside, **options),
                                  profile="quick", device="cpu", only=ONLY)
    return {r.id: r for r in report.results}


def test_declared_float32_inside_passes_with_float32_tolerances() -> None:
    results = _statuses()
    for pid in ONLY:
        assert results[pid].status == rp.PASSED, (pid, results[pid].message)
        assert results[pid].examples > 0
    assert results["gradients.fd_input"].achieved is not None
    assert results["gradients.fd_input"].achieved["tolerance"] == 1e-2


def test_undeclared_float32_inside_fails_at_float64_precision() -> None:
    results = _statuses(declare=False)
    assert results["law.reported"].status == rp.FAILED
    assert results["gradients.fd_input"].status == rp.FAILED


def test_a_gradient_bug_is_caught_under_the_declaration() -> None:
    results = _statuses(gradient_bug=True)
    assert results["gradients.fd_input"].status == rp.FAILED
    assert results["law.reported"].status == rp.PASSED  # the forward value is unchanged
