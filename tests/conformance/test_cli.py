"""The hc-conformance CLI: exit codes, reports, catalogue listing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

from hcspec.conformance import cli
from hcspec.conformance.outputs.markdown import to_markdown
from hcspec.conformance.outputs.report import Report
from hcspec.conformance.subjects.targets import BUILTIN, BuiltinTarget

ROOT = Path(__file__).resolve().parents[2]


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
    (["run", "no_such_module_xyz:make"], "there is no module 'no_such_module_xyz'"),
    (["run", "hcspec.conformance.adapters.reference:nope"], "has no attribute 'nope'"),
    (["run", "reference:hc-static", "--only", "law.nope"], "unknown property id"),
    (["run", "reference:hc-static", "--case", "{bad"], "expected a JSON object"),
])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str],
                             message: str) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err


@pytest.mark.parametrize("bad", ["missing/r.json", "a_directory", "a_file/r.json"])
def test_unwritable_report_path_exits_2_before_the_run_and_writes_the_other(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, bad: str) -> None:
    (tmp_path / "a_directory").mkdir()
    (tmp_path / "a_file").write_text("not a directory\n")
    code, out, err = run(capsys, "run", "reference:hc-static", "--profile", "quick", "--device",
                         "cpu", "--only", "shape.output", "--json", str(tmp_path / bad),
                         "--junit", str(tmp_path / "r.xml"), "--no-progress")
    assert code == 2 and f"cannot write the report to {tmp_path / bad}" in err
    assert "nothing was run" in err and "shape.output" not in out + err
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "r.xml"))))  # the other is written
    assert [case.name for case in suite] == ["setup"]


def test_report_path_problem_names_the_cause(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("x\n")
    assert cli.report_path_problem(str(tmp_path / "r.json")) is None
    assert cli.report_path_problem("r.json") is None  # the current directory
    assert "is a directory" in str(cli.report_path_problem(str(tmp_path)))
    assert f"the directory {tmp_path / 'no'} does not exist" in str(
        cli.report_path_problem(str(tmp_path / "no" / "r.json")))
    assert f"the directory {tmp_path / 'a_file'} is not a directory" in str(
        cli.report_path_problem(str(tmp_path / "a_file" / "r.json")))


def test_report_path_without_write_permission(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "old.json").write_text("{}\n")
    monkeypatch.setattr(cli.os, "access", lambda *args, **kwargs: False)  # root ignores modes
    assert f"the directory {tmp_path} is not writable" in str(
        cli.report_path_problem(str(tmp_path / "r.json")))
    assert "the file is not writable" in str(cli.report_path_problem(str(tmp_path / "old.json")))


def test_env_var_selects_the_target(capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_CONFORMANCE_TARGET", "reference:hc-dynamic")
    code, out, _ = run(capsys, "run", "--profile", "quick", "--only", "shape.output",
                       "--device", "cpu", "--no-progress")
    assert code == 0 and "reference:hc-dynamic" in out


def test_a_bad_target_from_the_env_var_says_where_it_came_from(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HC_CONFORMANCE_TARGET", "bogus")
    code, _, err = run(capsys, "run", "--no-progress")
    assert code == 2 and "TARGET 'bogus'" in err and "$HC_CONFORMANCE_TARGET" in err


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
    assert "result: INTERRUPTED" in out  # stopped, not failed: nothing failed before the signal
    report = Report.read_json(tmp_path / "r.json")
    assert report.interrupted and report.results and report.not_run
    assert report.verdict == "INTERRUPTED" and "— INTERRUPTED." in to_markdown(report)
    assert "not run: the run was interrupted" in (tmp_path / "r.xml").read_text()


def test_an_interrupt_while_the_kit_is_still_importing_writes_the_report(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the first seconds lands in an import (torch, hypothesis): still exit 130,
    one line and the report, no traceback."""
    from hcspec.conformance.run import hypothesis_home

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(hypothesis_home, "private", interrupted)
    try:
        code, _, err = run(capsys, "run", "reference:mhc", "--no-progress",
                             "--json", str(tmp_path / "r.json"))
    except KeyboardInterrupt:  # not re-raised: it would stop this pytest session
        pytest.fail("the interrupt escaped hc-conformance run (a traceback, no report)")
    assert code == 130 and "interrupted (SIGINT) before the target was resolved" in err
    report = Report.read_json(tmp_path / "r.json")
    assert report.interrupted and report.running == "setup: resolving the target"


