"""Native frames of a worker that crashed or hung: which C/C++ functions it was in.

Python 3.11's :mod:`faulthandler` names Python frames only. For the native worker
(:mod:`hcspec.conformance.native.worker`) the kit adds the native frames where the platform
gives them:

* **A crash** (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL): a small C signal handler
  (:data:`SOURCE`, compiled with the C compiler found on ``PATH`` into the kit's cache,
  :func:`handler_library`) is loaded into the worker only. On a fatal signal it writes the
  faulting thread's native frames (glibc's/macOS's ``backtrace_symbols_fd``) between
  :data:`BEGIN` and :data:`END` on stderr, then hands the signal to the handler that was there
  before (faulthandler's, which writes the Python stacks and lets the signal kill the process).
  ``backtrace_symbols_fd`` names the functions a library exports (``ggml_abort``, the ops of
  ``ggml-cpu``); a frame without an exported name is named from the library's symbol table by
  ``addr2line`` where it is on ``PATH`` (static functions too), else shown as
  ``library(+offset)``.
* **A hang** (no answer within the worker's timeout): before killing it, the client runs
  ``gdb -p PID -batch -ex 'thread apply all bt'`` (:func:`gdb_stacks`), which names every
  function gdb has a symbol for, static ones included, and keeps the stuck (main) thread's
  frames.

Where neither applies (no C compiler, no ``execinfo.h``, no gdb, ptrace refused), the result
says so: ``native frames unavailable: <why>``. Nothing here is loaded into the caller's
process; the handler library is only ever loaded by the worker. No torch, no NumPy.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

BEGIN: Final = "hcspec: native stack of the faulting thread (innermost first):"
"""The line the handler writes before the frames."""

END: Final = "hcspec: end of native stack"
"""The line the handler writes after the frames."""

LIB_ENV: Final = "HC_NATIVE_BACKTRACE_LIB"
"""Environment variable through which the worker learns the handler library's path."""

INSTALL_SYMBOL: Final = "hcspec_install_backtrace"
"""The handler library's entry point: installs the handler (returns 0 on success)."""

SOURCE: Final = r"""
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static const int signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
#define COUNT (int)(sizeof signals / sizeof signals[0])
static struct sigaction previous[COUNT];

static void say(const char *text) { ssize_t ignored = write(2, text, strlen(text)); (void)ignored; }

static void on_fatal(int sig, siginfo_t *info, void *context) {
    void *frames[64];
    int i, count;
    (void)info; (void)context;
    count = backtrace(frames, 64);
    say("\n" "@BEGIN@" "\n");
    backtrace_symbols_fd(frames, count, 2);
    say("@END@" "\n");
    for (i = 0; i < COUNT; i++) {
        if (signals[i] == sig) {
            sigaction(sig, &previous[i], NULL);  /* faulthandler's, or the default */
        }
    }
    raise(sig);  /* pending until this handler returns, then delivered to the previous one */
}

int @INSTALL@(void) {
    struct sigaction action;
    void *warm[2];
    int i;
    backtrace(warm, 2);  /* loads the unwinder now, not inside the signal handler */
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fatal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (i = 0; i < COUNT; i++) {
        if (sigaction(signals[i], &action, &previous[i]) != 0) {
            return -1;
        }
    }
    return 0;
}
""".replace("@BEGIN@", BEGIN).replace("@END@", END).replace("@INSTALL@", INSTALL_SYMBOL)
"""The C signal handler (written for this kit)."""

GDB_TIMEOUT: Final = 30.0
"""Seconds gdb may take to attach and print the stacks of a hung worker."""

MAX_FRAMES: Final = 16
"""The most native frames a summary lists."""

_SKIP_OBJECTS: Final = ("libc.so", "libc-", "libpthread", "libsystem_", "ld-linux", "ld.so",
                        "libhcspec_backtrace")
"""Objects whose frames are the signal machinery (raise, abort, the handler), not the code
that crashed: a summary's :attr:`NativeStack.where` skips them."""

_ABORT_HELPER: Final = re.compile(r"(^|_)(abort|assert|assert_fail|panic|terminate)$")
"""Functions that only report and abort: :attr:`NativeStack.where` names their caller."""

_INTERPRETER: Final = re.compile(r"^(ffi_call|_ctypes_|_call_function_pointer|_Py|Py[A-Z]"
                                 r"|cfunction_|method_vectorcall|call_function)")
"""Frames of the Python interpreter that called into the native code: a stack is cut there."""

