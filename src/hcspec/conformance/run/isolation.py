"""Isolation of torch's process-wide state around code the kit does not own.

An implementation under test may change torch's global state in its factory or its forward:
``torch.set_default_dtype``, ``torch.manual_seed``, ``torch.set_grad_enabled``,
``torch.use_deterministic_algorithms``, the TF32 switches, ``torch.set_num_threads``,
``torch.autograd.set_detect_anomaly``. Left alone, such a change would leak into the next
property and, through :func:`hcspec.conformance.check_implementation` or the pytest plugin,
into the user's later code. :func:`snapshot` records that state, :func:`restore` puts it back
and :func:`changes` names what differs, e.g. ``default dtype torch.float64 -> torch.float16``.

:func:`watch` is the one-stop form: it restores on exit and collects the changes::

    >>> import torch
    >>> from hcspec.conformance.run import isolation
    >>> with isolation.watch() as changed:
    ...     torch.set_default_dtype(torch.float16)
    >>> changed
    ['default dtype torch.float32 -> torch.float16']
    >>> torch.get_default_dtype()
    torch.float32

Grad mode is per thread in PyTorch: :func:`snapshot` records the calling thread's. The CUDA
RNG is recorded only when CUDA is already initialised (snapshotting never initialises it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class GlobalState:
    """torch's process-wide state that an implementation can change (see the module
    docstring). ``cpu_rng`` and ``cuda_rng`` are the generators' states as bytes."""

    default_dtype: Any
    cpu_rng: bytes
    cuda_rng: tuple[bytes, ...] | None
    grad_enabled: bool
    deterministic_algorithms: bool
    deterministic_warn_only: bool
    cudnn_deterministic: bool
    cudnn_benchmark: bool
    cuda_matmul_allow_tf32: bool
    cudnn_allow_tf32: bool
    float32_matmul_precision: str
    num_threads: int
    anomaly_enabled: bool
    anomaly_check_nan: bool


_NAMES = {
    "default_dtype": "default dtype",
    "cpu_rng": "the global CPU RNG state",
    "cuda_rng": "the global CUDA RNG state",
    "grad_enabled": "grad mode",
    "deterministic_algorithms": "torch.use_deterministic_algorithms",
    "deterministic_warn_only": "deterministic algorithms warn_only",
    "cudnn_deterministic": "torch.backends.cudnn.deterministic",
    "cudnn_benchmark": "torch.backends.cudnn.benchmark",
    "cuda_matmul_allow_tf32": "torch.backends.cuda.matmul.allow_tf32",
    "cudnn_allow_tf32": "torch.backends.cudnn.allow_tf32",
    "float32_matmul_precision": "float32 matmul precision",
    "num_threads": "torch.get_num_threads()",
    "anomaly_enabled": "anomaly mode",
    "anomaly_check_nan": "anomaly mode check_nan",
}


def snapshot() -> GlobalState:
    """The current global state (CUDA RNG only when CUDA is initialised)."""
    import torch

    cuda_rng = None
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        cuda_rng = tuple(bytes(s.numpy().tobytes()) for s in torch.cuda.get_rng_state_all())
    return GlobalState(
        default_dtype=torch.get_default_dtype(),
        cpu_rng=bytes(torch.get_rng_state().numpy().tobytes()),
        cuda_rng=cuda_rng,
        grad_enabled=torch.is_grad_enabled(),
        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
        deterministic_warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
        cudnn_deterministic=bool(torch.backends.cudnn.deterministic),
        cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
        cuda_matmul_allow_tf32=bool(torch.backends.cuda.matmul.allow_tf32),
        cudnn_allow_tf32=bool(torch.backends.cudnn.allow_tf32),
        float32_matmul_precision=torch.get_float32_matmul_precision(),
        num_threads=torch.get_num_threads(),
        anomaly_enabled=torch.is_anomaly_enabled(),
        anomaly_check_nan=torch.is_anomaly_check_nan_enabled(),
    )


