"""Terminal output: the reasons of the rows that did not run are shown without -v, and a
replayed case appears, fully filled in, in the header (and the Markdown report)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.outputs import terminal
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.strategies import Case
from tests.conformance.test_cli import run


def _result(pid: str, status: str, message: str = "") -> rp.PropertyResult:
    if status in (rp.FAILED, rp.ERROR, rp.XFAIL, rp.TIMEOUT):
        return rp.PropertyResult(pid, pid.split(".")[0], "a statement", None, status,
                                 failure=rp.failure_from_fields(status, message=message))
    return rp.PropertyResult(pid, pid.split(".")[0], "a statement", None, status, note=message)


def _printed(report: rp.Report, verbose: bool = False) -> str:
    console = Console(record=True, width=160)
    terminal.print_header(console, report)
    terminal.print_table(console, report)
    terminal.print_details(console, report, verbose=verbose)
    return console.export_text()


def test_not_applicable_and_blocked_rows_show_their_reason_without_verbose() -> None:
    report = rp.Report("t:make", "0", "ci", 0, "cpu", results=[
        _result("shape.output", rp.FAILED, "forward returned a tuple"),
        _result("constraints.h_res_nonnegative", rp.NOT_APPLICABLE,
                "applies to mhc; the target's kind is hc-static"),
        _result("constraints.h_post_span", rp.NOT_APPLICABLE,
                "applies to mhc; the target's kind is hc-static"),
        _result("law.probed", rp.BLOCKED, "blocked: prerequisite shape.output failed"),
        _result("law.reported", rp.PASSED),
    ])
    text = _printed(report)
    lines = text.splitlines()
    at = lines.index("not applicable: applies to mhc; the target's kind is hc-static")
    assert lines[at + 1].strip() == "constraints.h_res_nonnegative, constraints.h_post_span"
    at = lines.index("blocked: prerequisite shape.output failed")
    assert lines[at + 1].strip() == "law.probed"
    assert text.index("not applicable:") < text.index("blocked:")  # grouped by status
    assert "law.reported" not in "\n".join(lines[lines.index("blocked: prerequisite shape."
                                                             "output failed"):])


def test_no_reason_lines_when_everything_ran() -> None:
    report = rp.Report("t:make", "0", "ci", 0, "cpu",
                       results=[_result("shape.output", rp.PASSED)])
    text = _printed(report)
    assert "not applicable" not in text and "blocked" not in text


def test_a_replayed_case_is_shown_filled_in_with_the_fields_left_at_defaults() -> None:
    report = check_implementation("reference:hc-static", device="cpu", only=["shape.output"],
                                  case=Case(n=2, d=3, perturb=0.5))
    assert report.case is not None
    assert json.loads(report.case) == json.loads(Case(n=2, d=3, perturb=0.5).to_json())
    assert report.case_at_defaults == ["batch", "tokens", "layer_index", "seed", "scale",
                                       "param_scale", "branch"]
    text = _printed(report)
    assert f"case (one case replayed, --case): {report.case}" in text
    assert ("fields at their default here: batch, tokens, layer_index, seed, scale, "
            "param_scale, branch") in text
    assert "perturb 0" not in text  # this case is perturbed
    assert f"`{report.case}`" in md.to_markdown(report)
    back = rp.Report.from_dict(report.to_dict())
    assert back.case == report.case and back.case_at_defaults == report.case_at_defaults
    normal = check_implementation("reference:hc-static", device="cpu", only=["shape.output"],
                                  profile="quick")
    assert normal.case is None and "--case" not in _printed(normal)


def test_cli_header_shows_an_empty_case_filled_with_the_defaults(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "run", "reference:hc-static", "--device", "cpu", "--only",
                       "shape.output", "--case", "{}", "--no-progress")
    assert code == 0
    assert f"--case): {Case().to_json()}" in out
    assert ("fields at their default here: batch, tokens, n, d, layer_index, seed, scale, "
            "perturb, param_scale, branch") in out
    assert "perturb 0: the parameters stay at the factory's init" in out


def test_family_scores_count_expected_failures_apart_from_passes() -> None:
    report = rp.Report("t:make", "0", "ci", 0, "cpu", results=[
        _result("constraints.a", rp.PASSED), _result("constraints.b", rp.PASSED),
        _result("constraints.c", rp.PASSED), _result("constraints.d", rp.XFAIL, "known"),
        _result("constraints.e", rp.NOT_APPLICABLE, "applies to mhc"),
        _result("law.probed", rp.PASSED),
    ])
    scores = report.family_scores()
    assert scores["constraints"] == {"passed": 3, "expected_failures": 1, "checked": 4,
                                     "not_applicable": 1, "score": 0.75}
    assert scores["law"]["expected_failures"] == 0 and scores["law"]["score"] == 1.0
    console = Console(record=True, width=160)
    terminal.print_summary(console, report)
    text = console.export_text()
    assert "constraints 3/4 (1 expected failure), law 1/1" in text
    assert "constraints 3/4 (1 expected failure), law 1/1" in md.to_markdown(report)
