"""A worker process for native code: calls that can abort, segfault or hang the process run
there, and such a death comes back as an exception (:class:`WorkerDied`) with the signal and
what the native code wrote on stderr, never as the death of the caller.

The client, :class:`NativeWorker`, starts ``python -c 'from hcspec.conformance.native.worker
import serve; serve()'`` (:func:`serve`) and speaks pickle over its stdin/stdout: a request is
``(function, args)``, where ``function`` is a picklable callable (a module-level function, or a
``functools.partial`` of one); the answer is its return value, or the exception it raised,
re-raised in the caller as is (a ``ValueError`` of a shape check stays a ``ValueError``). The
worker moves its own file descriptor 1 onto stderr before serving, so native code that prints
to stdout cannot corrupt the protocol; its stderr goes to a temporary file, whose part written
during a call that killed the worker is the message's ``stderr`` (the ``GGML_ASSERT`` line).

Where the code was when it died or hung (:mod:`hcspec.conformance.native.frames`): the worker
enables :mod:`faulthandler` (every thread's Python stack on a fatal signal, and on ``SIGUSR1``)
and loads the kit's small C crash handler (the native frames of the faulting thread on a fatal
signal); a hung worker is first inspected with gdb (its native frames), then sent ``SIGUSR1``
(its Python stacks), then killed. :attr:`WorkerDied.native` holds the native frames, or why
there are none; none of this touches the caller's process.

A worker that dies (a signal, or any exit) or does not answer within the timeout (it is
killed) makes the call raise :class:`WorkerDied`; the next call starts a fresh worker. One
call at a time per worker (a lock). The environment of the worker adds ``GGML_NO_BACKTRACE=1``
(ggml's abort would otherwise try to attach a debugger for a backtrace) and puts this
caller's ``sys.path`` on ``PYTHONPATH`` (the worker imports what the caller can).

POSIX only (``select`` on the pipe, signals in the exit status): Linux and macOS.

No torch, no NumPy (the worker imports what the pickled function needs).
"""

from __future__ import annotations

import atexit
import functools
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Final

from hcspec.conformance.native import frames
from hcspec.conformance.native.frames import NativeStack

_HEADER: Final = struct.Struct("!Q")

DEFAULT_TIMEOUT: Final = 120.0
"""Seconds a call may take before the worker is declared hung and killed
(``$HC_NATIVE_TIMEOUT`` overrides)."""

STDERR_TAIL: Final = 4000
"""The most characters of the native stderr a message carries (its end)."""


class WorkerDied(RuntimeError):
    """The worker died or hung during a call.

    Attributes:
        signal: the signal's name (``"SIGABRT"``) when a signal killed it, ``"timeout"`` when it
            was killed for not answering, else None (it exited; :attr:`returncode` says how).
        returncode: the worker's exit status (negative: the signal's number), None if unknown.
        stderr: what the worker wrote on stderr during the call (its tail).
        call: the name of the function called.
        native: the native frames where it died or hung (:class:`~hcspec.conformance.native.
            frames.NativeStack`: ``native.where`` names the function), or why there are none
            (``native.unavailable``); None for a plain exit.
    """

    def __init__(self, message: str, *, signal: str | None, returncode: int | None,
                 stderr: str, call: str, native: NativeStack | None = None) -> None:
        super().__init__(message)
        self.signal, self.returncode, self.stderr, self.call = signal, returncode, stderr, call
        self.native = native


def _send(stream: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _receive(stream: IO[bytes]) -> Any:
    (size,) = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    return pickle.loads(_read_exact(stream, size))


def apply_flat(fn: Callable[..., Any], names: Sequence[str], single: bool,
               *arrays: Any) -> list[Any]:
    """``fn(dict(zip(names, arrays)), *rest)`` as a list (``[result]`` when ``single``): what
    :class:`hcspec.conformance.bridge.FlatFunction` computes, without importing the bridge
    (and torch) in the worker."""
    count = len(names)
    out = fn(dict(zip(names, arrays[:count], strict=True)), *arrays[count:])
    return [out] if single else list(out)


def serve() -> None:
    """The worker's loop: answer requests from stdin on the original stdout until EOF (see
    the module docstring)."""
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # native prints to stdout land in the stderr file
    sys.stdout = sys.stderr
    _locate_faults()
    requests = sys.stdin.buffer
    while True:
        try:
            function, args = _receive(requests)
        except EOFError:
            return
        try:
            result: tuple[str, object] = ("ok", function(*args))
        except Exception as exc:  # sent back and re-raised in the caller
            try:
                pickle.dumps(exc)
                result = ("raised", exc)
            except Exception:
                result = ("raised", RuntimeError(f"{type(exc).__name__}: {exc}"))
        sys.stderr.flush()
        _send(protocol_out, result)


STACK_SIGNAL: Final = signal.SIGUSR1
"""The signal on which the worker writes every thread's Python stack to its stderr."""


def _locate_faults() -> None:
    """In the worker: faulthandler on the fatal signals and on :data:`STACK_SIGNAL` (Python
    stacks), then the native crash handler named by ``$HC_NATIVE_BACKTRACE_LIB``, which runs
    first and chains to faulthandler's (native frames, then Python stacks)."""
    import faulthandler

    faulthandler.enable(sys.stderr, all_threads=True)
    faulthandler.register(STACK_SIGNAL, file=sys.stderr, all_threads=True)
    lib = os.environ.get(frames.LIB_ENV)
    if lib:
        import ctypes

        try:
            status = getattr(ctypes.CDLL(lib), frames.INSTALL_SYMBOL)()
        except (OSError, AttributeError) as exc:
            status = exc
        if status != 0:
            sys.stderr.write(f"hcspec: the native crash handler {lib} was not installed: "
                             f"{status}\n")
            sys.stderr.flush()


_HANDLER: list[tuple[Path | None, str | None]] = []
"""The crash handler library (or why none), built once per process."""


def _handler() -> tuple[Path | None, str | None]:
    if not _HANDLER:
        _HANDLER.append(frames.handler_library())
    return _HANDLER[0]


def _import_path() -> str:
    """The caller's import path (``sys.path``, its existing directories) as ``PYTHONPATH``: the
    worker imports what the caller can (this hcspec first, a test's stand-in modules)."""
    return os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))


