"""The failure a native call's death becomes: :class:`NativeFault`, a
:class:`~hcspec.conformance.machinery.errors.PropertyFailure` (so the runner reports the
property failed). A module of its own because it imports the property catalogue's package,
which the adapters (and :mod:`hcspec.conformance.native.framework`) must not import when they
are imported; the framework imports this when a fault happens."""

from __future__ import annotations

from hcspec.conformance.machinery.errors import PropertyFailure
from hcspec.conformance.native.worker import WorkerDied

__all__ = ["NativeFault"]


class NativeFault(PropertyFailure):
    """Native code killed (or hung) the worker process during a call.

    Attributes:
        signal: the signal's name (``"SIGABRT"``), ``"timeout"``, or None (an exit).
        stderr: what the native code wrote on stderr during the call.
        native: the native frames where it died or hung, or why there are none
            (:attr:`~hcspec.conformance.native.worker.WorkerDied.native`); the detail starts
            with them.
    As :class:`~hcspec.conformance.machinery.errors.PropertyFailure` otherwise; the label is
    ``native fault: <signal>`` (the same for every case that dies the same way).
    """

    def __init__(self, died: WorkerDied) -> None:
        located = f"{died.native.describe()}\n" if died.native is not None else ""
        super().__init__(str(died), label=f"native fault: {died.signal or 'exit'} in {died.call}",
                         detail=located + died.stderr.strip()[-1000:],
                         hint="an assertion or a crash in native code (its stderr above)")
        self.signal, self.stderr, self.native = died.signal, died.stderr, died.native
