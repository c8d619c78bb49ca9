"""The pytest plugin: inert without a target; items under --hc-target; the helper with xfail
and strict xpass. Each case runs pytest in a subprocess (as a user would)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _plugin_args() -> list[str]:
    installed = any(ep.name == "hcspec" for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "hcspec.conformance.pytest_plugin"]


def pytest_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HC_CONFORMANCE_TARGET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rsx",
           *_plugin_args(), *args]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.mark.slow
def test_inert_without_a_target(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    (tmp_path / "conftest.py").write_text(
        "import sys\n"
        "def pytest_sessionfinish(session):\n"
        "    print('KIT_LOADED', 'hcspec.conformance.runner' in sys.modules)\n")
    result = pytest_run(tmp_path, "-s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout and "hc-conformance" not in result.stdout
    assert "KIT_LOADED False" in result.stdout  # nothing of the kit beyond the plugin module
    probe = pytest_run(tmp_path, "--co")
    assert "test_plain.py::test_one" in probe.stdout and "shape.output" not in probe.stdout


@pytest.mark.slow
def test_hc_target_adds_one_item_per_property(tmp_path: Path) -> None:
    result = pytest_run(tmp_path, "--hc-target", "reference:hc-static", "--hc-profile", "quick",
                        "--hc-device", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" in result.stdout and "not_applicable: applies to mhc" in result.stdout


@pytest.mark.slow
def test_helper_with_expected_failures(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(
        "from hcspec.conformance.pytest_plugin import conformance_tests\n"
        "test_bad = conformance_tests('tests.mutants.h_res_transposed:make', profile='quick',\n"
        "    device='cpu', only=['law.reported', 'law.probed'],\n"
        "    expected_failures={'law.reported': 'known transposed mixing',\n"
        "                       'law.probed': 'wrongly expected'})\n"
    )
    result = pytest_run(tmp_path)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "XFAIL" in out and "known transposed mixing" in out
    assert "[XPASS(strict)] law.probed" in out
    # the prerequisites (shape.output, shape.branch_once, shape.weights) run as tests too
    assert "1 failed, 3 passed, 1 xfailed" in out


@pytest.mark.slow
def test_a_target_that_does_not_resolve_is_one_usage_error(tmp_path: Path) -> None:
    result = pytest_run(tmp_path, "--hc-target", "no_such_module_xyz:make")
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage error
    assert ("ERROR: hcspec conformance kit, target 'no_such_module_xyz:make'" in result.stderr
            and "No module named 'no_such_module_xyz'" in result.stderr)
    assert "shape.output" not in result.stdout and "failed" not in result.stdout


@pytest.mark.slow
def test_helper_with_a_target_that_does_not_resolve_is_one_collection_error(
        tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(
        "from hcspec.conformance.pytest_plugin import conformance_tests\n"
        "test_mine = conformance_tests('no_such_module_xyz:make', profile='quick')\n"
    )
    result = pytest_run(tmp_path)
    out = result.stdout
    assert result.returncode == 2, out + result.stderr  # pytest: errors during collection
    assert "1 error during collection" in out
    assert "TargetError: TARGET 'no_such_module_xyz:make': importing" in out
    assert "shape.output" not in out and "passed" not in out and "FAILED" not in out