def restore(state: GlobalState) -> None:
    """Put ``state`` back (only the parts that differ from now, so a restore that changes
    nothing costs nothing and never touches CUDA)."""
    import torch

    now = snapshot()
    if now.default_dtype != state.default_dtype:
        torch.set_default_dtype(state.default_dtype)
    if now.cpu_rng != state.cpu_rng:
        torch.set_rng_state(torch.frombuffer(bytearray(state.cpu_rng), dtype=torch.uint8))
    if state.cuda_rng is not None and now.cuda_rng != state.cuda_rng:
        torch.cuda.set_rng_state_all(
            [torch.frombuffer(bytearray(s), dtype=torch.uint8) for s in state.cuda_rng])
    if now.grad_enabled != state.grad_enabled:
        torch.set_grad_enabled(state.grad_enabled)
    if (now.deterministic_algorithms, now.deterministic_warn_only) != (
            state.deterministic_algorithms, state.deterministic_warn_only):
        torch.use_deterministic_algorithms(state.deterministic_algorithms,
                                           warn_only=state.deterministic_warn_only)
    torch.backends.cudnn.deterministic = state.cudnn_deterministic
    torch.backends.cudnn.benchmark = state.cudnn_benchmark
    if now.cuda_matmul_allow_tf32 != state.cuda_matmul_allow_tf32:
        torch.backends.cuda.matmul.allow_tf32 = state.cuda_matmul_allow_tf32
    torch.backends.cudnn.allow_tf32 = state.cudnn_allow_tf32
    if now.float32_matmul_precision != state.float32_matmul_precision:
        torch.set_float32_matmul_precision(state.float32_matmul_precision)
    if now.num_threads != state.num_threads:
        torch.set_num_threads(state.num_threads)
    if (now.anomaly_enabled, now.anomaly_check_nan) != (state.anomaly_enabled,
                                                        state.anomaly_check_nan):
        torch.autograd.set_detect_anomaly(state.anomaly_enabled,
                                          check_nan=state.anomaly_check_nan)


def changes(before: GlobalState, after: GlobalState) -> list[str]:
    """What differs from ``before`` to ``after``, one phrase per field, e.g.
    ``default dtype torch.float64 -> torch.float16`` or ``the global CPU RNG state was
    changed (reseeded or drawn from)``."""
    out: list[str] = []
    for f in fields(GlobalState):
        old, new = getattr(before, f.name), getattr(after, f.name)
        if old == new:
            continue
        if f.name in ("cpu_rng", "cuda_rng"):
            out.append(f"{_NAMES[f.name]} was changed (reseeded or drawn from)")
        else:
            out.append(f"{_NAMES[f.name]} {old} -> {new}")
    return out


@contextlib.contextmanager
def watch() -> Iterator[list[str]]:
    """Run a block, then restore the global state as it was before it and fill the yielded
    list with :func:`changes` (empty when the block changed nothing). Restores also when the
    block raises."""
    before = snapshot()
    changed: list[str] = []
    try:
        yield changed
    finally:
        changed.extend(changes(before, snapshot()))
        restore(before)


@contextlib.contextmanager
def thread_watch() -> Iterator[list[str]]:
    """As :func:`watch`, for the state torch keeps per thread, which :func:`watch` in another
    thread cannot see: run a block in the calling thread, then put the thread's grad mode back
    and fill the yielded list with the change, e.g. ``grad mode (worker thread) True ->
    False``. Used around code the kit does not own in a reused worker thread
    (:mod:`hcspec.conformance.run.timeouts`), so a forward that leaves grad mode off cannot leak it
    into the next property.

    >>> import torch
    >>> with thread_watch() as changed:
    ...     _ = torch.set_grad_enabled(False)
    >>> changed, torch.is_grad_enabled()
    (['grad mode (worker thread) True -> False'], True)
    """
    import torch

    grad = torch.is_grad_enabled()
    changed: list[str] = []
    try:
        yield changed
    finally:
        if torch.is_grad_enabled() != grad:
            changed.append(f"grad mode (worker thread) {grad} -> {torch.is_grad_enabled()}")
            torch.set_grad_enabled(grad)
