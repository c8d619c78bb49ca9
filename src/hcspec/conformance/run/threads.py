"""Thread control for code the kit does not own: the intra-op thread count the kit runs a
target with (:data:`KIT_THREADS`, :func:`intra_op_threads`) and the worker thread with a time
limit every inspection and property runs in (:func:`in_worker`)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Final, TypeVar

import torch

from hcspec.conformance.run import isolation
from hcspec.conformance.run.timeouts import call_with_timeout

T = TypeVar("T")


KIT_THREADS: Final = 1
"""torch's intra-op threads while the kit runs a target's code (:func:`intra_op_threads`).
The cases are small (a few hundred elements): an OpenMP parallel region there costs more than
it saves, and on a loaded machine (CI runners, pytest-xdist, several runs at once) every
region waits for threads that the kernel has not scheduled — a run took ten times its CPU time
in wall time with two threads per process on two busy cores (docs/benchmarks.md, "Time to
verdict")."""


@functools.cache
def _threads_settable() -> bool:
    """Whether torch's intra-op thread count can be changed at any time: the OpenMP backend.
    (The native backend fixes its pool at the first parallel region and warns on a later
    change.)"""
    return "parallel backend: OpenMP" in torch.__config__.parallel_info()


@contextlib.contextmanager
def intra_op_threads(threads: int, restore: int, changed: list[str]) -> Iterator[None]:
    """Run a block in the calling thread with ``torch.set_num_threads(threads)``, then
    ``torch.set_num_threads(restore)`` (the caller's own setting: torch also keeps the count
    process-wide, for MKL and for threads that start later, so it is put back after each
    block). A block that changes the count itself (a target calling ``torch.set_num_threads``)
    is named in ``changed``, e.g. ``torch.get_num_threads() (worker thread) 1 -> 4``; its
    change is undone too. Nothing is changed where the count cannot be changed at any time
    (:func:`_threads_settable`). Restores also when the block raises.

    Raises:
        RuntimeError: ``threads`` or ``restore`` below 1 (from torch).
    """
    if not _threads_settable():
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        now = torch.get_num_threads()
        if now != threads:
            changed.append(f"torch.get_num_threads() (worker thread) {threads} -> {now}")
        torch.set_num_threads(restore)


def in_worker(fn: Callable[[], T], seconds: float | None, what: str,
              changed: list[str]) -> T:
    """:func:`hcspec.conformance.run.timeouts.call_with_timeout` for code the kit does not own,
    with :data:`KIT_THREADS` intra-op threads (:func:`intra_op_threads`; the calling thread's
    count is put back after it): the worker thread's own state (grad mode, thread count) is
    put back afterwards and what changed is appended to ``changed``. Raises as
    ``call_with_timeout``."""
    restore = torch.get_num_threads()  # the caller's: the worker's may be the kit's own

    def guarded() -> T:
        thread_changed: list[str] = []
        try:
            with isolation.thread_watch() as thread_changed, \
                    intra_op_threads(KIT_THREADS, restore, thread_changed):
                return fn()
        finally:
            changed.extend(thread_changed)

    return call_with_timeout(guarded, seconds, what)
