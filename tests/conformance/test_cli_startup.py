"""``hc-conformance --help``, ``--version``, ``targets`` and ``list`` answer without importing
torch or hypothesis (they took 3–10 s when every command imported torch first): checked in a
fresh interpreter through ``sys.modules``, not by timing."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hcspec.conformance import listing, targets

HEAVY = ("torch", "hypothesis", "numpy", "sympy")

_PROBE = """\
import sys
from hcspec.conformance import cli
try:
    code = cli.main({argv!r})
except SystemExit as exc:
    code = exc.code
heavy = sorted({{m.partition('.')[0] for m in sys.modules}} & set({heavy!r}))
sys.stderr.write('\\nHEAVY=' + ','.join(heavy) + '\\n')
sys.exit(code)
"""


def _heavy_imports(argv: list[str], tmp_path: Path) -> tuple[list[str], str]:
    done = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv, heavy=HEAVY)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = done.stderr.rsplit("HEAVY=", 1)[1].strip()
    return [m for m in line.split(",") if m], done.stdout


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["run", "--help"],
                                  ["list", "--help"], ["targets", "--help"]])
def test_help_and_version_do_not_import_torch(argv: list[str], tmp_path: Path) -> None:
    heavy, out = _heavy_imports(argv, tmp_path)
    assert heavy == [], f"hc-conformance {' '.join(argv)} imported {heavy}"
    assert "hc-conformance" in out


def _installed_third_party() -> list[str]:
    """The import names of third-party packages present here (importing one, as ``targets``
    does to tell whether it imports, may import torch itself)."""
    names = {t.requires.partition(".")[0] for t in targets.BUILTIN.values() if t.requires}
    return sorted(n for n in names if importlib.util.find_spec(n) is not None)


def test_targets_does_not_import_torch(tmp_path: Path) -> None:
    present = _installed_third_party()
    if present:
        pytest.skip(f"third-party packages are installed here ({', '.join(present)}); "
                    "`targets` imports them to tell whether they import, and they import torch")
    heavy, out = _heavy_imports(["targets"], tmp_path)
    assert heavy == [], f"hc-conformance targets imported {heavy}"
    assert "reference:mhc" in out and "hyper_connections:mhc" in out


def test_the_catalogue_snapshot_is_up_to_date() -> None:
    reason = listing.stale_reason()
    assert reason is None, (f"the catalogue snapshot of `hc-conformance list` is out of date "
                            f"({reason}): run `python -m hcspec.conformance.listing --write`")
    stored = json.loads(listing.SNAPSHOT.read_text(encoding="utf-8"))["rows"]
    assert [listing.Row(**{**r, "theorems": tuple(r["theorems"]),
                           "requires": tuple(r["requires"])}) for r in stored] \
        == listing.live_rows()


def test_list_does_not_import_torch_and_shows_every_property(tmp_path: Path) -> None:
    if listing.stale_reason() is not None:
        pytest.skip("the snapshot is out of date (test_the_catalogue_snapshot_is_up_to_date)")
    heavy, out = _heavy_imports(["list"], tmp_path)
    assert heavy == [], f"hc-conformance list imported {heavy}"
    for row in listing.live_rows():
        assert row.id in out


def test_a_changed_source_makes_the_snapshot_stale_and_list_reads_the_catalogue(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = json.loads(listing.SNAPSHOT.read_text(encoding="utf-8"))
    first = next(iter(data["sources"]))
    data["sources"][first] = "0" * 64
    data["rows"] = data["rows"][:1]  # what a stale snapshot would show: must not be used
    stale = tmp_path / "catalogue.json"
    stale.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(listing, "SNAPSHOT", stale)
    assert listing.stale_reason() == f"{first} changed since the snapshot was written"
    rows, reason = listing.rows()
    assert reason is not None and [r.id for r in rows] == [r.id for r in listing.live_rows()]
    monkeypatch.setattr(listing, "SNAPSHOT", tmp_path / "missing.json")
    assert "no readable snapshot" in (listing.stale_reason() or "")
    data["torch"] = "0.0"
    assert "written with torch 0.0" in (listing.stale_reason(data) or "")
