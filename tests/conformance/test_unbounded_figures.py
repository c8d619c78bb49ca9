"""A reported figure without a bound (HC's growth over depth: its "tolerance" is the largest
float) is shown as a figure, never as ``error / 1.8e+308`` next to "passed", in the terminal
table and the Markdown report; a bounded comparison keeps ``error / allowance``."""

from __future__ import annotations

import io

from rich.console import Console

from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.outputs import terminal
from hcspec.conformance.run.session import check_implementation


def test_achieved_text_of_an_unbounded_figure() -> None:
    assert md.achieved_text({"error": 3.5, "tolerance": 1.7976931348623157e308}) == (
        "3.5 (reported, no bound)")
    assert md.achieved_text({"error": 3.5, "tolerance": float("inf")}) == (
        "3.5 (reported, no bound)")
    assert md.achieved_text({"error": 0.002, "tolerance": 0.03, "floor": 0.001}) == (
        "0.002 / 0.03")
    assert md.achieved_text(None) == ""


def test_hc_growth_is_shown_as_a_reported_figure() -> None:
    report = check_implementation("reference:hc-static", profile="quick",
                                  only=["depth.hc_growth", "law.reported"])
    growth = next(r for r in report.results if r.id == "depth.hc_growth")
    assert growth.status == rp.PASSED and growth.achieved is not None
    assert growth.achieved["tolerance"] >= md.UNBOUNDED_TOLERANCE
    markdown = md.to_markdown(report)
    assert "e+308" not in markdown and "(reported, no bound)" in markdown
    out = io.StringIO()
    terminal.print_table(Console(file=out, width=200), report)
    assert "e+308" not in out.getvalue() and "(reported, no bound)" in out.getvalue()
    law = next(r for r in report.results if r.id == "law.reported")
    assert " / " in md.achieved_text(law.achieved)
