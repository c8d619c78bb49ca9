"""Bad input, tried and recorded: for every case of tests/conformance/bad_inputs.py (hostile
adapters included) — a clear message naming what was expected, the other properties still
run, the reports are still written (also when interrupted), the exit code is the documented
one, nothing of torch's global state leaks — and docs/bad-input.md is current."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from hcspec.conformance.families import CATALOGUE
from tests.conformance import bad_inputs
from tests.conformance.bad_inputs import CASES, DOC, BadInput, Observed, observe

BY_NAME = {c.name: c for c in CASES}
_SEEN: dict[str, Observed] = {}


def _observed(case: BadInput) -> Observed:
    if case.name not in _SEEN:
        _SEEN[case.name] = observe(case)
    return _SEEN[case.name]


pytestmark = pytest.mark.slow  # one CLI subprocess per case (about a minute in all)


@pytest.fixture(scope="module")
def observed() -> dict[str, Observed]:
    return {case.name: _observed(case) for case in CASES if not case.slow}


@pytest.fixture(scope="module")
def observed_all() -> dict[str, Observed]:
    return {case.name: _observed(case) for case in CASES}


def _param(case: BadInput) -> object:
    return pytest.param(case.name, marks=[pytest.mark.slow] if case.slow else [])


@pytest.mark.parametrize("name", [_param(c) for c in CASES])
def test_bad_input_case(name: str) -> None:
    case: BadInput = BY_NAME[name]
    seen = _observed(case)
    assert seen.exit_code == case.exit_code, seen.stdout + seen.stderr
    assert bad_inputs.shown(case, seen), (case.message, seen.stdout, seen.stderr)
    for pid, status in case.statuses.items():
        assert seen.statuses.get(pid) == status, (pid, seen.statuses.get(pid),
                                                  seen.messages.get(pid))
    assert bad_inputs.count_problems(case, seen) == []  # the counts keep the page's invariant
    if case.json is None:  # the JSON report is written in every case
        assert seen.report is not None
    else:  # the JSON path is unwritable: found before the run; the JUnit report says so
        assert seen.junit is not None and 'name="setup"' in seen.junit
        assert "shape.output" not in seen.stdout + seen.stderr
    assert seen.junit is not None and "<testsuite" in seen.junit  # and the JUnit report
    assert seen.leaked == []  # torch's global state is as it was before the run
    if seen.report is None or seen.report.get("setup_error"):
        return
    assert seen.markdown is not None and f"`{case.argv[0]}`" in seen.markdown
    assert seen.report["ok"] is (case.exit_code == 0)
    if case.exit_code in (130, 143):  # interrupted: the partial report says so
        assert seen.report["interrupted"] is True
        assert seen.report["interrupted_by"] == ("SIGINT" if case.exit_code == 130
                                                 else "SIGTERM")
        assert seen.report["running"] and seen.report["not_run"]
        assert seen.report["not_run"][0] == seen.report["running"] or (
            seen.report["running"].startswith("setup:"))
        assert "<property name=\"interrupted\" value=\"true\"" in (seen.junit or "")
        assert "**interrupted**" in seen.markdown
    elif "--only" not in case.argv:
        assert set(seen.statuses) == {p.id for p in CATALOGUE}  # every property reported


@pytest.mark.slow
def test_hints_name_the_real_cause(observed_all: dict[str, Observed]) -> None:
    nan = observed_all["forward: NaN"]
    assert "non-finite values (NaN/inf)" in nan.stdout and "not deterministic" not in nan.stdout
    ignored = observed_all["factory ignores dtype"]
    failures = [r["failure"] for r in (ignored.report or {})["results"] if r["failure"]]
    assert failures and all("parameters are float32 but float64 was requested"
                            in (f["hint"] or "") for f in failures)
    reseeds = observed_all["reseeds the global RNG"]
    assert "forward calls torch.manual_seed" in reseeds.stdout
    dtype = observed_all["sets the default dtype"]
    assert dtype.report is not None
    assert dtype.report["global_state_changes"] == ["default dtype torch.float32 -> "
                                                    "torch.float16"]


@pytest.mark.slow
def test_a_hang_prints_the_header_and_what_it_is_calling(observed_all: dict[str, Observed]) -> None:
    seen = observed_all["SIGINT before any property"]
    assert "hc-conformance" in seen.stdout and "target tests.conformance.bad_inputs" in seen.stdout
    assert "... building a sample impl: factory(4, 8" in seen.stderr
    assert "... calling forward on a sample [2, 3, 4, 8]" in seen.stderr
    assert seen.report is not None and seen.report["results"] == []
    assert len(seen.report["not_run"]) == len(CATALOGUE)


@pytest.mark.parametrize("name", [c.name for c in CASES if c.exit_code == 1 and not c.slow])
def test_failures_name_expected_and_received(name: str, observed: dict[str, Observed]) -> None:
    seen = observed[name]
    failing = [m for pid, m in seen.messages.items() if seen.statuses[pid] == "failed"]
    assert any("expected" in m or "required" in m for m in failing), failing
    blocked = [m for pid, m in seen.messages.items() if seen.statuses[pid] == "blocked"]
    assert all(m.startswith("blocked: prerequisite ") for m in blocked)


@pytest.mark.parametrize("name", [c.name for c in CASES
                                  if c.exit_code == 2 and not c.json and not c.slow])
def test_usage_errors_still_write_reports(name: str, observed: dict[str, Observed]) -> None:
    seen = observed[name]
    assert seen.report is not None and seen.report["setup_error"]
    assert seen.report["results"] == [] and seen.report["ok"] is False
    assert seen.junit is not None and 'name="setup"' in seen.junit and "<error" in seen.junit


def test_unknown_id_suggests_a_close_one(observed: dict[str, Observed]) -> None:
    seen = observed["--only unknown id"]
    assert "did you mean law.probed" in seen.stderr and "hc-conformance list" in seen.stderr


@pytest.mark.slow
def test_docs_bad_input_is_current(observed_all: dict[str, Observed]) -> None:
    assert DOC.read_text(encoding="utf-8") == bad_inputs.render(observed_all), (
        "docs/bad-input.md is stale: run python -m tests.conformance.bad_inputs")


def test_the_count_check_fails_on_counts_that_break_the_invariant(
        observed: dict[str, Observed]) -> None:
    """:func:`bad_inputs.count_problems` is not vacuous: a summary that miscounts, a property
    reported twice or missing, and a status the exit code rules out are each named."""
    case, seen = BY_NAME["factory raises"], observed["factory raises"]
    assert seen.report is not None and bad_inputs.count_problems(case, seen) == []
    report = copy.deepcopy(seen.report)
    report["summary"]["blocked"] += 1
    assert "summary" in bad_inputs.count_problems(case, replace(seen, report=report))[0]
    report = copy.deepcopy(seen.report)
    report["results"] = report["results"][1:]
    problems = bad_inputs.count_problems(case, replace(seen, report=report))
    assert any("selected" in p for p in problems), problems
    passing = BY_NAME["float32 only"]
    assert any("with exit code 0" in p
               for p in bad_inputs.count_problems(passing, replace(seen, report=seen.report)))
