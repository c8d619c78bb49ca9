"""Per-property wall-clock limits: run a piece of the kit in a worker thread and stop
waiting for it after a time limit.

A forward that hangs must not hang the run. :func:`call_with_timeout` runs the work in a
daemon thread and waits for it at most ``seconds``; past that it raises :class:`TimedOut`
and the caller moves on, abandoning the thread. A thread, not a process, because the
implementation under test is live Python state (a factory that may be a closure, modules,
CUDA tensors): a worker process would have to re-import the target and, on CUDA, start its
own CUDA context (CUDA cannot be used in a forked child), which costs seconds per property
and breaks factories that cannot be pickled. A thread shares the CUDA context and costs
nothing. Its limits, documented in docs/conformance.md: an abandoned thread keeps running
until its call returns or the process exits (it is a daemon thread), and a hang that holds
the GIL in native code cannot be waited out by any thread (the process-level guard then is
the CI job's timeout, whose SIGTERM still writes the report, :mod:`hcspec.conformance.cli`).

The main thread waits on an event, so SIGINT and SIGTERM are handled at once even while the
worker hangs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final, TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUTS: Final[dict[str, float]] = {"quick": 300.0, "ci": 600.0, "thorough": 1800.0}
"""Seconds per property by profile, about ten times the slowest property of the reference
targets measured on a loaded 2-core machine, so that only a hang reaches them."""


def default_timeout(profile: str) -> float:
    """The per-property limit of ``profile`` (:data:`DEFAULT_TIMEOUTS`; 600 s for a profile
    not listed)."""
    return DEFAULT_TIMEOUTS.get(profile, 600.0)


class TimedOut(Exception):
    """The work ran past its limit; ``seconds`` is the limit, ``what`` names the work."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what} did not finish within {seconds:g} s")
        self.what = what
        self.seconds = seconds


def call_with_timeout(fn: Callable[[], T], seconds: float | None, what: str) -> T:
    """``fn()`` in a daemon worker thread, waited for at most ``seconds`` (None or <= 0: no
    limit, still in the worker so that signals reach the main thread promptly).

    Returns:
        what ``fn`` returned.

    Raises:
        TimedOut: the limit passed (the thread is abandoned, still running).
        BaseException: whatever ``fn`` raised, re-raised in the caller's thread.
    """
    done = threading.Event()
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=work, name=f"hc-conformance: {what}", daemon=True)
    worker.start()
    limit = seconds if seconds is not None and seconds > 0 else None
    if limit is None:
        while not done.wait(1.0):  # short waits: a signal interrupts the main thread here
            pass
    elif not done.wait(limit):
        raise TimedOut(what, limit)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
