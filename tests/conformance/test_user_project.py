"""A user project whose own top-level packages are called ``spec``, ``reference`` and
``conformance`` (the names of this repository's folders) runs the kit: ``pytest --hc-target
reference:mhc`` and ``hc-conformance run`` both pass, and the project's own packages stay the
ones its tests import. Run in a subprocess from a scratch project, as a user would."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

USER_FILES = {
    "spec/__init__.py": "",
    "spec/numeric.py": "VALUE = 'the user spec'\n",
    "reference/__init__.py": "",
    "reference/model.py": "def mhc():\n    return 'the user reference'\n",
    "conformance/__init__.py": "MARK = 'the user conformance'\n",
    "conftest.py": ("from spec import numeric\nfrom reference import model\nimport conformance\n"
                    "assert numeric.VALUE == 'the user spec'\n"),
    "tests/test_own.py": ("import conformance\nfrom reference import model\n"
                          "from spec.numeric import VALUE\n\n"
                          "def test_own_packages():\n"
                          "    assert VALUE == 'the user spec'\n"
                          "    assert model.mhc() == 'the user reference'\n"
                          "    assert conformance.MARK == 'the user conformance'\n"),
}


def _project(root: Path) -> None:
    for name, text in USER_FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HC_CONFORMANCE_TARGET",
                                                             "PYTHONPATH")}
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.mark.slow
def test_a_project_with_its_own_spec_reference_and_conformance_packages(tmp_path: Path) -> None:
    _project(tmp_path)
    plugin = ([] if any(ep.name == "hcspec" for ep in
                        importlib.metadata.entry_points(group="pytest11"))
              else ["-p", "hcspec.conformance.pytest_plugin"])
    run = subprocess.run(
        [sys.executable, "-m", "hcspec.conformance", "run", "--profile", "quick", "--device",
         "cpu", "--no-progress", "--json", "r.json"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "target reference:mhc" in run.stdout and "result: OK" in run.stdout
    assert not (tmp_path / ".hypothesis").exists()  # the CLI leaves no hypothesis cache
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin,
         "--hc-target", "reference:mhc", "--hc-profile", "quick", "--hc-device", "cpu"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600, check=False)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
    assert " passed" in tested.stdout and "failed" not in tested.stdout
    assert "test_own.py" not in tested.stdout  # quiet mode: only failures would name it
