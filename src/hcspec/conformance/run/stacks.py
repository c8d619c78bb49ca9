"""Where stuck or crashing code is: the Python stack of another thread, and a fault handler
that writes every thread's stack to a file when the process dies of a fatal signal.

Small and free of torch, so any part of the kit can use it: the runner names the stuck line
of a property past its time limit (:func:`thread_stack`, from :func:`sys._current_frames`,
read while the thread is still stuck), and a worker process that runs native code can leave
its stacks behind on SIGSEGV, SIGFPE, SIGABRT, SIGBUS or SIGILL (:func:`dump_on_fault`,
:mod:`faulthandler`). Python 3.11's faulthandler names Python frames only; the native worker
names native frames with its own crash handler and gdb (:mod:`hcspec.conformance.native.frames`),
where the platform gives them.
"""

from __future__ import annotations

import faulthandler
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

KIT_PREFIXES: Final = ("threading.py", "/hcspec/conformance/timeouts.py")
"""Frames of the worker machinery itself: left out of a stuck thread's stack."""


@dataclass(frozen=True)
class Stack:
    """A thread's Python stack at one moment.

    Attributes:
        text: the stack as ``traceback`` prints it (outermost call first), without the
            worker machinery's frames (:data:`KIT_PREFIXES`).
        where: the innermost frame, ``file:line in function: source line`` (the stuck line).
    """

    text: str
    where: str


def shown_path(filename: str) -> str:
    """``filename`` relative to the working folder when it lies under it (the same text in
    every checkout of a project), else unchanged."""
    try:
        path, here = Path(filename).resolve(), Path.cwd().resolve()
    except OSError:
        return filename
    return str(path.relative_to(here)) if path.is_relative_to(here) else filename


def thread_stack(ident: int | None) -> Stack | None:
    """The Python stack of the live thread ``ident`` now, None when there is no such thread
    (it finished meanwhile) or ``ident`` is None."""
    if ident is None:
        return None
    frame = sys._current_frames().get(ident)
    if frame is None:
        return None
    summary = [f for f in traceback.extract_stack(frame)
               if not f.filename.endswith(KIT_PREFIXES)]
    if not summary:
        return None
    last = summary[-1]
    where = f"{shown_path(last.filename)}:{last.lineno} in {last.name}"
    if last.line:
        where += f": {last.line.strip()}"
    return Stack("".join(traceback.format_list(summary)), where)


def dump_on_fault(path: str | Path) -> IO[str]:
    """From now on, a fatal signal (SIGSEGV, SIGFPE, SIGABRT, SIGBUS, SIGILL) writes every
    thread's Python stack to ``path`` before the process dies (:func:`faulthandler.enable`,
    ``all_threads=True``). Returns the open file, which must stay open (and referenced) as
    long as the handler is wanted; :func:`faulthandler.disable` ends it.

    Raises:
        OSError: ``path`` cannot be opened for writing.
    """
    stream = Path(path).open("w", encoding="utf-8")  # noqa: SIM115 (kept open: returned)
    faulthandler.enable(stream, all_threads=True)
    return stream
