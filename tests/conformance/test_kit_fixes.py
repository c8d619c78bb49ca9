"""Rough edges a new user hit: the current folder importable for the whole
run, the target's traceback in every report, file paths as targets and "did you mean" for
module names, typos in declarations as usage errors, one test-id scheme for both routes."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

from hcspec.conformance import cli
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.subjects.targets import TargetError, resolve

ROOT = Path(__file__).resolve().parents[2]

LAZY_ADAPTER = '''\
def make(n, d, **kwargs):
    import lazy_helper  # a module of the user's project, imported only when building
    return lazy_helper.build(n, d, **kwargs)
'''
LAZY_HELPER = '''\
from hcspec.conformance.subjects.targets import resolve

def build(n, d, **kwargs):
    return resolve("reference:mhc").factory(n, d, **kwargs)
'''
RAISING_ADAPTER = '''\
def make(n, d, **kwargs):
    return build_the_layer(n, d)

def build_the_layer(n, d):
    raise RuntimeError("the user's factory is broken here")
'''
TYPO_ADAPTER = '''\
from hcspec.conformance.subjects.targets import resolve

def make(n, d, **kwargs):
    impl = resolve("reference:mhc").factory(n, d, **kwargs)
    impl.conventions = {"sinkhorn_iters": 20}
    return impl

def make_kind(n, d, **kwargs):
    impl = resolve("reference:mhc").factory(n, d, **kwargs)
    impl.kind = "mHC"
    return impl
'''


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    env.pop("HC_CONFORMANCE_TARGET", None)
    return env


def test_the_current_folder_stays_importable_for_the_whole_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A factory importing its project's module inside ``make`` passes (it failed with "No
    module named 'lazy_helper'" when the folder was importable only while the TARGET
    imported), and ``sys.path`` is as it was after the run."""
    _project(tmp_path, {"lazy_adapter.py": LAZY_ADAPTER, "lazy_helper.py": LAZY_HELPER})
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    try:
        report = check_implementation("lazy_adapter:make", profile="quick", device="cpu",
                                      only=["shape.output"])
    finally:
        for name in ("lazy_adapter", "lazy_helper"):
            sys.modules.pop(name, None)
    assert sys.path == before
    assert [(r.id, r.status) for r in report.results] == [("shape.output", "passed")], \
        report.results[0].message


@pytest.mark.slow
def test_the_console_script_imports_lazily_as_python_m_does(tmp_path: Path) -> None:
    """The ``hc-conformance`` script's ``sys.path[0]`` is its own folder, not the current one
    (a launcher script elsewhere stands in for it): the lazy import works there too."""
    project = tmp_path / "project"
    project.mkdir()
    _project(project, {"lazy_adapter.py": LAZY_ADAPTER, "lazy_helper.py": LAZY_HELPER})
    scripts = tmp_path / "bin"
    scripts.mkdir()
    (scripts / "hc-conformance").write_text(
        "import sys\nfrom hcspec.conformance.cli import console_main\n"
        "sys.exit(console_main())\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(scripts / "hc-conformance"), "run", "lazy_adapter:make",
         "--only", "shape.output", "--profile", "quick", "--device", "cpu", "--no-progress"],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "result: OK" in done.stdout


def test_a_raising_factory_has_its_traceback_in_every_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _project(tmp_path, {"raising_adapter.py": RAISING_ADAPTER})
    monkeypatch.chdir(tmp_path)
    paths = {kind: tmp_path / f"r.{kind}" for kind in ("json", "xml", "html")}
    try:
        code, quiet, _ = _main(capsys, "run", "raising_adapter:make", "--only", "shape.output",
                               "--profile", "quick", "--device", "cpu", "--no-progress")
        code_v, verbose, _ = _main(
            capsys, "run", "raising_adapter:make", "--only", "shape.output", "--profile",
            "quick", "--device", "cpu", "--no-progress", "-v", "--json", str(paths["json"]),
            "--junit", str(paths["xml"]), "--html", str(paths["html"]))
    finally:
        sys.modules.pop("raising_adapter", None)
    assert code == code_v == 1
    where = 'raising_adapter.py", line 5, in build_the_layer'
    failure = json.loads(paths["json"].read_text())["results"][0]["failure"]
    assert failure["kind"] == "failed" and failure["traceback"] is not None
    assert where in failure["traceback"]
    assert failure["traceback"].rstrip().endswith(
        "RuntimeError: the user's factory is broken here")
    assert where in verbose and where not in quiet  # the terminal shows it under -v
    case = next(iter(next(iter(JUnitXml.fromfile(str(paths["xml"]))))))
    assert where in case.result[0].text
    assert where.replace('"', "&#34;") in paths["html"].read_text() or \
        where.replace('"', "&quot;") in paths["html"].read_text()


def test_a_comparison_failure_has_no_traceback() -> None:
    report = check_implementation("tests.mutants.h_post_sigma:make", profile="quick",
                                  device="cpu", only=["constraints.h_post_span"])
    failed = [r for r in report.results if r.status == "failed"]
    assert failed and all(r.failure is not None and r.failure.traceback is None
                          for r in failed)


