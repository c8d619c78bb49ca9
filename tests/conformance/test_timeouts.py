"""timeouts: work past its limit raises TimedOut and the caller goes on; a property past the
limit is reported `timeout`, naming the running case, and the run continues."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from hcspec.conformance.adapters.reference import make_hc_static
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run import execution
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.run.timeouts import TimedOut, call_with_timeout
from tests.mutants import h_res_transposed


def test_results_and_exceptions_come_back() -> None:
    assert call_with_timeout(lambda: 42, 5, "answer") == 42
    with pytest.raises(KeyError):
        call_with_timeout(lambda: {}["x"], 5, "lookup")


def test_work_past_the_limit_is_abandoned() -> None:
    release = threading.Event()
    start = time.perf_counter()
    with pytest.raises(TimedOut, match=r"sleeper did not finish within 0\.2 s"):
        call_with_timeout(release.wait, 0.2, "sleeper")
    assert time.perf_counter() - start < 5
    release.set()


def test_a_hanging_property_is_reported_timeout_and_the_run_goes_on() -> None:
    release = threading.Event()

    def make(n: int, d: int, **kwargs: Any) -> Any:
        impl = make_hc_static(n, d, **kwargs)
        inner = impl.forward

        def forward(x: Any, branch: Any) -> Any:
            if getattr(impl, "training", True) is False:
                release.wait()
            return inner(x, branch)

        impl.forward = forward
        return impl

    try:
        report = check_implementation(make, profile="quick", device="cpu", timeout=8,
                                      only=["state.deterministic_eval", "state.input_unchanged"])
    finally:
        release.set()
    got = {r.id: r for r in report.results}
    hung = got["state.deterministic_eval"]
    assert hung.status == rp.TIMEOUT and not report.ok
    assert hung.message.startswith("state.deterministic_eval did not finish within 8 s")
    assert hung.failure is not None and hung.failure.counterexample is not None
    assert hung.failure.counterexample in hung.message
    assert got["state.input_unchanged"].status == rp.PASSED


@pytest.mark.slow
def test_a_target_that_hangs_while_its_failure_is_diagnosed_does_not_hang_the_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """law.reported fails on a transposed H_res; the known-bug-class diagnosis then builds
    and runs the target again, and from then on its forward hangs: the diagnosis is bounded
    by what is left of the property's limit, the failure is reported without the hint."""
    release = threading.Event()
    property_ran = threading.Event()
    real_run_property = execution.run_property

    def run_property(prop: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return real_run_property(prop, *args, **kwargs)
        finally:
            if prop.id == "law.reported":
                property_ran.set()

    def make(n: int, d: int, **kwargs: Any) -> Any:
        impl = h_res_transposed.make(n, d, **kwargs)
        inner = impl.forward

        def forward(x: Any, branch: Any) -> Any:
            if property_ran.is_set():
                release.wait()
            return inner(x, branch)

        impl.forward = forward
        return impl

    monkeypatch.setattr(execution, "run_property", run_property)
    start = time.perf_counter()
    try:
        report = check_implementation(make, profile="quick", device="cpu", timeout=15,
                                      only=["law.reported"])
    finally:
        release.set()
    assert time.perf_counter() - start < 60
    (result,) = [r for r in report.results if r.id == "law.reported"]
    assert result.status == rp.FAILED, result.message
    assert result.failure is not None and "transposed" not in (result.failure.hint or "")


def test_the_worker_thread_is_reused_until_work_overruns() -> None:
    first = call_with_timeout(threading.get_ident, 5, "first")
    assert call_with_timeout(threading.get_ident, 5, "second") == first
    release = threading.Event()
    with pytest.raises(TimedOut):
        call_with_timeout(release.wait, 0.2, "sleeper")
    try:
        after = call_with_timeout(threading.get_ident, 5, "after")
        assert after != first  # the abandoned worker is still waiting: a fresh one ran this
    finally:
        release.set()


def test_a_call_from_inside_a_job_gets_its_own_worker() -> None:
    outer, inner = call_with_timeout(
        lambda: (threading.get_ident(), call_with_timeout(threading.get_ident, 5, "inner")),
        5, "outer")
    assert outer != inner


def test_grad_mode_left_off_by_a_forward_does_not_leak_into_later_properties() -> None:
    """The worker thread is reused, and grad mode is per thread: a forward that switches it
    off (once, the first time it runs with grad on) would make every later gradient property
    fail; the kit puts it back and reports the change instead."""
    calls = {"n": 0}

    def make(n: int, d: int, **kwargs: Any) -> Any:
        impl = make_hc_static(n, d, **kwargs)
        inner = impl.forward

        def forward(x: Any, branch: Any) -> Any:
            out = inner(x, branch)
            if torch.is_grad_enabled():
                calls["n"] += 1
                if calls["n"] == 1:
                    torch.set_grad_enabled(False)
            return out

        impl.forward = forward
        return impl

    report = check_implementation(make, profile="quick", device="cpu",
                                  only=["shape.output", "gradients.fd_input",
                                        "gradients.closed_form"])
    got = {r.id: r for r in report.results}
    assert got["gradients.fd_input"].status == rp.PASSED, got["gradients.fd_input"].message
    assert got["gradients.closed_form"].status == rp.PASSED
    changes = [c for r in report.results for c in r.global_state_changes]
    changes += report.global_state_changes
    assert changes == ["grad mode (worker thread) True -> False"]
    assert torch.is_grad_enabled()


@pytest.mark.slow
def test_a_forward_busy_in_torch_past_its_limit_does_not_abort_the_exit(tmp_path: Path) -> None:
    """The abandoned worker is still inside torch's C++ code when the run ends; letting the
    interpreter finalise under it aborted the process (``terminate called without an active
    exception``, exit 134) after the report was written. The console script ends at once."""
    (tmp_path / "busy_target.py").write_text(textwrap.dedent("""
        import torch
        from hcspec.conformance.adapters.reference import make_hc_static

        def make(n, d, **kwargs):
            impl = make_hc_static(n, d, **kwargs)
            inner, big = impl.forward, torch.randn(256, 256)

            def forward(x, branch):
                while getattr(impl, "training", True) is False:
                    big @ big
                return inner(x, branch)

            impl.forward = forward
            return impl
    """))
    done = subprocess.run(
        [sys.executable, "-m", "hcspec.conformance", "run", "busy_target:make", "--profile",
         "quick", "--device", "cpu", "--timeout", "2", "--only", "state.deterministic_eval",
         "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert "did not finish within 2 s" in done.stdout
    assert "terminate called" not in done.stderr
