"""Native-fault isolation (:mod:`hcspec.conformance.native`): a native target that aborts,
segfaults or hangs yields a failed property with the signal and the native stderr, and the
run's report is written; a declared size limit skips those cases instead."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hcspec.conformance.native.fault import NativeFault
from hcspec.conformance.native.framework import NativeFramework
from hcspec.conformance.native.worker import NativeWorker, WorkerDied
from hcspec.conformance.run.session import check_implementation
from tests.conformance import native_standin

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return native_standin.compile_library(tmp_path_factory.mktemp("standin"))


def test_abort_becomes_a_failed_property_and_the_cli_writes_the_report(
        standin: Path, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    env = {**os.environ, native_standin.LIB_ENV: str(standin)}
    env["PYTHONPATH"] = os.pathsep.join(["src", ".", env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "hcspec.conformance", "run",
         "tests.conformance.native_standin:make_aborting", "--profile", "quick",
         "--only", "shape.output,state.input_unchanged", "--json", str(report)],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    results = {r["id"]: r for r in json.loads(report.read_text())["results"]}
    shape = results["shape.output"]
    assert shape["status"] == "failed"
    text = json.dumps(shape)
    assert "SIGABRT" in text and "GGML_ASSERT(hc == 4) failed" in text
    # the report names the native function that aborted (the kit's crash handler)
    assert "killed by SIGABRT in standin_check (libstandin.so)" in text
    assert results["state.input_unchanged"]["status"] in ("failed", "blocked")


def test_a_declared_limit_skips_the_cases_without_a_fault(
        standin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native_standin.LIB_ENV, str(standin))
    report = check_implementation(native_standin.make_declared, profile="quick",
                                  only=["shape.output"])
    (result,) = [r for r in report.results if r.id == "shape.output"]
    assert result.status == "passed", result
    assert result.examples > 0


def test_a_new_worker_serves_the_call_after_an_abort(standin: Path) -> None:
    worker = NativeWorker(timeout=60)
    try:
        import numpy as np

        x = np.zeros((1, 1, 3, 2))
        with pytest.raises(WorkerDied) as died:
            worker.call(functools.partial(native_standin.read, str(standin)), ({}, x))
        assert died.value.signal == "SIGABRT"
        assert "GGML_ASSERT(hc == 4) failed" in died.value.stderr
        (x_in,) = worker.call(functools.partial(native_standin.read, str(standin)),
                              ({}, np.ones((1, 1, 4, 2))))
        assert x_in.tolist() == [[[1.0, 1.0]]]
        assert worker.starts == 2
    finally:
        worker.close()


def test_a_segfault_and_a_hang_are_native_faults() -> None:
    framework = NativeFramework("standin", NativeWorker(timeout=3), "none")
    try:
        with pytest.raises(NativeFault) as fault:
            framework.call(native_standin.crash, ["segfault"])
        assert fault.value.signal == "SIGSEGV"
        with pytest.raises(NativeFault) as hung:
            framework.call(native_standin.crash, ["hang"])
        assert hung.value.signal == "timeout"
        assert "did not answer within 3 s" in str(hung.value)
    finally:
        framework.worker.close()


def test_a_python_exception_in_the_worker_is_re_raised_as_is() -> None:
    worker = NativeWorker(timeout=30)
    try:
        with pytest.raises(ValueError, match="invalid literal"):
            worker.call(int, ["not a number"])
        assert worker.call(int, ["42"]) == 42
        assert worker.starts == 1
    finally:
        worker.close()


def test_without_a_build_the_target_names_the_build_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hcspec.conformance.native import build
    from hcspec.conformance.subjects.targets import BUILTIN, package_problem

    monkeypatch.delenv(build.LIB_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    problem = package_problem(BUILTIN["llama_cpp:deepseek-v4"])
    assert problem is not None and build.BUILD_COMMAND in problem
    monkeypatch.setenv(build.LIB_ENV, str(tmp_path))
    assert "no libggml-base, libggml-cpu there" in str(build.unavailable())
    (tmp_path / "libggml-base.so").touch()
    (tmp_path / "libggml-cpu.so").touch()
    assert build.unavailable() is None


def test_gradient_properties_are_not_applicable_with_the_declared_reason(
        standin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native_standin.LIB_ENV, str(standin))
    report = check_implementation(native_standin.make_declared, profile="quick",
                                  only=["gradients.fd_input", "dtype.float32_gradients"])
    for prop in ("gradients.fd_input", "dtype.float32_gradients"):
        (result,) = [r for r in report.results if r.id == prop]
        assert result.status == "not_applicable", result
        assert result.note == ("the impl declares that it has no backward: the stand-in has "
                                 "no backward")


@pytest.mark.parametrize(("kind", "function", "signal"), [
    ("abort", "standin_check", "SIGABRT"), ("segfault", "standin_segfault", "SIGSEGV")])
def test_a_crash_names_the_native_function_and_the_python_line(
        standin: Path, kind: str, function: str, signal: str) -> None:
    framework = NativeFramework("standin", NativeWorker(timeout=60), "none")
    try:
        with pytest.raises(NativeFault) as fault:
            framework.call(native_standin.native_crash, [str(standin), kind])
        assert fault.value.signal == signal
        native = fault.value.native
        assert native is not None and native.unavailable is None, native
        assert native.where == f"{function} (libstandin.so)", native
        assert f"in {function} (libstandin.so)" in str(fault.value)
        assert fault.value.detail.startswith("native frames (innermost first): ")
        # faulthandler, chained after the native handler: the Python line that called it
        assert "native_standin.py" in fault.value.stderr
    finally:
        framework.worker.close()


@pytest.mark.skipif(shutil.which("gdb") is None, reason="needs gdb")
def test_a_hang_in_c_names_the_stuck_native_function(standin: Path) -> None:
    framework = NativeFramework("standin", NativeWorker(timeout=3), "none")
    try:
        with pytest.raises(NativeFault) as hung:
            framework.call(native_standin.native_crash, [str(standin), "hang"])
        native = hung.value.native
        assert hung.value.signal == "timeout"
        assert native is not None and native.unavailable is None, native
        assert native.where == "standin_spin (libstandin.so)", native
        assert "native frames (innermost first): standin_spin (libstandin.so)" in str(
            hung.value)
        # SIGUSR1 before the kill: faulthandler's Python stack of the stuck call
        assert "native_crash" in hung.value.stderr
    finally:
        framework.worker.close()


def test_without_gdb_or_a_compiler_the_report_says_why(
        standin: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from hcspec.conformance.native import frames, worker

    monkeypatch.setenv("PATH", str(tmp_path))  # no gdb, no cc
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no cached handler
    monkeypatch.delenv("CC", raising=False)
    assert frames.gdb_stacks(os.getpid()).describe().startswith(
        "native frames unavailable: gdb is not on PATH")
    monkeypatch.setattr(worker, "_HANDLER", [])
    framework = NativeFramework("standin", NativeWorker(timeout=60), "none")
    try:
        with pytest.raises(NativeFault) as fault:
            framework.call(native_standin.native_crash, [str(standin), "segfault"])
        native = fault.value.native
        assert native is not None and native.frames == ()
        assert native.describe() == ("native frames unavailable: no C compiler on PATH to "
                                     "build the crash handler ($CC, cc, gcc, clang)")
    finally:
        framework.worker.close()
