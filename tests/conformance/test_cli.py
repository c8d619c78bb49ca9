"""The hc-conformance CLI: exit codes, reports, catalogue listing."""

from __future__ import annotations

from pathlib import Path

import pytest
from junitparser import JUnitXml

from conformance import cli
from conformance.report import Report


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_pass_writes_json_and_junit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "run", "reference:hc-static", "--profile", "quick", "--device",
                       "cpu", "--only", "shape,state", "--json", str(tmp_path / "r.json"),
                       "--junit", str(tmp_path / "r.xml"), "--no-progress")
    assert code == 0
    assert "shape.output" in out and "reference:hc-static" in out and "result: OK" in out
    report = Report.read_json(tmp_path / "r.json")
    assert report.profile == "quick" and report.summary["passed"] == 9
    suites = list(JUnitXml.fromfile(str(tmp_path / "r.xml")))
    cases = {case.name: case for case in suites[0]}
    assert set(cases) == {r.id for r in report.results}
    assert cases["shape.output"].is_passed


def test_failure_exits_1_with_counterexample_and_reproduction(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "run", "tests.mutants.h_res_transposed:make", "--profile", "ci",
                       "--device", "cpu", "--only", "law.reported", "--no-progress",
                       "--junit", str(tmp_path / "r.xml"))
    assert code == 1
    assert "FAILED law.reported" in out
    assert "minimal counterexample: {" in out
    line = next(s for s in out.splitlines() if "reproduce:" in s)
    assert "hc-conformance run tests.mutants.h_res_transposed:make --only law.reported" in line
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "r.xml"))))
    case = next(c for c in suite if c.name == "law.reported")
    assert case.is_failure


def test_reproduction_command_replays_the_failure(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "run", "tests.mutants.h_res_transposed:make", "--device", "cpu",
                    "--only", "law.reported", "--no-progress")
    case = next(s for s in out.splitlines() if "--case" in s).split("--case ", 1)[1].strip("'")
    code, out, _ = run(capsys, "run", "tests.mutants.h_res_transposed:make", "--device", "cpu",
                       "--only", "law.reported", "--case", case, "--no-progress")
    assert code == 1 and "FAILED law.reported" in out


def test_expected_failures_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "xfail.txt"
    path.write_text("# known\nlaw.reported: transposed mixing (mutant)\n", encoding="utf-8")
    code, out, _ = run(capsys, "run", "tests.mutants.h_res_transposed:make", "--device", "cpu",
                       "--only", "law.reported", "--expected-failures", str(path),
                       "--no-progress")
    assert code == 0 and "xfail" in out
    path.write_text("law.reported transposed\n", encoding="utf-8")
    code, _, err = run(capsys, "run", "reference:hc-static", "--expected-failures", str(path))
    assert code == 2 and "expected 'PROPERTY_ID: reason'" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "no_such_module_xyz:make"], "No module named 'no_such_module_xyz'"),
    (["run", "conformance.adapters.reference:nope"], "has no attribute 'nope'"),
    (["run", "reference:hc-static", "--only", "law.nope"], "unknown property id"),
    (["run", "reference:hc-static", "--case", "{bad"], "expected a JSON object"),
])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str],
                             message: str) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err


def test_unwritable_report_path_exits_2_and_still_writes_the_other(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "run", "reference:hc-static", "--profile", "quick", "--device",
                         "cpu", "--only", "shape.output", "--json",
                         str(tmp_path / "missing" / "r.json"), "--junit",
                         str(tmp_path / "r.xml"), "--no-progress")
    assert code == 2 and "cannot write the report" in err
    assert (tmp_path / "r.xml").exists() and "shape.output" in out


def test_env_var_selects_the_target(capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_CONFORMANCE_TARGET", "reference:hc-dynamic")
    code, out, _ = run(capsys, "run", "--profile", "quick", "--only", "shape.output",
                       "--device", "cpu", "--no-progress")
    assert code == 0 and "reference:hc-dynamic" in out


def test_list_prints_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list")
    assert code == 0
    for needle in ("constraints.h_res_other_axis", "layout.paper_rows", "weights", "mhc"):
        assert needle in out


def test_interrupt_exits_130_and_writes_the_partial_report(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run(capsys, "run", "tests.conformance.cli_targets:make_interrupting",
                       "--profile", "quick", "--device", "cpu", "--no-progress",
                       "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"))
    assert code == 130 and "interrupted" in out
    report = Report.read_json(tmp_path / "r.json")
    assert report.interrupted and report.results and report.not_run
    assert "not run: the run was interrupted" in (tmp_path / "r.xml").read_text()


def test_target_importable_from_the_current_directory(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_local_adapter.py").write_text(
        "from conformance.adapters.reference import make_hc_dynamic as make\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "run", "my_local_adapter:make", "--profile", "quick",
                       "--only", "shape.output", "--device", "cpu", "--no-progress")
    assert code == 0 and "my_local_adapter:make" in out and "(hc-dynamic)" in out


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="CUDA is present here")
def test_device_cuda_without_cuda_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "run", "reference:hc-static", "--device", "cuda")
    assert code == 2 and "no CUDA device" in err