def test_target_importable_from_the_current_directory(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_local_adapter.py").write_text(
        "from hcspec.conformance.adapters.reference import make_hc_dynamic as make\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "run", "my_local_adapter:make", "--profile", "quick",
                       "--only", "shape.output", "--device", "cpu", "--no-progress")
    assert code == 0 and "my_local_adapter:make" in out and "kind hc-dynamic" in out


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="CUDA is present here")
def test_device_cuda_without_cuda_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "run", "reference:hc-static", "--device", "cuda")
    assert code == 2 and "no CUDA device" in err


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_run_help_lists_every_built_in_target_from_the_registry(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = _help(capsys, "run")
    assert {"reference:hc-static", "reference:hc-dynamic", "reference:mhc",
            "reference:mhc-fast"} <= set(BUILTIN)
    for name in BUILTIN:
        assert name in text, name
    assert "reference:hc-dynamic|hc-static|mhc|mhc-fast" in " ".join(text.split())
    new = BuiltinTarget("reference:newly-added",
                        "hcspec.conformance.adapters.reference:make_mhc", "x")
    monkeypatch.setitem(BUILTIN, new.name, new)
    assert "reference:newly-added" in _help(capsys, "run")


@pytest.mark.parametrize("command", [[], ["run"], ["list"], ["targets"], ["report"]])
def test_help_is_plain_text_with_a_description(capsys: pytest.CaptureFixture[str],
                                               command: list[str]) -> None:
    text = _help(capsys, *command)
    for markup in ("``", "::", "Subcommands"):
        assert markup not in text, markup
    usage, description = text.split("\n\n")[:2]
    assert usage.startswith("usage: hc-conformance")
    assert len(description.split()) >= 10, description  # a sentence, not an option list
    if command in ([], ["run"]):
        assert "exit codes:" in text and "130" in text


def test_report_defaults_to_markdown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    Report(target="reference:mhc", kit_version="0", profile="ci", seed=0,
           device="cpu").write_json(path)
    code, out, err = run(capsys, "report", str(path))
    assert code == 0, err
    assert out.startswith("| target | passed |") and "\n## `reference:mhc`\n" in out
    assert run(capsys, "report", str(path), "--markdown") == (0, out, "")


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    env.pop("HC_CONFORMANCE_TARGET", None)
    return env


def test_header_precedes_status_lines_in_a_combined_log(tmp_path: Path) -> None:
    """Not a terminal, both streams into one log: the status lines (stderr) follow the header
    (stdout) instead of all coming first."""
    done = subprocess.run(
        [sys.executable, "-m", "hcspec.conformance", "run", "reference:hc-static", "--profile",
         "quick", "--device", "cpu", "--only", "shape"],
        cwd=tmp_path, env=_subprocess_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=120, check=False)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout
    header = next(i for i, line in enumerate(lines) if "— target reference:hc-static" in line)
    status = next(i for i, line in enumerate(lines) if line == "shape.output: passed")
    table = next(i for i, line in enumerate(lines) if "shape.output" in line and "│" in line)
    assert header < status < table


@pytest.mark.parametrize("argv", [
    ["list"],
    ["report", "REPORT"],
    ["run", "reference:hc-static", "--profile", "quick", "--device", "cpu", "--only",
     "shape.output"],
])
def test_closed_stdout_ends_quietly(tmp_path: Path, argv: list[str]) -> None:
    """`hc-conformance ... | head`: the reader is gone before anything is written (the pipe
    is closed at once); the command exits 1 with no BrokenPipeError traceback."""
    report = tmp_path / "r.json"
    Report(target="reference:mhc", kit_version="0", profile="ci", seed=0,
           device="cpu").write_json(report)
    argv = [str(report) if a == "REPORT" else a for a in argv]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "hcspec.conformance", *argv], cwd=tmp_path,
                              env=_subprocess_env(), stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert done.returncode == 1, done.stderr
    assert "BrokenPipe" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from hcspec.conformance.outputs.report import kit_version

    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"hc-conformance {kit_version()}"