_CALLER_OBJECTS: Final = ("libffi", "_ctypes", "libpython", "/python3")
"""Objects of the ctypes call into the native code: a stack is cut at their first frame."""


def _is_caller(frame: str) -> bool:
    return bool(_INTERPRETER.match(frame)) or any(s in frame for s in _CALLER_OBJECTS)


@dataclass(frozen=True)
class NativeStack:
    """The native frames of one thread, innermost first.

    Attributes:
        frames: one entry per frame, ``function (object)`` or ``object(+offset)`` where the
            function has no exported name; empty when unavailable.
        where: the innermost named frame outside the C library, the signal machinery and
            abort helpers such as ``ggml_abort`` (the function that crashed, failed its
            assertion or is stuck), None when none is named.
        unavailable: why there are no frames (``"no C compiler on PATH"``), or None.
    """

    frames: tuple[str, ...]
    where: str | None
    unavailable: str | None = None

    def describe(self) -> str:
        """One paragraph for a report: ``native frames (innermost first): a <- b <- …`` or
        ``native frames unavailable: <why>``."""
        if self.unavailable is not None:
            return f"native frames unavailable: {self.unavailable}"
        return "native frames (innermost first): " + " <- ".join(self.frames)


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/hcspec/native``, else ``~/.cache/hcspec/native`` (not created)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hcspec" / "native"


