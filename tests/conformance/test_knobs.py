"""Knobs users expect: ``--max-examples N`` (recorded in the report), ``hc-conformance list
--json`` with filters by family and theorem, and ``hc-conformance init`` (an adapter skeleton
for the user's module, and the worked example shipped with the package)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import tomllib

from hcspec.conformance import cli, scaffold
from hcspec.conformance.outputs.report import Report

ROOT = Path(__file__).resolve().parents[2]


def _examples(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> Report:
    path = tmp_path / f"r{len(extra)}.json"
    assert cli.main(["run", "reference:hc-static", "--only", "shape.output", "--profile",
                     "quick", "--device", "cpu", "--no-progress", "--json", str(path),
                     *extra]) == 0
    capsys.readouterr()
    return Report.read_json(path)


def test_max_examples_scales_every_property_and_is_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    default = _examples(tmp_path, capsys)
    more = _examples(tmp_path, capsys, "--max-examples", "7")
    assert default.max_examples == 2 and more.max_examples == 7  # quick's 2, then 7
    assert more.results[0].examples - default.results[0].examples == 5
    with pytest.raises(SystemExit) as usage:
        cli.main(["run", "reference:hc-static", "--max-examples", "0"])
    assert usage.value.code == 2
    assert "expected a whole number, 1 or more" in capsys.readouterr().err


def test_list_json_filters_by_family_and_theorem(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list", "--json"]) == 0
    every = json.loads(capsys.readouterr().out)
    assert {"id", "family", "statement", "theorems", "requires", "tolerance"} == set(every[0])
    assert cli.main(["list", "--json", "--family", "constraints"]) == 0
    constraints = json.loads(capsys.readouterr().out)
    assert constraints and {r["family"] for r in constraints} == {"constraints"}
    assert [r["id"] for r in constraints] == [r["id"] for r in every
                                              if r["family"] == "constraints"]
    assert cli.main(["list", "--json", "--theorem", "ds"]) == 0
    by_theorem = json.loads(capsys.readouterr().out)
    assert by_theorem and all(any(t == "ds" or t.startswith("ds.") for t in r["theorems"])
                              for r in by_theorem)
    assert len(by_theorem) == sum(1 for r in every if any(t.startswith("ds.")
                                                          for t in r["theorems"]))
    assert cli.main(["list", "--family", "constraint"]) == 2
    assert "--family: unknown constraint" in capsys.readouterr().err


def test_init_writes_a_skeleton_for_the_users_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "json.decoder"]) == 0
    text = (tmp_path / "hc_adapter.py").read_text()
    assert "import json.decoder" in text and "hc-conformance run hc_adapter.py:make" in text
    compile(text, "hc_adapter.py", "exec")
    assert cli.main(["init", "json.decoder"]) == 2  # never overwritten
    assert "exists" in capsys.readouterr().err
    assert cli.main(["init", "not a module"]) == 2
    try:
        code = cli.main(["run", "hc_adapter.py:make", "--only", "shape.output", "--profile",
                         "quick", "--device", "cpu", "--no-progress"])
    finally:
        sys.modules.pop("hc_adapter", None)
    assert code == 1
    assert "adapter: translate x to your layer's layout in forward" in capsys.readouterr().out


def test_the_worked_example_ships_with_the_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    shipped = scaffold.worked_example()
    assert shipped == (ROOT / "examples" / "conformance_adapter.py").read_text()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "templates/*.py" in data["tool"]["setuptools"]["package-data"]["hcspec.conformance"]
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "--example"]) == 0
    assert (tmp_path / "conformance_adapter.py").read_text() == shipped
    try:
        code = cli.main(["run", "conformance_adapter.py:make", "--only", "shape,law.reported",
                         "--profile", "quick", "--device", "cpu", "--no-progress"])
    finally:
        sys.modules.pop("conformance_adapter", None)
    assert code == 0, capsys.readouterr().out[-2000:]
