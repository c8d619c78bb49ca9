"""Native targets: a sublayer in native code, run in a worker process, presented to the kit by
a proxy impl in the kit's process.

A native target is a :mod:`hcspec.conformance.bridge` target whose framework is
:class:`NativeFramework`: every framework call (the sublayer's ``read``, ``write``,
``weights``, ``logits``) is pickled to the worker process
(:class:`hcspec.conformance.native.worker.NativeWorker`) and runs there; NumPy arrays cross.
What any target declares this way is isolated, whatever library it calls.

**Where the branch runs.** In the kit's process, between the worker's ``read`` (the branch
input ``x_in`` and what the write needs: ``h_post``, ``H_res``) and the worker's ``write``
(the new state from the branch output): the split every HC/mHC step has (HC
arXiv:2409.19606 Eq. 3–5; mHC arXiv:2512.24880 Eq. 3). So the branch is the kit's own callable,
called exactly once, with the tensor the native code produced: ``shape.branch_once``, the
token-mixing and recording branches and every law property keep their meaning, and no branch
is pickled.

**Faults.** A worker killed by a signal (``abort()`` from a failed ``GGML_ASSERT``, a
segfault), exiting, or not answering within the timeout raises
:class:`~hcspec.conformance.native.fault.NativeFault`, a
:class:`~hcspec.conformance.machinery.errors.PropertyFailure` whose message names the signal
and carries the native stderr; the runner reports the property failed, the other properties
run (a fresh worker starts for the next call) and the reports are written. Where the target's
own declaration excludes a size (``Conventions.supported_expansion_rates``,
``hidden_size_multiple``), :func:`native_target`'s factory refuses it before any native call,
so the case is skipped as unsupported (not applicable when every case is), never a crash.

**No backward.** :class:`NativeFramework` takes no vjp: a native target declares
``Conventions.no_backward`` (the gradient properties are then not applicable with that reason)
and its outputs carry no autograd graph (computed under ``torch.no_grad``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from hcspec.conformance.bridge import (
    BridgedConnection,
    Built,
    FlatFunction,
    Sublayer,
    check_sizes,
    cross,
    torch_parameters,
)
from hcspec.conformance.bridge.connection import UNTRACEABLE
from hcspec.conformance.native.worker import NativeWorker, WorkerDied, apply_flat, shared_worker
from hcspec.conformance.protocol import Branch, Conventions, Kind, Weights
from hcspec.conformance.protocol.validation import check_branch_output, check_state

NATIVE_NOTE = ("native code ({name}) run in a worker process by hcspec.conformance.native: "
               "arrays cross through NumPy, the branch is the kit's torch callable, called once "
               "in the kit's process between the worker's read and write; no backward")
"""The note every native target's declared conventions carry."""

__all__ = ["NativeConnection", "NativeFramework", "NoBackward",
           "ThreadedNativeConnection", "native_target"]


class NoBackward(RuntimeError):
    """A backward was asked of a native target that declares it has none."""


class NativeFramework:
    """A :class:`hcspec.conformance.bridge.Framework` whose calls run in a worker process.

    Arrays are NumPy arrays of the dtype that crosses (the native functions convert to what
    they compute in). A :class:`~hcspec.conformance.bridge.FlatFunction` is sent as its parts
    (module-level functions or partials of them: the worker imports only their modules, not
    torch).

    Args:
        name: the library's name, for messages. worker: where calls run. no_backward: the
            reason :meth:`vjp` raises.
    """

    def __init__(self, name: str, worker: NativeWorker, no_backward: str) -> None:
        self.name, self.worker, self.no_backward = name, worker, no_backward

    def asarray(self, value: np.ndarray, dtype: str) -> Any:
        """``value`` itself (NumPy crosses to the worker)."""
        del dtype
        return value

    def to_numpy(self, array: Any) -> np.ndarray:
        """``array`` as NumPy."""
        return np.asarray(array)

    def dtype_name(self, array: Any) -> str:
        """The NumPy dtype's name (``"float32"``)."""
        return str(np.asarray(array).dtype)

    def call(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any]) -> Sequence[Any]:
        """``fn(*primals)`` in the worker.

        Raises:
            NativeFault: the worker died or hung (see the module docstring).
            whatever ``fn`` raised in the worker.
        """
        remote: Callable[..., Any] = fn
        if isinstance(fn, FlatFunction):
            remote = functools.partial(apply_flat, fn.fn, fn.names, fn.single)
        try:
            result: Sequence[Any] = self.worker.call(remote, primals)
        except WorkerDied as died:
            # imported here: the fault is a PropertyFailure, whose package is the property
            # catalogue, which an adapter must not import (the kit has it loaded by then)
            from hcspec.conformance.native.fault import NativeFault

            raise NativeFault(died) from None
        return result

    def vjp(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any],
            cotangents: Sequence[Any]) -> Sequence[Any]:
        """Refused.

        Raises:
            NoBackward: always, with the declared reason.
        """
        raise NoBackward(f"{self.name}: {self.no_backward}")