def test_expected_failures_errors_name_the_option_line_and_closest_id(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "xfail.txt"
    path.write_text("# known\n\nlaw.reported: transposed\nconstraints.h_res_other_axs: 10 "
                    "rounds\n", encoding="utf-8")
    code, _, err = run(capsys, "run", "reference:hc-static", "--expected-failures", str(path))
    assert code == 2
    assert (f"--expected-failures {path}:4: unknown property id "
            "'constraints.h_res_other_axs'; did you mean constraints.h_res_other_axis?") in err
    code, _, err = run(capsys, "run", "reference:hc-static", "--expected-failures",
                       str(tmp_path / "missing.txt"))
    assert code == 2 and f"--expected-failures {tmp_path / 'missing.txt'}: cannot read" in err
    binary = tmp_path / "latin1.txt"
    binary.write_bytes(b"law.reported: \xe9t\xe9\n")
    code, _, err = run(capsys, "run", "reference:hc-static", "--expected-failures", str(binary))
    assert code == 2
    assert f"--expected-failures {binary}: the expected-failures file is not UTF-8" in err


def test_expected_failures_accept_globs(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    from hcspec.conformance.families import BY_ID
    from hcspec.conformance.subjects import expected

    path = tmp_path / "xfail.txt"
    path.write_text("law.report*: transposed mixing (mutant)\n", encoding="utf-8")
    code, out, _ = run(capsys, "run", "tests.mutants.h_res_transposed:make", "--device", "cpu",
                       "--profile", "quick", "--only", "law.reported", "--expected-failures",
                       str(path), "--no-progress")
    assert code == 0 and "xfail" in out
    constraints = sorted(pid for pid in BY_ID if pid.startswith("constraints."))
    assert len(constraints) > 1
    assert expected.parse("constraints.*: r", known=BY_ID) == dict.fromkeys(constraints, "r")
    path.write_text("# known\nconstraints.nothing_*: r\n", encoding="utf-8")
    code, _, err = run(capsys, "run", "reference:hc-static", "--expected-failures", str(path))
    assert code == 2
    assert (f"--expected-failures {path}:2: the glob 'constraints.nothing_*' matches no "
            "property id") in err
    path.write_text(f"constraints.*: r\n{constraints[0]}: s\n", encoding="utf-8")
    code, _, err = run(capsys, "run", "reference:hc-static", "--expected-failures", str(path))
    assert code == 2 and f"{path}:2: {constraints[0]} is listed twice (first on line 1)" in err
    assert expected.expand({"constraints.*": "r"}, BY_ID) == dict.fromkeys(constraints, "r")
    with pytest.raises(ValueError, match=r"the glob 'zz\.\*' matches no property id"):
        expected.expand({"zz.*": "r"}, BY_ID)


def test_targets_names_a_missing_package_once(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hyper_connections", None)  # blocked: does not import
    code, out, _ = run(capsys, "targets")
    assert code == 0
    problems = [line for line in out.splitlines()
                if "'hyper-connections'" in line and "which does not import" in line]
    assert len(problems) == 1, problems  # one line for the package's eleven targets
    assert problems[0].startswith("hyper_connections:hc, hyper_connections:hc-dropout, ")


def test_run_writes_a_markdown_report(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    code, _, _ = run(capsys, "run", "reference:hc-static", "--profile", "quick", "--device",
                     "cpu", "--only", "shape.output", "--markdown", str(tmp_path / "r.md"),
                     "--no-progress")
    text = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert code == 0 and text.startswith("## `reference:hc-static`")
    assert "| `shape.output` | passed |" in text


@pytest.mark.parametrize("target", ["nosuch_xyz:make", "hcspec.nosuch_xyz:make"])
def test_a_target_module_that_does_not_exist_is_one_line_with_a_hint(
        capsys: pytest.CaptureFixture[str], target: str) -> None:
    code, out, err = run(capsys, "run", target, "--no-progress")
    module = target.partition(":")[0]
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [f"error: TARGET {target!r}: there is no module {module!r} (searched the "
                     "current directory and sys.path); give package.module:factory of an "
                     "importable module, path/to/file.py:factory, or a built-in name "
                     "(hc-conformance targets lists "
                     "them)"], err
    assert "Traceback" not in out + err


def test_a_missing_dependency_of_the_target_module_keeps_its_traceback(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "run", "tests.conformance.broken_target:make", "--no-progress")
    assert code == 2 and "No module named 'hcspec_no_such_dependency'" in err
    assert "Traceback" in err  # the user's module failed inside: where, matters


def test_descriptions_from_docstrings_are_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from hcspec.conformance.subjects.targets import plain_text, resolve

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    before = set(sys.modules)
    try:
        described = resolve("examples.conformance_adapter:make").description
    finally:  # a later test imports it as from an installed wheel, where it is absent
        for name in set(sys.modules) - before:
            if name == "examples" or name.startswith("examples."):
                del sys.modules[name]
    assert described == ("FoldedStaticHC behind its adapter (TARGET "
                         "examples.conformance_adapter:make).")
    assert plain_text("make (TARGET ``a.b:make``), see :func:`~x.y` and :class:`Z`") == (
        "make (TARGET a.b:make), see x.y and Z")


def test_a_source_tree_target_outside_the_tree_is_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "examples", None)  # as from an installed wheel
    code, _, err = run(capsys, "run", "examples.conformance_adapter:make", "--no-progress")
    assert code == 2
    assert ("TARGET 'examples.conformance_adapter:make' is part of the hcspec source tree "
            "(examples/ is not installed with the package)") in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_run_leaves_no_hypothesis_directory_in_the_working_directory(tmp_path: Path) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("HC_CONFORMANCE_TARGET", None)
    done = subprocess.run([sys.executable, "-m", "hcspec.conformance", "run", "reference:mhc",
                           "--profile", "quick", "--device", "cpu", "--only",
                           "shape.output,law.probed", "--no-progress"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_partial_factory_is_described_by_its_function_and_bound_arguments() -> None:
    """functools.partial's own docstring ('partial(func, *args, **keywords) - new function
    ...') describes partial, not the target."""
    from hcspec.conformance.subjects.targets import resolve

    target = resolve("tests.conformance.properties.precision_standins:make_bf16_output")
    assert "partial(func" not in target.description
    assert "output=torch.bfloat16" in target.description


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_a_timeout_that_is_not_a_number_of_seconds_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], value: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "--timeout", value])
    assert exit_info.value.code == 2
    assert "expected a number of seconds, 0 or more" in capsys.readouterr().err