def compiler() -> str | None:
    """A C compiler on ``PATH`` (``$CC``, ``cc``, ``gcc``, ``clang``), None when none."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def handler_library() -> tuple[Path | None, str | None]:
    """The compiled signal-handler library, built on first use into :func:`cache_root`
    (keyed by :data:`SOURCE`'s hash; a second call finds it). Never loaded here.

    Returns:
        ``(path, None)``, or ``(None, why)`` when it cannot be built (no compiler, the
        compiler failed, e.g. no ``execinfo.h`` on a musl libc).
    """
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
    suffix = ".dylib" if os.uname().sysname == "Darwin" else ".so"
    target = cache_root() / f"libhcspec_backtrace-{digest}{suffix}"
    if target.is_file():
        return target, None
    cc = compiler()
    if cc is None:
        return None, "no C compiler on PATH to build the crash handler ($CC, cc, gcc, clang)"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            source = Path(tmp) / "backtrace.c"
            source.write_text(SOURCE, encoding="utf-8")
            built = Path(tmp) / target.name
            done = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(built), str(source)],
                                  capture_output=True, text=True, timeout=120, check=False)
            if done.returncode != 0:
                first = (done.stderr.strip().splitlines() or ["(no message)"])[0]
                return None, f"{cc} could not build the crash handler: {first[:300]}"
            os.replace(built, target)  # atomic: a concurrent build wins or loses whole
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"the crash handler could not be built: {exc}"
    return target, None


_SYMBOL_LINE: Final = re.compile(r"^(?P<object>[^\s(]*)\((?P<function>[^+)]*)"
                                 r"(?P<offset>\+0x[0-9a-fA-F]+)?\)\s*\[0x[0-9a-fA-F]+\]$")
"""One line of glibc's ``backtrace_symbols_fd``: ``object(function+0xoff) [0xaddr]``."""


def _frame(obj: str, function: str, offset: str) -> str:
    base = os.path.basename(obj) or "?"
    return f"{function} ({base})" if function else f"{base}({offset or '?'})"


def _is_machinery(frame: str) -> bool:
    return any(s in frame for s in _SKIP_OBJECTS)


def _summary(frames: list[str]) -> NativeStack:
    kept = tuple(frames[:MAX_FRAMES])
    named = [f for f in frames if not _is_machinery(f) and not f.startswith("?")
             and "(+" not in f]
    # an abort helper (ggml_abort, __assert_fail) is where it died, its caller what failed
    callers = [f for f in named if not _ABORT_HELPER.search(f.split(" ")[0])]
    where = (callers or named)[0] if (callers or named) else None
    return NativeStack(kept, where)


def without_frames(text: str) -> str:
    """``text`` without the crash handler's raw frame lines (summarised by
    :func:`from_stderr`), so that what follows them (faulthandler's Python stacks) stays in a
    report's tail."""
    start = text.find(BEGIN)
    if start < 0:
        return text
    end = text.find(END, start)
    return text[:start] + ("" if end < 0 else text[end + len(END):].lstrip("\n"))


def _addr2line(obj: str, offset: str) -> str:
    """The function at ``offset`` in the shared object ``obj`` from its symbol table (static
    functions too) by ``addr2line -f``, or "" (no addr2line, no symbol, not a file). The
    offset is a return address: one byte before it lies in the calling function."""
    tool = shutil.which("addr2line")
    if tool is None or not offset or not os.path.isfile(obj):
        return ""
    try:
        done = subprocess.run([tool, "-f", "-e", obj, hex(int(offset, 16) - 1)],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return ""
    name = (done.stdout.splitlines() or ["??"])[0].strip()
    return "" if name in ("", "??") else name


def from_stderr(text: str) -> NativeStack | None:
    """The frames the crash handler wrote into ``text`` (a worker's stderr), None when it
    wrote none (no fatal signal, or no handler)."""
    start = text.rfind(BEGIN)
    if start < 0:
        return None
    end = text.find(END, start)
    body = text[start + len(BEGIN): end if end >= 0 else len(text)]
    frames: list[str] = []
    for line in body.strip().splitlines():
        line = line.strip()
        match = _SYMBOL_LINE.match(line)
        if match:
            function = match["function"] or (
                "" if _is_machinery(match["object"])
                else _addr2line(match["object"], match["offset"] or ""))
            frames.append(_frame(match["object"], function, match["offset"] or ""))
        elif line:
            frames.append(line)  # macOS: "N  object  0xaddr function + off"
        if frames and _is_caller(frames[-1]):
            frames.pop()
            break
    # the handler's own frame and the kernel's signal trampoline come first
    while frames and ("libhcspec_backtrace" in frames[0] or (frames[0].startswith("libc")
                      and "(+" in frames[0])):
        frames.pop(0)
    return _summary(frames) if frames else None


_GDB_FRAME: Final = re.compile(r"^#\d+\s+(?:0x[0-9a-fA-F]+\s+in\s+)?(?P<function>\S+)\s*\("
                               r"[^)]*\)(?:.*?\s(?:from|at)\s+(?P<where>\S+))?")
"""One frame line of gdb's ``bt``: ``#N  0xaddr in function (args) from /lib/x.so``."""


def gdb_stacks(pid: int, timeout: float = GDB_TIMEOUT) -> NativeStack:
    """The native frames of process ``pid``'s main thread (the stuck one: the worker runs
    each call on it), from ``gdb -p pid -batch -ex 'thread apply all bt'``. The process
    continues after gdb detaches.

    Returns:
        the stack, or one whose :attr:`NativeStack.unavailable` says why (no gdb on PATH;
        gdb could not attach, e.g. ptrace refused by ``kernel.yama.ptrace_scope``; no frame).
    """
    gdb = shutil.which("gdb")
    if gdb is None:
        return NativeStack((), None, "gdb is not on PATH (the hung worker's native frames "
                                     "need it)")
    try:
        done = subprocess.run(
            [gdb, "-nx", "-p", str(pid), "-batch", "-ex", "set pagination off",
             "-ex", "thread apply all bt"],
            capture_output=True, text=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return NativeStack((), None, f"gdb did not print the stacks within {timeout:g} s")
    except OSError as exc:
        return NativeStack((), None, f"gdb could not run: {exc}")
    return from_gdb(done.stdout, pid, done.stderr)


def from_gdb(output: str, pid: int, errors: str = "") -> NativeStack:
    """The main thread's frames (LWP ``pid``, else the first thread) in gdb's ``thread
    apply all bt`` ``output``; ``errors`` (gdb's stderr) explains an empty one."""
    threads: list[tuple[str, list[str]]] = []
    for line in output.splitlines():
        if line.startswith("Thread "):
            threads.append((line, []))
        elif line.startswith("#") and threads:
            threads[-1][1].append(line)
    if not threads:  # a single-threaded process: gdb prints the frames without a header
        frames_only = [line for line in output.splitlines() if line.startswith("#")]
        if frames_only:
            threads.append(("", frames_only))
    if not threads:
        why = next((line.strip() for line in errors.splitlines()
                    if "ptrace" in line or "attach" in line.lower()), None)
        return NativeStack((), None, f"gdb could not attach to the worker: {why}" if why
                           else "gdb printed no stack")
    main = next((t for t in threads if f"LWP {pid})" in t[0]), threads[0])
    frames: list[str] = []
    for line in main[1]:
        match = _GDB_FRAME.match(line)
        if not match:
            continue
        function, where = match["function"], match["where"]
        frame = f"{function} ({os.path.basename(where)})" if where else function
        if _is_caller(frame):
            break
        frames.append(frame)
    if not frames:
        return NativeStack((), None, "the stuck thread has no native frames below the "
                                     "interpreter")
    return _summary(frames)
