"""JUnit XML for a conformance report (``hc-conformance run --junit PATH``), written with
junitparser: one test suite per run (named after the target), one test case per property:
classname ``hcspec.conformance``, name the property id (the test id
``hcspec.conformance::<id>`` of :func:`hcspec.conformance.outputs.report.test_id`, which pytest's
own ``--junitxml`` writes the same way; the family is the id's first part).

Mapping: passed and xfail pass (xfail keeps its reason in system-out); failed, timeout and
xpass are failures; error is an error (with the traceback); blocked and not_applicable are
skipped with their reason. A failure's text is
:func:`hcspec.conformance.outputs.failure.explain_text`
(the same lines the terminal prints). An interrupted run has the suite properties
``interrupted``, ``interrupted_by`` and ``running``, and one skipped case per id not run.
A run that could not start (``setup_error``: bad TARGET, unknown property id) has one
errored case ``setup`` with the message.
"""

from __future__ import annotations

from pathlib import Path

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from hcspec.conformance.outputs import report as rp
from hcspec.conformance.outputs.failure import explain_text


def to_junit(report: rp.Report) -> JUnitXml:
    """The report as a junitparser document."""
    suite = TestSuite(f"hc-conformance {report.target}")
    for key, value in (("target", report.target), ("kit_version", report.kit_version),
                       ("profile", report.profile), ("seed", str(report.seed)),
                       ("device", report.device), ("dtype", report.dtype),
                       ("kind", report.kind), ("interrupted", str(report.interrupted).lower())):
        suite.add_property(key, value)
    if report.interrupted:
        suite.add_property("interrupted_by", report.interrupted_by or "SIGINT")
        suite.add_property("running", report.running or "")
    if report.setup_error is not None:  # nothing ran: one errored case says why
        setup = TestCase("setup", classname=rp.TEST_ID_PREFIX)
        error = Error(report.setup_error.splitlines()[0], type_="setup_error")
        error.text = report.setup_error
        setup.result = [error]
        suite.add_testcase(setup)
    for r in report.results:
        case = TestCase(r.id, classname=rp.TEST_ID_PREFIX, time=r.seconds)
        detail = _detail(r)
        if r.status in (rp.FAILED, rp.XPASS, rp.TIMEOUT):
            failure = Failure(r.message, type_=r.status)
            failure.text = detail
            case.result = [failure]
        elif r.status == rp.ERROR:
            error = Error(r.message, type_="error")
            error.text = (r.failure.traceback if r.failure is not None else None) or detail
            case.result = [error]
        elif r.status in (rp.BLOCKED, rp.NOT_APPLICABLE):
            case.result = [Skipped(r.skip_reason)]
        elif r.status == rp.XFAIL:
            case.system_out = r.message
        suite.add_testcase(case)
    for pid in report.not_run:
        case = TestCase(pid, classname=rp.TEST_ID_PREFIX)
        running = " (it was running)" if pid == report.running else ""
        case.result = [Skipped(f"not run: the run was interrupted by "
                               f"{report.interrupted_by or 'SIGINT'}{running}")]
        suite.add_testcase(case)
    suite.update_statistics()  # type: ignore[no-untyped-call]
    xml = JUnitXml()
    xml.add_testsuite(suite)
    return xml


def _detail(r: rp.PropertyResult) -> str:
    """The failure's explanation (:func:`explain_text`, with the traceback of the target's
    exception where there is one), or the message of a result without a failure (an
    xpass)."""
    return explain_text(r.failure, traceback=True) if r.failure is not None else r.message


def write_junit(report: rp.Report, path: str | Path) -> None:
    """Write the JUnit XML file.

    Raises:
        OSError: the file cannot be written.
    """
    to_junit(report).write(str(path), pretty=True)
