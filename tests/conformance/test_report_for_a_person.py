"""The report, for a person: the failures first (one card each, above the table), the
not-applicable rows folded under a count, a legend for error / floor / allowance and one word
for each ("allowance", never "tolerance", in what a person reads), and only the conventions the
target declared, the defaults folded."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hcspec.conformance import cli
from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation

FAILING = ["run", "tests.mutants.h_post_sigma:make", "--only", "constraints.h_post_span,device",
           "--profile", "quick", "--device", "cpu", "--no-progress", "--no-status"]


def test_the_terminal_opens_with_the_failures_and_folds_the_not_applicable(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(FAILING) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    card = next(i for i, line in enumerate(lines)
                if line.startswith("FAILED constraints.h_post_span"))
    table = next(i for i, line in enumerate(lines) if "┃ property" in line)
    assert lines[card - 2] == "1 failure" and card < table
    rows = [line for line in lines[table:] if line.startswith("│")]
    assert not any("not_applicable" in row for row in rows)
    assert not any("device.cuda_matches_cpu" in row for row in rows)
    folded = next(line for line in lines if "not applicable (not in the table)" in line)
    assert re.fullmatch(r"\d+ not applicable \(not in the table\), by reason:", folded)
    assert "device.cuda_matches_cpu" in out  # named under its reason
    assert "error: what the check measured" in out and "allowance: the most error" in out
    assert "tolerance" not in out.lower()


def test_the_header_shows_only_the_declared_conventions(
        capsys: pytest.CaptureFixture[str]) -> None:
    report = check_implementation("tests.conformance.five_rounds:make", profile="quick",
                                  device="cpu", only=["shape.output"])
    assert report.declared_conventions is not None
    assert "sinkhorn_iterations" in report.declared_conventions
    assert "reduce" not in report.declared_conventions  # at its default, "sum"
    declared, defaults = report.conventions_split()
    assert declared["sinkhorn_iterations"] == "20" and defaults["reduce"] == "sum"
    assert set(declared) | set(defaults) == set(report.conventions)
    assert cli.main(["run", "tests.conformance.five_rounds:make", "--only", "shape.output",
                     "--profile", "quick", "--device", "cpu", "--no-progress"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.startswith("  conventions declared:"))
    assert "sinkhorn_iterations=20" in line and "reduce=" not in line
    assert f"({len(defaults)} more at their defaults" in line


def test_the_html_page_opens_with_the_failure_cards(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.html"
    assert cli.main([*FAILING, "--html", str(path), "--json", str(tmp_path / "r.json")]) == 1
    capsys.readouterr()
    page = path.read_text()
    assert page.index('<h2>Failures (1)</h2>') < page.index('class="props"')
    assert page.index('id="failure-constraints.h_post_span"') < page.index('class="props"')
    assert re.search(r"<summary>\d+ not applicable \(why, by reason\)</summary>", page)
    for word, _ in md.LEGEND:
        assert f"<dt>{word}</dt>" in page
    assert "Conventions at their defaults (" in page
    report = rp.Report.read_json(tmp_path / "r.json")
    assert report.declared_conventions is not None  # written and read back
