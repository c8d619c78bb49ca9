"""docs/conformance.md stays true: it lists every property, and its worked adapter is the
example file, which passes the kit."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from hcspec.conformance import listing
from hcspec.conformance.families import CATALOGUE
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.subjects.targets import BUILTIN
from tools import mutation

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")


def test_every_property_is_documented() -> None:
    missing = [p.id for p in CATALOGUE if f"`{p.id}`" not in DOC]
    assert missing == []


def test_the_property_table_is_generated_from_the_catalogue() -> None:
    """The table in docs/conformance.md is the catalogue's, current: a changed statement,
    requirement or rule fails here until `python -m hcspec.conformance.listing --write`."""
    rows = listing.live_rows()
    assert listing.with_table(DOC, rows) == DOC, (
        "stale property table: run python -m hcspec.conformance.listing --write")
    changed = [dataclasses.replace(rows[0], statement=rows[0].statement + " (changed)"),
               *rows[1:]]
    assert listing.with_table(DOC, changed) != DOC
    table = DOC[DOC.index(listing.TABLE_START):DOC.index(listing.TABLE_END)]
    assert [line.split("`")[1] for line in table.splitlines()[3:]] == [p.id for p in CATALOGUE]


def test_worked_adapter_in_the_docs_is_the_example_file() -> None:
    example = (ROOT / "examples" / "conformance_adapter.py").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)
    assert example.rstrip() + "\n" in [b for b in blocks]


@pytest.mark.slow
def test_worked_adapter_passes_the_kit() -> None:
    report = check_implementation("examples.conformance_adapter:make", profile="quick",
                                  device="cpu")
    assert report.ok, [(r.id, r.message) for r in report.results if r.status in rp.UNEXPECTED]
    declared = report.conventions["branch_input"]
    assert declared == "rms_norm"
    assert {r.id: r.status for r in report.results}["law.reported"] == rp.PASSED


def _public_report_rows() -> dict[int, str]:
    section = DOC.split("### Bug classes from public reports", 1)[1].split("\n## ", 1)[0]
    return {int(m.group(1)): m.group(0)
            for m in re.finditer(r"^\| (\d+) \|.*$", section, flags=re.M)}


def test_public_report_table_lists_every_mutant_of_each_report() -> None:
    """Row k of the table links every mutant whose BUG_CLASS cites public report #k (so the
    numbers in the mutants are defined in the docs), and each row has at least one."""
    rows = _public_report_rows()
    assert sorted(rows) == list(range(1, 13))
    cited: dict[int, set[str]] = {k: set() for k in rows}
    for mutant in mutation.discover():
        for k in re.findall(r"report #(\d+)", mutant.bug_class):
            cited[int(k)].add(mutant.name)
    for k, row in rows.items():
        linked = set(re.findall(r"\(\.\./tests/mutants/(\w+)\.py\)", row))
        assert linked == cited[k] and linked, (k, linked, cited[k])


def test_every_reference_target_is_documented() -> None:
    names = [name for name in BUILTIN if name.startswith("reference:")]
    assert "reference:mhc-fast" in names
    assert [name for name in names if f"`{name}`" not in DOC] == []


def test_no_references_to_files_outside_the_repository() -> None:
    """The design notes and the issue tracker live outside the repository: a reader cannot
    follow them, from any page or source file (upstream report numbers, written ``#N``, are
    fine)."""
    design = "DESIGN" + ".md"
    tracked = subprocess.run(["git", "ls-files", "*.py", "*.md"], cwd=ROOT, capture_output=True,
                             text=True, check=False).stdout.split()
    paths = ([ROOT / name for name in tracked] if tracked
             else [*ROOT.glob("[!.]*/**/*.py"), *ROOT.glob("[!.]*/**/*.md"), ROOT / "README.md"])
    offending = []
    for path in paths:
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if design in text or re.search(r"\bissue \d", text):
            offending.append(str(path.relative_to(ROOT)))
    assert offending == [], offending