def test_a_file_path_is_a_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(tmp_path, {"hc_adapter.py": LAZY_ADAPTER, "lazy_helper.py": LAZY_HELPER})
    monkeypatch.chdir(ROOT)  # elsewhere: the file's own folder makes its imports work
    target = f"{tmp_path / 'hc_adapter.py'}:make"
    try:
        assert resolve(target).factory.__module__ == "hc_adapter"
        assert sys.modules["hc_adapter"].__file__ == str(tmp_path / "hc_adapter.py")
        monkeypatch.chdir(tmp_path)
        report = check_implementation("./hc_adapter.py:make", profile="quick", device="cpu",
                                      only=["shape.output"])
    finally:
        for name in ("hc_adapter", "lazy_helper"):
            sys.modules.pop(name, None)
    assert report.results[0].status == "passed", report.results[0].message
    with pytest.raises(TargetError, match=r"there is no file"):
        resolve(f"{tmp_path / 'absent.py'}:make")
    with pytest.raises(TargetError, match=r"has no attribute 'mak' \(did you mean 'make'\?\)"):
        resolve(f"{tmp_path / 'hc_adapter.py'}:mak")
    sys.modules.pop("hc_adapter", None)


@pytest.mark.parametrize("given", ["hc_adapter.py", "hc_adapter"])
def test_a_module_without_its_factory_gets_a_did_you_mean(
        given: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _project(tmp_path, {"hc_adapter.py": "def helper():\n    pass\n\ndef make():\n    pass\n"})
    monkeypatch.chdir(tmp_path)
    code, _, err = _main(capsys, "run", given, "--device", "cpu", "--no-progress")
    assert code == 2
    assert "did you mean 'hc_adapter:make'" in " ".join(err.split())
    assert "reference:hc-static" not in err  # not the list of every built-in name


def test_an_unknown_builtin_name_gets_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(capsys, "run", "reference:mch", "--device", "cpu", "--no-progress")
    assert code == 2 and "did you mean 'reference:mhc'" in err
    code, _, err = _main(capsys, "run", "mhc", "--device", "cpu", "--no-progress")
    assert code == 2 and "did you mean 'reference:mhc'" in err


@pytest.mark.parametrize(("factory", "expected"), [
    ("make", "did you mean 'sinkhorn_iterations' for 'sinkhorn_iters'?"),
    ("make_kind", "got 'mHC' (did you mean 'mhc'?)"),
])
def test_typos_in_declarations_are_usage_errors(
        factory: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _project(tmp_path, {"typo_adapter.py": TYPO_ADAPTER})
    monkeypatch.chdir(tmp_path)
    try:
        code, _, err = _main(capsys, "run", f"typo_adapter:{factory}", "--only", "shape",
                             "--profile", "quick", "--device", "cpu", "--no-progress",
                             "--json", str(tmp_path / "r.json"))
    finally:
        sys.modules.pop("typo_adapter", None)
    assert code == 2, err
    assert expected in " ".join(err.split())
    written = json.loads((tmp_path / "r.json").read_text())
    assert written["results"] == [] and expected in written["setup_error"]


@pytest.mark.slow
def test_junit_test_ids_are_the_pytest_node_ids(tmp_path: Path) -> None:
    """The CLI's JUnit names each case ``hcspec.conformance`` :: id, and pytest's node id of
    the same property is ``hcspec.conformance::<id>``: one scheme."""
    path = tmp_path / "r.xml"
    assert cli.main(["run", "reference:hc-static", "--only", "shape.output", "--profile",
                     "quick", "--device", "cpu", "--no-progress", "--junit", str(path)]) == 0
    case = next(iter(next(iter(JUnitXml.fromfile(str(path))))))
    assert f"{case.classname}::{case.name}" == "hcspec.conformance::shape.output"
    plugin = ([] if any(ep.name == "hcspec" for ep in
                        importlib.metadata.entry_points(group="pytest11"))
              else ["-p", "hcspec.conformance.pytest_plugin"])
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *plugin,
         "--hc-target", "reference:hc-static",
         "--hc-device", "cpu"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert "hcspec.conformance::shape.output" in collected.stdout.splitlines(), \
        collected.stdout[-2000:] + collected.stderr[-2000:]


@pytest.mark.slow
def test_a_declaration_typo_is_a_usage_error_under_pytest_too(tmp_path: Path) -> None:
    _project(tmp_path, {"typo_adapter.py": TYPO_ADAPTER})
    plugin = ([] if any(ep.name == "hcspec" for ep in
                        importlib.metadata.entry_points(group="pytest11"))
              else ["-p", "hcspec.conformance.pytest_plugin"])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin,
         "--hc-target", "typo_adapter:make_kind", "--hc-profile", "quick", "--hc-device",
         "cpu"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300,
        check=False)
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    assert "got 'mHC' (did you mean 'mhc'?)" in done.stdout + done.stderr
