"""failure: one structured failure, read from the exception's attributes (never re-parsed
from its text), rendered in the same fixed order by every output; the result's failure is the
one record every output reads, and reports of the previous JSON schema are migrated on load."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hcspec.conformance.machinery.base import PropertyFailure
from hcspec.conformance.outputs import failure as fl
from hcspec.conformance.outputs import html_report, junit, terminal
from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp

OLD_REPORT = Path(__file__).parent / "data" / "report-v1.json"
"""A JSON report as the kit wrote it with schema version 1 (failed, error, xfail, xpass,
blocked, not applicable and passed results)."""


class _Structured(PropertyFailure):
    def __init__(self) -> None:
        super().__init__("H_res columns: error 0.5 > tolerance 1e-06; column 2")
        self.label, self.error, self.tolerance = "H_res columns", 0.5, 1e-6
        self.detail, self.hint = "column 2", "10 Sinkhorn rounds where 20 are declared"


def _raise(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_structured_attributes_are_used() -> None:
    exc = _raise(_Structured())
    got = fl.from_exception(exc, failed=True, counterexample='{"n":2}')
    assert (got.label, got.error, got.tolerance, got.detail) == ("H_res columns", 0.5, 1e-6,
                                                                 "column 2")
    assert got.hint == "10 Sinkhorn rounds where 20 are declared"
    assert got.kind == "failed" and got.traceback is None
    assert got.origin == exc.origin  # type: ignore[attr-defined]


class _Plain(AssertionError):
    """An assertion without the kit's attributes."""


def test_the_message_is_never_parsed_for_figures() -> None:
    """An exception without the kit's attributes is explained from its type, text and
    origin alone: text that looks like a comparison is not read back as one."""
    got = fl.from_exception(_raise(_Plain("X' vs the law: error 0.696 > tolerance 0.00458; "
                                          "token 3")), failed=True, hint="from the run")
    assert (got.label, got.error, got.tolerance, got.detail) == (None, None, None, "")
    assert got.hint == "from the run"
    assert got.origin.startswith(f"{__name__}:_raise:")
    numeric = fl.from_exception(PropertyFailure.numeric("X' vs the law", 0.696, 0.00458,
                                                        "token 3"), failed=True)
    assert (numeric.label, numeric.error, numeric.tolerance, numeric.detail) == (
        "X' vs the law", 0.696, 0.00458, "token 3")
    assert numeric.origin == ""  # never raised: no traceback to read it from
    plain = fl.from_exception(_raise(RuntimeError("mat1 and mat2")), failed=False)
    assert plain.message == "RuntimeError: mat1 and mat2" and plain.error is None
    assert plain.traceback is not None and "RuntimeError: mat1 and mat2" in plain.traceback


def test_one_origin_for_the_record_the_exception_and_the_shrinker() -> None:
    """failure.origin is the one definition: PropertyFailure.origin, the record's origin and
    the shrinker's signature agree, naming the check past the kit's raising helpers."""
    from hcspec.conformance.machinery.recording import Recorder

    def check() -> PropertyFailure:
        try:
            Recorder().require(False, "the branch was called 2 times")
        except PropertyFailure as caught:
            return caught
        raise AssertionError("require did not fail")

    exc = check()
    assert exc.origin.startswith(f"{__name__}:check:")
    assert fl.from_exception(exc, failed=True).origin == exc.origin == fl.origin(exc)
    assert fl.signature(exc) == ("PropertyFailure", f"origin {exc.origin}")


def test_every_output_renders_the_same_explanation() -> None:
    failure = fl.Failure(kind="failed", exception="PropertyFailure", message="sums to 0",
                         label="column sums", error=1.0, tolerance=9.5e-6,
                         hint="a hint", counterexample='{"n":4}', shrunk_from='{"n":8}',
                         shrink_runs=3, reproduce="hc-conformance run x --case '{\"n\":4}'")
    assert [k for k, _ in fl.explain(failure)] == [
        "message", "error", "hint", "minimal counterexample", "shrunk from", "reproduce"]
    result = rp.PropertyResult("law.x", "law", "s", None, rp.FAILED)
    result.set_failure(failure)
    assert result.achieved == {"label": "column sums", "error": 1.0, "tolerance": 9.5e-6}
    assert (result.message, result.counterexample, result.reproduce, result.shrunk_from,
            result.shrink_runs, result.traceback) == (
        failure.message, failure.counterexample, failure.reproduce, failure.shrunk_from,
        failure.shrink_runs, None)
    report = rp.Report(target="t", kit_version="0", profile="ci", seed=0, device="cpu",
                       results=[result])
    text = fl.explain_text(failure)
    xml = junit.to_junit(report).tostring().decode()  # type: ignore[no-untyped-call]
    markdown = md.to_markdown(report)
    for _, line in fl.explain(failure):
        assert line in text
        assert line.replace('"', "&quot;") in xml or line in xml
        assert line in markdown
    back = rp.Report.from_dict(report.to_dict())
    assert back.results[0].failure == failure


