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
        "    print('KIT_LOADED', 'hcspec.conformance.run.session' in sys.modules)\n")
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
    assert "passed" in result.stdout and "not applicable: applies to mhc" in result.stdout


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
            and "there is no module 'no_such_module_xyz'" in result.stderr)
    assert "shape.output" not in result.stdout and "failed" not in result.stdout


HELPER = ("from hcspec.conformance.pytest_plugin import conformance_tests\n"
          "test_mine = conformance_tests({target!r}, profile='quick', device='cpu',\n"
          "    only=['shape.output', 'law.probed'])\n")


@pytest.mark.slow
def test_helper_with_a_target_that_does_not_resolve_is_one_usage_error(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(HELPER.format(target="no_such_module_xyz:make"))
    result = pytest_run(tmp_path)
    assert result.returncode == 4, result.stdout + result.stderr  # one usage error
    assert ("ERROR: hcspec conformance kit, target 'no_such_module_xyz:make'" in result.stderr
            and "there is no module 'no_such_module_xyz'" in result.stderr)
    assert "shape.output" not in result.stdout and "passed" not in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("helper", [False, True], ids=["option", "helper"])
def test_a_malformed_expected_failures_file_is_one_usage_error(tmp_path: Path,
                                                               helper: bool) -> None:
    (tmp_path / "xfail.txt").write_text("# known\nlaw.probe: transposed\n")
    args = ["--hc-expected-failures", "xfail.txt"]
    if helper:
        (tmp_path / "test_mine.py").write_text(HELPER.format(target="reference:hc-static"))
    else:
        args += ["--hc-target", "reference:hc-static", "--hc-profile", "quick"]
    result = pytest_run(tmp_path, *args)
    assert result.returncode == 4, result.stdout + result.stderr
    assert ("--hc-expected-failures xfail.txt:2: unknown property id 'law.probe'; did you "
            "mean law.probed?") in result.stderr
    assert "failed" not in result.stdout


@pytest.mark.slow
def test_the_command_line_wins_and_the_conflict_is_printed(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(HELPER.format(target="reference:hc-static"))
    result = pytest_run(tmp_path, "--hc-target", "nosuch_xyz:make")
    assert result.returncode == 4, result.stdout + result.stderr  # the option was not ignored
    assert "there is no module 'nosuch_xyz'" in result.stderr
    result = pytest_run(tmp_path, "--hc-profile", "ci", "--hc-target", "reference:hc-dynamic")
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("hcspec: --hc-profile ci overrides conformance_tests(profile='quick') in "
            "test_mine.py (the command line wins)") in result.stdout
    assert "--hc-target reference:hc-dynamic overrides conformance_tests(target=" in result.stdout


@pytest.mark.slow
def test_collect_only_counts_the_items_and_skips_name_the_property(tmp_path: Path) -> None:
    from hcspec.conformance.families import CATALOGUE

    listed = pytest_run(tmp_path, "--co", "--hc-target", "reference:hc-static")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert f"{len(CATALOGUE)} tests collected" in listed.stdout, listed.stdout
    assert "collected 0 items" not in listed.stdout
    ran = pytest_run(tmp_path, "--hc-target", "reference:hc-static", "--hc-profile", "quick",
                     "--hc-device", "cpu")
    skipped = [line for line in ran.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped, ran.stdout
    assert all("pytest_plugin.py" not in line for line in skipped), skipped
    assert any("constraints.h_res_nonnegative: not applicable: applies to mhc" in line
               for line in skipped), skipped
    assert not any("blocked: blocked" in line or "not_applicable: " in line for line in skipped)
