"""A forward that is random in the mode the factory builds it (dropout on the state in
training mode) is named once in the report header, and the run goes on."""

from __future__ import annotations

from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from hcspec.reference import targets
from tests.thirdparty.standins import make_state_dropout


def test_random_forward_in_training_mode_is_a_header_warning() -> None:
    report = check_implementation(make_state_dropout, profile="quick", device="cpu",
                                  only=["law.reported", "state.deterministic_eval"])
    assert len(report.warnings) == 1
    assert "not deterministic in training mode" in report.warnings[0]
    statuses = {r.id: r.status for r in report.results}
    assert statuses["law.reported"] == rp.FAILED
    assert "warning" in md.to_markdown(report)


def test_a_deterministic_target_has_no_warning() -> None:
    report = check_implementation(targets.mhc, profile="quick", device="cpu", only=["shape"])
    assert report.warnings == []
