"""A subprocess for the kit's own tests that is sent a signal once a cue shows on its stderr,
under a watchdog: the CLI's signal cases (tests/conformance/bad_inputs.py) and the pytest
plugin's (tests/conformance/test_pytest_plugin_safety.py) run their command through it."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

WATCHDOG_S = 240  # a run that does not end by then is killed (and so fails its test)
COMMUNICATE_S = 300


def _default_signal_handling() -> None:
    """In the child before it starts: SIGINT and SIGTERM back to their default disposition. A
    shell that starts a job in the background without job control (``nohup … &`` in a script)
    sets SIGINT to ignored, and an ignored signal stays ignored across exec: the child would
    never see the Ctrl-C the test sends, and the watchdog would kill it (exit −9)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_signalled(cmd: Sequence[str], *, cwd: str, env: Mapping[str, str],
                  send: tuple[int, str] | None) -> tuple[int, str, str]:
    """Run ``cmd`` in ``cwd`` with ``env``; with ``send = (sig, cue)``, send ``sig`` half a
    second after the first stderr line containing ``cue`` (so the next step has started and
    hangs). Returns the exit code, stdout and stderr (the lines read before the signal
    included). The process is killed after :data:`WATCHDOG_S` seconds;
    :class:`subprocess.TimeoutExpired` if it has not ended :data:`COMMUNICATE_S` seconds after
    the signal."""
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signal_handling)
    err_lines: list[str] = []
    watchdog = threading.Timer(WATCHDOG_S, proc.kill)
    watchdog.start()
    try:
        if send is not None:
            sig, cue = send
            assert proc.stderr is not None
            for line in proc.stderr:
                err_lines.append(line)
                if cue in line:
                    time.sleep(0.5)
                    proc.send_signal(sig)
                    break
        out, rest = proc.communicate(timeout=COMMUNICATE_S)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, "".join(err_lines) + rest