def test_non_finite_figures_survive_json() -> None:
    failure = fl.Failure(kind="failed", exception="E", message="m", label="l",
                         error=math.nan, tolerance=1.0)
    back = fl.Failure.from_dict(failure.to_dict())
    assert back.error is not None and math.isnan(back.error) and back.tolerance == 1.0


def test_the_result_keeps_no_copy_of_its_failure() -> None:
    """What a result says about its failure is read from the record: changing the record
    changes every field and every output."""
    failure = fl.Failure(kind="failed", exception="PropertyFailure", message="first",
                         counterexample='{"n":4}')
    result = rp.PropertyResult("law.x", "law", "s", None, rp.FAILED, failure=failure)
    result.failure = failure.with_changes(message="second", counterexample='{"n":2}')
    assert (result.message, result.counterexample) == ("second", '{"n":2}')
    stored = {f.name for f in __import__("dataclasses").fields(result)}
    assert not stored & {"message", "achieved", "counterexample", "reproduce", "traceback",
                         "shrunk_from", "shrink_runs"}
    xfail = rp.PropertyResult("law.x", "law", "s", None, rp.XFAIL, failure=failure,
                              expected_failure="known")
    assert xfail.message == "expected failure (known): first"


def test_a_version_1_report_is_migrated_on_load() -> None:
    """The JSON an earlier kit wrote reads back with one failure record per failure result;
    written again it is version 2 with the same keys and values readers rely on."""
    raw = json.loads(OLD_REPORT.read_text(encoding="utf-8"))
    assert raw["schema_version"] == 1
    report = rp.Report.from_dict(raw)
    by_id = {r.id: r for r in report.results}
    assert [r.status for r in report.results] == [r["status"] for r in raw["results"]]
    for old in raw["results"]:
        got = by_id[old["id"]]
        assert (got.failure is not None) == (old["status"] in ("failed", "error", "xfail",
                                                               "timeout")), old["id"]
        for key in ("message", "achieved", "counterexample", "reproduce", "traceback",
                    "shrunk_from", "shrink_runs"):
            assert getattr(got, key) == old[key], (old["id"], key)
    again = report.to_dict()
    assert again["schema_version"] == rp.JSON_SCHEMA_VERSION == 2
    for old, new in zip(raw["results"], again["results"], strict=True):
        assert {k: v for k, v in new.items() if k in old} == {
            k: v for k, v in old.items() if k in new}, old["id"]
    assert again["summary"] == raw["summary"] and again["ok"] == raw["ok"]


def test_a_report_written_before_failures_were_structured_is_migrated() -> None:
    """Without ``failure`` (older still), the failure is built from the flat keys: every
    writer then renders it as it renders a fresh one, the xfail prefix kept once."""
    raw = json.loads(OLD_REPORT.read_text(encoding="utf-8"))
    for r in raw["results"]:
        r.pop("failure")
    report = rp.Report.from_dict(raw)
    by_id = {r.id: r for r in report.results}
    failed, error, xfail = (by_id["law.reported"], by_id["shape.weights_error_copy"],
                            by_id["law.reported_xfail_copy"])
    assert failed.failure is not None and failed.failure.error == failed.achieved["error"]  # type: ignore[index]
    assert failed.failure.rule == "law" and failed.failure.shrunk_from is not None
    assert error.failure is not None and error.failure.kind == "error"
    assert error.failure.exception == "RuntimeError" and "weights exploded" in (
        error.failure.traceback or "")
    assert xfail.failure is not None and not xfail.failure.message.startswith("expected")
    assert xfail.message.count("expected failure (transposed H_res): ") == 1
    for r in raw["results"]:
        assert by_id[r["id"]].message == r["message"]
    markdown = md.to_markdown(report)
    for _, line in fl.explain(failed.failure):
        assert line in markdown
    suite = next(iter(junit.to_junit(report)))
    case = next(c for c in suite if c.name == "law.reported")
    assert case.result[0].text == fl.explain_text(failed.failure)
    html = html_report.failure_lines(failed)
    assert [line.key for line in html] == [key for key, _ in fl.explain(failed.failure)]
    from rich.console import Console

    console = Console(record=True, width=400)
    terminal.print_details(console, report)
    assert failed.failure.reproduce is not None
    assert failed.failure.reproduce in console.export_text()


def test_a_report_of_a_newer_schema_is_refused() -> None:
    raw = json.loads(OLD_REPORT.read_text(encoding="utf-8"))
    raw["schema_version"] = 99
    try:
        rp.Report.from_dict(raw)
    except ValueError as exc:
        assert "schema_version 99" in str(exc)
    else:
        raise AssertionError("a newer report was read")
