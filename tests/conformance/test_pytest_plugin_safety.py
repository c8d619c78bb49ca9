"""The pytest plugin is safe to run in a user's project: it leaves no ``.hypothesis/`` in the
current directory (``--hc-target`` and the ``conformance_tests`` helper), and SIGTERM mid-run or
SIGINT before any property finished stop pytest with what ran, the running property and the
ids not run printed and written into ``--junitxml``. Each case runs pytest in a subprocess
with a fresh temporary directory as its working directory (the CLI's counterparts are cases of
tests/conformance/bad_inputs.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conformance.signalled import run_signalled
from tests.conformance.test_pytest_plugin import ROOT, _plugin_args

pytestmark = pytest.mark.slow  # pytest subprocesses that run properties

HANG_CUE = "bad_inputs: this forward hangs now"


def _helper_file(tmp_path: Path, target: str, only: list[str]) -> None:
    (tmp_path / "test_mine.py").write_text(
        "from hcspec.conformance.pytest_plugin import conformance_tests\n"
        f"test_hc = conformance_tests({target!r}, profile='quick', device='cpu', timeout=0,\n"
        f"                            only={only!r})\n", encoding="utf-8")


def test_no_hypothesis_directory_is_left_in_the_working_directory(tmp_path: Path) -> None:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    _helper_file(project, "reference:hc-static", ["shape.output", "law.probed"])
    # the user's own test, after the kit's, still sees hypothesis' home as it was
    (project / "test_zz_after.py").write_text(
        "from hypothesis import configuration\n"
        "def test_home_is_restored():\n"
        "    assert getattr(configuration, '__hypothesis_home_directory', None) is None\n",
        encoding="utf-8")
    env_tmp = {"TMPDIR": str(private_tmp)}
    helper = _run(project, [], env_tmp)
    assert helper.returncode == 0, helper.stdout + helper.stderr
    assert "passed" in helper.stdout
    (project / "test_mine.py").unlink()
    (project / "test_zz_after.py").unlink()
    option = _run(project, ["--hc-target", "reference:hc-static", "--hc-profile", "quick",
                            "--hc-device", "cpu", "-k", "shape.output or law.probed"], env_tmp)
    assert option.returncode == 0, option.stdout + option.stderr
    assert "2 passed" in option.stdout
    assert sorted(p.name for p in project.iterdir()) == [], list(project.iterdir())
    assert list(private_tmp.iterdir()) == []  # the private home was removed at the end


def _run(cwd: Path, args: list[str], env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HC_CONFORMANCE_TARGET"}
    env.update(env_extra, PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *_plugin_args(),
           *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def _signalled_run(cwd: Path, sig: int) -> tuple[int, str, Path]:
    """pytest (``-s``, so the hanging forward's cue reaches stderr) with ``--junitxml``; the
    signal is sent once the cue shows. Returns the exit code, stdout + stderr, the XML path."""
    junit = cwd / "report.xml"
    env = {k: v for k, v in os.environ.items() if k != "HC_CONFORMANCE_TARGET"}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s",
           *_plugin_args(), f"--junitxml={junit}"]
    code, out, err = run_signalled(cmd, cwd=str(cwd), env=env, send=(sig, HANG_CUE))
    return code, out + err, junit


def _suite_properties(junit: Path) -> dict[str, str]:
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    return {p.get("name", ""): p.get("value", "")
            for p in suite.iterfind("properties/property")}


def test_sigterm_mid_run_reports_what_ran_and_what_did_not(tmp_path: Path) -> None:
    _helper_file(tmp_path, "tests.conformance.bad_inputs:hang_in_eval",
                 ["state.input_unchanged", "state.deterministic_eval"])
    code, out, junit = _signalled_run(tmp_path, signal.SIGTERM)
    assert code == pytest.ExitCode.INTERRUPTED, out
    assert ("hcspec conformance kit: interrupted (SIGTERM) while running "
            "state.deterministic_eval;") in out, out
    assert "state.input_unchanged passed" in out and "shape.output passed" in out
    assert "not run (1): state.deterministic_eval" in out
    props = _suite_properties(junit)
    assert props["hc_interrupted"] == "true" and props["hc_interrupted_by"] == "SIGTERM"
    assert props["hc_running"] == "state.deterministic_eval"
    assert props["hc_not_run"] == "state.deterministic_eval"
    assert "state.input_unchanged passed" in props["hc_finished"]
    cases = {c.get("name") for c in ET.parse(junit).getroot().iter("testcase")}
    assert "test_hc[state.input_unchanged]" in cases  # the finished results are in the XML


def test_sigint_before_any_property_reports_every_id_as_not_run(tmp_path: Path) -> None:
    only = ["shape.output", "law.probed"]
    _helper_file(tmp_path, "tests.conformance.bad_inputs:hang_on_first_call", only)
    code, out, junit = _signalled_run(tmp_path, signal.SIGINT)
    assert code == pytest.ExitCode.INTERRUPTED, out
    assert ("hcspec conformance kit: interrupted (SIGINT) while running shape.output; "
            "finished 0: none") in out, out
    props = _suite_properties(junit)
    assert props["hc_interrupted"] == "true" and props["hc_interrupted_by"] == "SIGINT"
    assert props["hc_running"] == "shape.output" and props["hc_finished"] == ""
    not_run = props["hc_not_run"].split(",")
    assert not_run[0] == "shape.output" and "law.probed" in not_run


def test_hypothesis_home_is_private_while_a_property_runs_and_restored_after() -> None:
    from hypothesis import configuration

    from hcspec.conformance.run import hypothesis_home

    def current() -> object:
        return getattr(configuration, "__hypothesis_home_directory", None)

    before = current()
    home = hypothesis_home.SessionHome()
    with home.active():
        inside = current()
        assert isinstance(inside, Path) and inside.name.startswith("hc-conformance-hypothesis-")
        assert inside.is_dir()
    assert current() == before
    with home.active():  # the same directory for the whole session
        assert current() == inside
    home.close()
    assert not inside.exists() and current() == before


def test_helper_expected_failures_accept_globs(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(
        "from hcspec.conformance.pytest_plugin import conformance_tests\n"
        "test_bad = conformance_tests('tests.mutants.h_res_transposed:make', profile='quick',\n"
        "    device='cpu', only=['law.reported'],\n"
        "    expected_failures={'law.report*': 'known transposed mixing'})\n",
        encoding="utf-8")
    result = _run(tmp_path, ["-rx"], {})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 xfailed" in result.stdout and "known transposed mixing" in result.stdout
    (tmp_path / "test_mine.py").write_text(
        "from hcspec.conformance.pytest_plugin import conformance_tests\n"
        "test_bad = conformance_tests('reference:hc-static', only=['law.reported'],\n"
        "    expected_failures={'law.nothing_*': 'typo'})\n", encoding="utf-8")
    result = _run(tmp_path, [], {})
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert ("conformance_tests(expected_failures=...): the glob 'law.nothing_*' matches no "
            "property id") in result.stderr


def test_global_torch_state_set_by_the_target_does_not_leak_into_later_tests(
        tmp_path: Path) -> None:
    _helper_file(tmp_path, "tests.conformance.bad_inputs:factory_sets_default_dtype",
                 ["shape.output"])
    (tmp_path / "test_zz_after.py").write_text(
        "import torch\n"
        "def test_default_dtype_is_untouched():\n"
        "    assert torch.get_default_dtype() == torch.float32\n", encoding="utf-8")
    result = _run(tmp_path, [], {})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_a_property_past_the_helper_timeout_fails_and_the_session_goes_on(
        tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text(
        "from hcspec.conformance.pytest_plugin import conformance_tests\n"
        "test_hc = conformance_tests('tests.conformance.bad_inputs:hang_in_eval',\n"
        "    profile='quick', device='cpu', timeout=10,\n"
        "    only=['state.deterministic_eval', 'state.input_unchanged'])\n", encoding="utf-8")
    (tmp_path / "test_zz_after.py").write_text("def test_later():\n    pass\n",
                                               encoding="utf-8")
    result = _run(tmp_path, ["-rfp"], {})
    out = result.stdout
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, out + result.stderr
    assert "state.deterministic_eval timeout" in out and "did not finish within 10 s" in out
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    assert [line.split()[1] for line in failed] == [
        "test_mine.py::test_hc[state.deterministic_eval]"], out
    assert "PASSED test_mine.py::test_hc[state.input_unchanged]" in out
    assert "PASSED test_zz_after.py::test_later" in out  # the session went on after the hang


def test_two_targets_and_pytest_exit_report_each_property_and_the_real_cause(
        tmp_path: Path) -> None:
    """Two helpers on two targets with the same ids, then ``pytest.exit()`` between them: the
    finished and not-run properties are told apart by target, and the cause is pytest.exit,
    not a signal."""
    only = ["shape.output", "law.probed"]
    _helper_file(tmp_path, "reference:hc-static", only)
    (tmp_path / "test_mine.py").rename(tmp_path / "test_a_first.py")
    (tmp_path / "test_b_stop.py").write_text(
        "import pytest\n"
        "def test_stop():\n"
        "    pytest.exit('enough for today')\n", encoding="utf-8")
    _helper_file(tmp_path, "reference:mhc", only)
    (tmp_path / "test_mine.py").rename(tmp_path / "test_c_second.py")
    junit = tmp_path / "report.xml"
    result = _run(tmp_path, [f"--junitxml={junit}"], {})
    out = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.INTERRUPTED, out
    assert ("hcspec conformance kit: interrupted (pytest.exit(): enough for today) while "
            "running nothing; finished 3: reference:hc-static::shape.output passed, "
            "reference:hc-static::shape.branch_once passed, "
            "reference:hc-static::law.probed passed") in out, out
    props = _suite_properties(junit)
    assert props["hc_interrupted_by"] == "pytest.exit(): enough for today"
    assert props["hc_not_run"] == ("reference:mhc::shape.output,reference:mhc::shape.branch_once,"
                                   "reference:mhc::law.probed")
