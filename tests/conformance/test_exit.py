"""The console script ends without the interpreter's finalisation, and still runs the exit
handlers, waits for a non-daemon thread and exits with the run's code."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

TARGET = textwrap.dedent("""
    import atexit, pathlib, threading, time
    from hcspec.conformance.adapters.reference import make_hc_static

    def _late() -> None:  # still running when the CLI has written its report
        deadline = time.monotonic() + 120
        while not pathlib.Path("report.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        pathlib.Path("thread_done").write_text("yes")

    def make(n, d, **kwargs):
        if not pathlib.Path("registered").exists():
            pathlib.Path("registered").write_text("yes")
            atexit.register(lambda: pathlib.Path("atexit_ran").write_text("yes"))
            if {thread}:
                threading.Thread(target=_late, daemon=False).start()
        return make_hc_static(n, d, **kwargs)
""")


def _run(tmp_path: Path, thread: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "exit_target.py").write_text(TARGET.format(thread=thread))
    return subprocess.run(
        [sys.executable, "-m", "hcspec.conformance", "run", "exit_target:make", "--profile",
         "quick", "--device", "cpu", "--only", "shape.output", "--no-progress", "--json",
         "report.json"], cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_the_exit_handlers_run_and_the_output_and_code_are_complete(tmp_path: Path) -> None:
    done = _run(tmp_path, thread=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "shape.output" in done.stdout and done.stdout.endswith("\n")
    assert json.loads((tmp_path / "report.json").read_text())["ok"] is True
    assert (tmp_path / "atexit_ran").read_text() == "yes"


def test_a_non_daemon_thread_the_target_started_is_waited_for(tmp_path: Path) -> None:
    done = _run(tmp_path, thread=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "thread_done").read_text() == "yes"
    assert (tmp_path / "atexit_ran").read_text() == "yes"
