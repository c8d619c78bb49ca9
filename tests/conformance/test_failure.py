"""failure: one structured failure, read from the exception (attributes or Context.expect's
text), rendered in the same fixed order by every output."""

from __future__ import annotations

import math

from hcspec.conformance import failure as fl
from hcspec.conformance import junit
from hcspec.conformance import report as rp
from hcspec.conformance.properties import PropertyFailure


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


def test_expect_text_is_read_without_attributes() -> None:
    got = fl.from_exception(_raise(_Plain("X' vs the law: error 0.696 > tolerance 0.00458; "
                                          "token 3")), failed=True, hint="from the run")
    assert (got.label, got.error, got.tolerance, got.detail) == ("X' vs the law", 0.696,
                                                                 0.00458, "token 3")
    assert got.hint == "from the run" and got.origin.startswith("test_failure.py:")
    numeric = fl.from_exception(PropertyFailure.numeric("X' vs the law", 0.696, 0.00458,
                                                        "token 3"), failed=True)
    assert (numeric.label, numeric.error, numeric.tolerance, numeric.detail) == (
        "X' vs the law", 0.696, 0.00458, "token 3")
    plain = fl.from_exception(_raise(RuntimeError("mat1 and mat2")), failed=False)
    assert plain.message == "RuntimeError: mat1 and mat2" and plain.error is None
    assert plain.traceback is not None and "RuntimeError: mat1 and mat2" in plain.traceback


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
    report = rp.Report(target="t", kit_version="0", profile="ci", seed=0, device="cpu",
                       results=[result])
    text = fl.explain_text(failure)
    xml = junit.to_junit(report).tostring().decode()  # type: ignore[no-untyped-call]
    markdown = rp.to_markdown(report)
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
