"""docs/conformance.md's sharded section stays true: it lists every parallel property, and its
worked sharded adapter is examples/parallel_adapter.py, which passes the family on 2 ranks."""

from __future__ import annotations

import re
from pathlib import Path

from hcspec.conformance import check_parallel
from hcspec.conformance import families as catalogue
from hcspec.conformance.outputs import report as rp

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")

BY_ID = {p.id: p for p in catalogue.CATALOGUE if p.family == "parallel"}
PROPERTIES = tuple(BY_ID.values())


def test_every_parallel_property_is_documented() -> None:
    assert [p.id for p in PROPERTIES if f"`{p.id}`" not in DOC] == []


def test_worked_sharded_adapter_is_the_example_file() -> None:
    example = (ROOT / "examples" / "parallel_adapter.py").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)
    assert example.rstrip() + "\n" in blocks


def test_worked_sharded_adapter_passes_on_two_ranks() -> None:
    report = check_parallel("examples.parallel_adapter:make", world_size=2, device="cpu")
    assert {r.id: r.status for r in report.results} == {p.id: rp.PASSED for p in PROPERTIES}
    assert report.conventions["parallel.splits"] == "tokens"
    assert report.conventions["parallel.parameters[0]"].startswith(
        "tokens: replicated, gradient completed by the framework")