class NativeConnection(BridgedConnection):
    """A :class:`~hcspec.conformance.bridge.BridgedConnection` over a :class:`NativeFramework`:
    the proxy impl of a native target. Its outputs carry no autograd graph.
    :class:`ThreadedNativeConnection` adds ``threads(count)`` (capability ``threads``).

    Shapes, dtypes and errors as :class:`~hcspec.conformance.bridge.BridgedConnection`, plus
    :class:`~hcspec.conformance.native.fault.NativeFault` from any method that calls native
    code.
    """

    def __init__(self, framework: NativeFramework, sublayer: Sublayer,
                 params: dict[str, torch.Tensor], n: int, d: int, kind: Kind,
                 conventions: Conventions,
                 rebuild: Callable[[int], NativeConnection],
                 extras: Mapping[str, Callable[..., Any]] | None = None) -> None:
        super().__init__(framework, sublayer, params, n, d, kind, conventions)
        self.thread_count = 1  # set by native_target's factory: build's thread count
        self._rebuild = rebuild
        self._extras = {key: FlatFunction(fn, list(params), False)
                        for key, fn in (extras or {}).items()}

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """The worker's ``read``, the kit's ``branch`` once here on ``x_in`` cast to ``x``'s
        dtype (native code computes in its own dtype, declared as ``compute_dtype``), the
        worker's ``write``; no autograd graph.

        Raises:
            ValueError: ``x`` not ``[B, T, n, d]``; a branch output of another shape.
            NativeFault: see the module docstring.
        """
        check_state(x, self.n, self.d)
        params = tuple(self.params.values())
        with torch.no_grad():
            x_in, *saved = cross(self.framework, self._read, *params, x)
            x_in = x_in.to(x.dtype)
            z = check_branch_output(branch(x_in), x_in)
            (out,) = cross(self.framework, self._write, *params, x, z, *saved)
        return out

    def weights(self, x: torch.Tensor) -> Weights:
        """As the bridged ``weights``, without an autograd graph."""
        with torch.no_grad():
            return super().weights(x)

    def call_extra(self, key: str, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The extra framework function ``key`` (``fn(params, *arrays) -> arrays``) on the
        parameters and ``inputs``, in the worker, without an autograd graph.

        Raises:
            KeyError: no such function. NativeFault: see the module docstring.
        """
        with torch.no_grad():
            return cross(self.framework, self._extras[key], *self.params.values(), *inputs)



class ThreadedNativeConnection(NativeConnection):
    """A :class:`NativeConnection` whose native code takes a thread count (``build``'s
    ``threads``): capability ``threads``."""

    def threads(self, count: int) -> NativeConnection:
        """A proxy of the same parameters (the same tensors) computing with ``count`` threads.

        Raises:
            ValueError: ``count < 1``.
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"threads: expected an int >= 1, got {count!r}")
        other = self._rebuild(count)
        other.params = self.params
        return other


def native_target(
    name: str, build: Callable[[int, int, int, int, int], Built], *, conventions: Conventions,
    no_backward: str, parameter_dtype: torch.dtype = torch.float32, kind: Kind = "mhc",
    worker: Callable[[], NativeWorker] = shared_worker,
    cls: type[NativeConnection] = NativeConnection,
    extras: Callable[[int], Mapping[str, Callable[..., Any]]] | None = None,
) -> Callable[..., NativeConnection]:
    """A kit target (factory) for a sublayer in native code, run in a worker process.

    Args:
        name: the library's name (messages, the declared notes).
        build: ``build(n, d, layer_index, seed, threads) -> Built``: the parameters (NumPy)
            and the sublayer's functions, each a module-level function or a
            ``functools.partial`` of one (they are pickled to the worker), importing no torch.
        conventions: what the target declares (``compute_dtype``, the supported sizes ...);
            ``no_backward`` and the bridge's ``untraceable`` are added.
        no_backward: why the target has no backward (declared; the gradient properties are
            not applicable with it).
        parameter_dtype: the dtype of the parameters whatever the factory's dtype.
        kind: the kit's kind.
        worker: returns the worker the calls run in (default: the shared one).
        cls: the proxy class (a subclass adding capabilities through
            :meth:`NativeConnection.call_extra`).
        extras: optional ``extras(threads) -> {key: fn}``: further framework functions
            ``fn(params, *arrays)`` (picklable, as ``build``'s) for :meth:`call_extra`.

    Returns:
        ``make(n, d, *, layer_index=0, dtype=torch.float64, device="cpu", seed=0, threads=1)``
        building a fresh :class:`NativeConnection` (no native call happens when it is built).

    Raises:
        ValueError: (from ``make``) ``n``/``d`` not positive ints, ``layer_index < 0`` or
            ``seed < 0``, or sizes the declaration excludes
            (:meth:`~hcspec.conformance.protocol.Conventions.unsupported_size`).
    """
    note = NATIVE_NOTE.format(name=name)
    declared = dataclasses.replace(
        conventions, no_backward=no_backward, untraceable=UNTRACEABLE.format(name=name),
        notes=f"{conventions.notes}; {note}" if conventions.notes else note)

    def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0, threads: int = 1) -> NativeConnection:
        check_sizes(n, d, layer_index, seed)
        del dtype  # the parameters have parameter_dtype; the state keeps its dtype
        unsupported = declared.unsupported_size(n, d)
        if unsupported is not None:
            raise ValueError(f"{name}: {unsupported}")
        framework = NativeFramework(name, worker(), no_backward)

        def rebuild(count: int) -> NativeConnection:
            return make(n, d, layer_index=layer_index, device=device, seed=seed, threads=count)

        built = build(n, d, layer_index, seed, threads)
        params = torch_parameters(built.parameters, parameter_dtype, device)
        connection = cls(framework, built.sublayer, params, n, d, kind, declared, rebuild,
                         None if extras is None else extras(threads))
        connection.thread_count = threads
        return connection

    make.__doc__ = f"Kit factory for the native target {name} (run in a worker process)."
    return make
