"""``hc-conformance --help``, ``--version``, ``targets`` and ``list`` answer without importing
torch or hypothesis (they took 3–10 s when every command imported torch first): checked in a
fresh interpreter through ``sys.modules``, not by timing. ``list`` reads a listing cached in the
user's cache folder (never in the package), rewritten whenever a source it depends on changes:
nothing committed can go stale."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hcspec
from hcspec.conformance import listing
from hcspec.conformance.subjects import targets

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


def _heavy_imports(argv: list[str], tmp_path: Path,
                   cache: Path | None = None) -> tuple[list[str], str]:
    src = str(Path(hcspec.__file__).parent.parent)  # the sources under test come first
    env = {**os.environ, "XDG_CACHE_HOME": str(cache or tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv, heavy=HEAVY)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
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


def test_list_caches_the_catalogue_and_then_does_not_import_torch(tmp_path: Path) -> None:
    """A cold cache: ``list`` imports the catalogue, shows every property and caches the rows
    in the user cache (not in the package); the next ``list`` shows the same rows without
    importing torch."""
    cache = tmp_path / "cache"
    heavy, cold = _heavy_imports(["list"], tmp_path, cache)
    assert "torch" in heavy  # nothing was cached: read from the catalogue
    for row in listing.live_rows():
        assert row.id in cold
    written = list((cache / "hcspec").glob("catalogue-*.json"))
    assert [p.name for p in written] == [listing.cache_path().name]
    heavy, warm = _heavy_imports(["list"], tmp_path, cache)
    assert heavy == [], f"hc-conformance list imported {heavy}"
    assert warm == cold


def test_nothing_is_cached_in_the_package() -> None:
    package = Path(listing.__file__).resolve().parent
    assert not (package / "catalogue.json").exists()
    assert not listing.cache_path().resolve().is_relative_to(package.parent)


def test_a_changed_source_makes_the_cache_stale_and_list_rewrites_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What editing a family module does: the cached digest no longer matches, so ``rows``
    reads the catalogue (never the stale rows) and rewrites the cache, which is current
    again; an unwritable cache folder only costs the import."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert "no readable cached listing" in (listing.stale_reason() or "")
    rows, reason = listing.rows()
    assert reason is not None and "no readable cached listing" in reason
    assert listing.stale_reason() is None
    assert listing.rows() == (rows, None)
    data = json.loads(listing.cache_path().read_text(encoding="utf-8"))
    assert "conformance/families/law.py" in data["sources"]
    data["sources"]["conformance/families/law.py"] = "0" * 64
    data["rows"] = data["rows"][:1]  # what a stale cache would show: must not be used
    listing.cache_path().write_text(json.dumps(data), encoding="utf-8")
    assert listing.stale_reason() == ("conformance/families/law.py changed since the listing "
                                      "was cached")
    again, reason = listing.rows()
    assert reason is not None and again == rows == listing.live_rows()
    assert listing.stale_reason() is None  # rewritten
    data["torch"] = "0.0"
    assert "written with torch 0.0" in (listing.stale_reason(data) or "")
    blocked = tmp_path / "a-file"
    blocked.write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert listing.rows() == (rows, listing.stale_reason())
    assert listing.write_cache({"rows": []}) is None