def _signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _name(function: Callable[..., Any]) -> str:
    inner: Any = function.func if isinstance(function, functools.partial) else function
    if inner is apply_flat and isinstance(function, functools.partial):
        inner = function.args[0]  # the function it applies
        inner = inner.func if isinstance(inner, functools.partial) else inner
    return f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', repr(inner))}"


class NativeWorker:
    """The client of one worker process (started on the first call, restarted after a death).

    Args:
        timeout: seconds per call before the worker is killed as hung (None:
            ``$HC_NATIVE_TIMEOUT`` or :data:`DEFAULT_TIMEOUT`).
        env: extra environment variables for the worker.

    Attributes:
        starts: how many workers were started (a test reads it).
    """

    def __init__(self, timeout: float | None = None, env: dict[str, str] | None = None) -> None:
        self.timeout = timeout if timeout is not None else float(
            os.environ.get("HC_NATIVE_TIMEOUT", DEFAULT_TIMEOUT))
        self.env = dict(env or {})
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._no_handler: str | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env.update({"GGML_NO_BACKTRACE": "1", **self.env})
        env["PYTHONPATH"] = _import_path()
        library, self._no_handler = _handler()
        if library is not None:
            env[frames.LIB_ENV] = str(library)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (kept open across calls)
        self._proc = subprocess.Popen(
            [sys.executable, "-c",
             "from hcspec.conformance.native.worker import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        self.starts += 1
        return self._proc

    def call(self, function: Callable[..., Any], args: Sequence[object]) -> Any:
        """``function(*args)`` in the worker; its return value, or the exception it raised.

        Raises:
            WorkerDied: the worker died during the call or did not answer within the timeout.
            whatever ``function`` raised (re-raised here).
        """
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None else None
            if proc is None:
                self.close()
                proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            assert self._stderr is not None
            self._stderr.seek(0, os.SEEK_END)
            mark = self._stderr.tell()
            try:
                _send(proc.stdin, (function, tuple(args)))
                status, value = self._answer(proc)
            except (EOFError, BrokenPipeError, OSError, TimeoutError) as exc:
                raise self._died(proc, mark, _name(function),
                                 isinstance(exc, TimeoutError)) from None
        if status == "raised":
            assert isinstance(value, BaseException)
            raise value
        return value

    def _answer(self, proc: subprocess.Popen[bytes]) -> tuple[str, Any]:
        assert proc.stdout is not None
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
            if ready:
                answer: tuple[str, Any] = _receive(proc.stdout)
                return answer

    def _died(self, proc: subprocess.Popen[bytes], mark: int, call: str,
              hung: bool) -> WorkerDied:
        hung_stack = None
        if hung:
            hung_stack = frames.gdb_stacks(proc.pid) if proc.poll() is None else None
            if proc.poll() is None:
                proc.send_signal(STACK_SIGNAL)  # faulthandler: the Python stacks
                time.sleep(0.5)
            proc.kill()
        try:
            returncode: int | None = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            returncode = None
        assert self._stderr is not None
        self._stderr.seek(mark)
        full = self._stderr.read().decode(errors="replace")
        self.close()
        name = "timeout" if hung else _signal_name(returncode)
        native = hung_stack if hung else self._crash_stack(full, name)
        text = frames.without_frames(full)[-STDERR_TAIL:]
        how = (f"did not answer within {self.timeout:g} s and was killed" if hung else
               f"was killed by {name}" if name else f"exited with status {returncode}")
        if native is not None and native.where:
            how += f" in {native.where}"
        lines = text.strip() or "(nothing on stderr)"
        located = f"\n{native.describe()}" if native is not None else ""
        message = (f"native code: the worker process running {call} {how}{located}; "
                   f"its stderr:\n{lines}")
        return WorkerDied(message, signal=name, returncode=returncode, stderr=text, call=call,
                          native=native)

    def _crash_stack(self, stderr: str, signal_name: str | None) -> NativeStack | None:
        """The crash handler's frames in ``stderr``, or why there are none; None when the
        worker was not killed by a signal."""
        if signal_name is None:
            return None
        found = frames.from_stderr(stderr)
        if found is not None:
            return found
        why = self._no_handler or (f"the crash handler wrote no frames ({signal_name} "
                                   "bypasses handlers, or the stack was unusable)")
        return NativeStack((), None, why)

    def close(self) -> None:
        """Stop the worker (if any) and drop its stderr file (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


_SHARED: dict[tuple[tuple[str, str], ...], NativeWorker] = {}


def shared_worker(env: dict[str, str] | None = None) -> NativeWorker:
    """The process-wide worker for ``env`` (one per distinct environment), stopped at exit."""
    key = tuple(sorted((env or {}).items()))
    if key not in _SHARED:
        _SHARED[key] = NativeWorker(env=env)
    return _SHARED[key]


@atexit.register
def _close_all() -> None:
    for worker in _SHARED.values():
        worker.close()
