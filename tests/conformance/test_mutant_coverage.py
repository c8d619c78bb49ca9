"""The mutants recorded in tests/mutants/_coverage.py fail the properties recorded for them."""

from __future__ import annotations

import pytest

from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from tests.mutants._coverage import ALSO_FAILED_BY


@pytest.mark.slow
@pytest.mark.parametrize("prop_id", sorted(ALSO_FAILED_BY))
def test_recorded_mutant_fails_the_property_under_ci(prop_id: str) -> None:
    mutant = ALSO_FAILED_BY[prop_id]
    report = check_implementation(f"tests.mutants.{mutant}:make", profile="ci", device="cpu",
                                  only=[prop_id])
    status = {r.id: r.status for r in report.results}[prop_id]
    assert status == rp.FAILED, (mutant, status)
