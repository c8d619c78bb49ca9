"""Bad input, tried and recorded: for every case of tests/conformance/bad_inputs.py —
a clear message naming what was expected, the other properties still run, the reports are
still written, the exit code is the documented one — and docs/bad-input.md is current."""

from __future__ import annotations

import pytest

from hcspec.conformance.properties import CATALOGUE
from tests.conformance import bad_inputs
from tests.conformance.bad_inputs import CASES, DOC, BadInput, Observed, observe

BY_NAME = {c.name: c for c in CASES}


pytestmark = pytest.mark.slow  # one CLI subprocess per case (about a minute in all)


@pytest.fixture(scope="module")
def observed() -> dict[str, Observed]:
    return {case.name: observe(case) for case in CASES}


@pytest.mark.parametrize("name", list(BY_NAME))
def test_bad_input_case(name: str, observed: dict[str, Observed]) -> None:
    case: BadInput = BY_NAME[name]
    seen = observed[name]
    assert seen.exit_code == case.exit_code, seen.stdout + seen.stderr
    assert bad_inputs.shown(case, seen), (case.message, seen.stdout, seen.stderr)
    for pid, status in case.statuses.items():
        assert seen.statuses.get(pid) == status, (pid, seen.statuses.get(pid),
                                                  seen.messages.get(pid))
    if case.json is None:  # the JSON report is written in every case
        assert seen.report is not None
    else:  # the JSON path is unwritable: found before the run; the JUnit report says so
        assert seen.junit is not None and 'name="setup"' in seen.junit
        assert "shape.output" not in seen.stdout + seen.stderr
    assert seen.junit is not None and "<testsuite" in seen.junit  # and the JUnit report
    if seen.report is not None and not seen.report.get("setup_error"):
        assert set(seen.statuses) == {p.id for p in CATALOGUE}  # every property reported
        assert seen.report["ok"] is (case.exit_code == 0)


@pytest.mark.parametrize("name", [c.name for c in CASES if c.exit_code == 1])
def test_failures_name_expected_and_received(name: str, observed: dict[str, Observed]) -> None:
    seen = observed[name]
    failing = [m for pid, m in seen.messages.items() if seen.statuses[pid] == "failed"]
    assert any("expected" in m or "required" in m for m in failing), failing
    blocked = [m for pid, m in seen.messages.items() if seen.statuses[pid] == "blocked"]
    assert all(m.startswith("blocked: prerequisite ") for m in blocked)


@pytest.mark.parametrize("name", [c.name for c in CASES if c.exit_code == 2 and not c.json])
def test_usage_errors_still_write_reports(name: str, observed: dict[str, Observed]) -> None:
    seen = observed[name]
    assert seen.report is not None and seen.report["setup_error"]
    assert seen.report["results"] == [] and seen.report["ok"] is False
    assert seen.junit is not None and 'name="setup"' in seen.junit and "<error" in seen.junit


def test_unknown_id_suggests_a_close_one(observed: dict[str, Observed]) -> None:
    seen = observed["--only unknown id"]
    assert "did you mean law.probed" in seen.stderr and "hc-conformance list" in seen.stderr


def test_docs_bad_input_is_current(observed: dict[str, Observed]) -> None:
    assert DOC.read_text(encoding="utf-8") == bad_inputs.render(observed), (
        "docs/bad-input.md is stale: run python -m tests.conformance.bad_inputs")
