"""Per-property wall-clock limits: run a piece of the kit in a worker thread and stop
waiting for it after a time limit.

A forward that hangs must not hang the run. :func:`call_with_timeout` runs the work in a
daemon worker thread and waits for it at most ``seconds``; past that it raises :class:`TimedOut`
and the caller moves on, abandoning the thread. A thread, not a process, because the
implementation under test is live Python state (a factory that may be a closure, modules,
CUDA tensors): a worker process would have to re-import the target and, on CUDA, start its
own CUDA context (CUDA cannot be used in a forked child), which costs seconds per property
and breaks factories that cannot be pickled. A thread shares the CUDA context. Its limits,
documented in docs/conformance.md: an abandoned thread keeps running until its call returns
or the process exits (it is a daemon thread), and a hang that holds the GIL in native code
cannot be waited out by any thread (the process-level guard then is the CI job's timeout,
whose SIGTERM still writes the report, :mod:`hcspec.conformance.cli`).

The worker thread is kept and reused for the next call as long as its work finished in time
(one worker per caller at a time; a call made while it is busy, e.g. from inside a job, gets a
fresh one). Starting a thread per call would cost far more than the thread: hypothesis keeps
a per-thread random generator and registers it in each new thread with a full garbage
collection, about 0.1 s per call once torch is imported. State that is per thread (torch's
grad mode, for one) therefore carries over from one job to the next; callers that run code
they do not own reset it themselves (:func:`hcspec.conformance.run.isolation.thread_watch`).

The main thread waits on an event, so SIGINT and SIGTERM are handled at once even while the
worker hangs.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Final, TypeVar

from hcspec.conformance.profiles import PROFILES, get_profile
from hcspec.conformance.run import stacks

T = TypeVar("T")


class _Timeouts(Mapping[str, float]):
    """Profile name -> its ``timeout``, read from :data:`hcspec.conformance.profiles.PROFILES`
    when used (so a profile registered later is included)."""

    def __getitem__(self, name: str) -> float:
        return PROFILES[name].timeout

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(PROFILES))

    def __len__(self) -> int:
        return len(PROFILES)


DEFAULT_TIMEOUTS: Final[Mapping[str, float]] = _Timeouts()
"""Seconds per property by profile: each profile's own ``timeout`` field (a live view)."""


def default_timeout(profile: str) -> float:
    """The per-property limit of the profile called ``profile`` (its ``timeout`` field).

    Raises:
        ValueError: unknown profile.
    """
    return get_profile(profile).timeout


class TimedOut(Exception):
    """The work ran past its limit; ``seconds`` is the limit, ``what`` names the work,
    ``stack`` the abandoned thread's Python stack when the limit passed
    (:func:`hcspec.conformance.run.stacks.thread_stack`; None when it could not be read)."""

    def __init__(self, what: str, seconds: float, stack: stacks.Stack | None = None) -> None:
        super().__init__(f"{what} did not finish within {seconds:g} s")
        self.what = what
        self.seconds = seconds
        self.stack = stack


class Terminated(KeyboardInterrupt):
    """SIGTERM turned into an exception (by the CLI and the pytest plugin), handled like
    Ctrl-C: the run stops and the partial report is returned with ``interrupted_by``
    ``SIGTERM``. Defined here, torch-free, so a handler can be installed before torch is
    imported (also available as ``hcspec.conformance.run.session.Terminated``)."""


def interrupt_name(exc: BaseException) -> str:
    """``SIGTERM`` for :class:`Terminated`, else ``SIGINT``."""
    return "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"


class _Worker:
    """A daemon thread that runs the jobs put on its queue one after another, until it gets
    None."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="hc-conformance worker",
                                       daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while (job := self.jobs.get()) is not None:
            job()


_idle_worker: _Worker | None = None
_idle_lock = threading.Lock()
_running: set[int] = set()  # thread idents of the workers inside a job (atomic under the GIL)


def running_jobs() -> int:
    """How many workers are inside a job now: after a run, those abandoned by a timeout or an
    interrupt, still running code the caller stopped waiting for."""
    return len(_running)


def _take_worker() -> _Worker:
    """The idle worker (now owned by the caller), or a new one when none is idle."""
    global _idle_worker
    with _idle_lock:
        worker, _idle_worker = _idle_worker, None
    return worker if worker is not None else _Worker()


def _give_back(worker: _Worker) -> None:
    """Make ``worker`` the idle one again, or end it when another became idle meanwhile."""
    global _idle_worker
    with _idle_lock:
        if _idle_worker is None:
            _idle_worker = worker
            return
    worker.jobs.put(None)


def call_with_timeout(fn: Callable[[], T], seconds: float | None, what: str) -> T:
    """``fn()`` in a daemon worker thread, waited for at most ``seconds`` (None or <= 0: no
    limit, still in the worker so that signals reach the main thread promptly). The worker is
    reused by the next call when ``fn`` finished in time (see the module docstring).

    Returns:
        what ``fn`` returned.

    Raises:
        TimedOut: the limit passed (the worker is abandoned, still running ``fn``); it
            carries the worker's Python stack at that moment.
        BaseException: whatever ``fn`` raised, re-raised in the caller's thread.
    """
    done = threading.Event()
    box: dict[str, object] = {}

    def job() -> None:
        thread = threading.current_thread()
        thread.name = f"hc-conformance: {what}"
        _running.add(threading.get_ident())
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            _running.discard(threading.get_ident())
            thread.name = "hc-conformance worker"
            done.set()

    worker = _take_worker()
    worker.jobs.put(job)
    limit = seconds if seconds is not None and seconds > 0 else None
    if limit is None:
        while not done.wait(1.0):  # short waits: a signal interrupts the main thread here
            pass
    elif not done.wait(limit):  # where it is stuck, read while it still is
        raise TimedOut(what, limit, stacks.thread_stack(worker.thread.ident))
    _give_back(worker)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
