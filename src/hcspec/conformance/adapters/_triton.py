"""How a Triton kernel will execute in this process: natively on a CUDA device, on the CPU
through Triton's interpreter, or not at all — and why.

Triton decides per kernel, when its ``@triton.jit`` decorator runs (the defining module's
import), whether the kernel is compiled for the GPU or interpreted with NumPy on the CPU: the
latter when the environment variable ``TRITON_INTERPRET=1`` was set at that moment. So the
mode is read from the kernel object itself (:func:`kernel_mode`), not from the environment
now; :func:`environment_mode` says what a kernel imported now would get.

What the interpreter runs is the kernel's own program (block sizes, masks, program ids,
``static_range`` unrolling), one program after another: it shows indexing, masking and
arithmetic bugs, but not timing, races between programs (atomics are applied in order), the
hardware's accumulation (``tl.dot`` in TF32 or on tensor cores) or compilation limits
(register pressure, shared memory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final, Literal

import torch

ENV_VAR: Final = "TRITON_INTERPRET"

ModeName = Literal["interpreter", "cuda", "unavailable"]


@dataclass(frozen=True)
class TritonMode:
    """Where Triton kernels run here.

    Attributes:
        name: ``"interpreter"`` (CPU, NumPy), ``"cuda"`` (compiled, native) or
            ``"unavailable"`` (neither: no CUDA device and the kernels are not interpreted).
        reason: one sentence saying why, for ``hc-conformance targets`` and the report.
    """

    name: ModeName
    reason: str

    def require_device(self, device: str, what: str) -> None:
        """Check that kernels in this mode can take tensors on ``device``.

        Raises:
            ValueError: unavailable mode, or a CPU ``device`` for compiled CUDA kernels; the
                message says what to do (set ``TRITON_INTERPRET=1`` before the import, or
                use ``--device cuda``).
        """
        if self.name == "unavailable":
            raise ValueError(f"{what}: its Triton kernels cannot run here: {self.reason}")
        if self.name == "cuda" and torch.device(device).type != "cuda":
            raise ValueError(
                f"{what}: its Triton kernels are compiled for CUDA in this process and cannot "
                f"take {device} tensors; use --device cuda, or set {ENV_VAR}=1 before the "
                "kernels are imported to run them on the CPU with Triton's interpreter")


def _interpreted(kernel: object) -> bool:
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return False
    return isinstance(kernel, InterpretedFunction)


def kernel_mode(kernel: object) -> TritonMode:
    """The mode of an already-decorated ``@triton.jit`` kernel (interpreted or compiled is
    fixed at its import)."""
    if _interpreted(kernel):
        if not helpers_interpreted():
            return TritonMode(
                "unavailable",
                f"the kernels are interpreted but Triton's own helpers are compiled: Triton was "
                f"imported before {ENV_VAR}=1 was set (set it in the environment instead)")
        return TritonMode(
            "interpreter",
            f"{ENV_VAR}=1 was set when the kernels were imported: they run on the CPU through "
            "Triton's interpreter (slow; no timing, races or hardware accumulation)")
    if torch.cuda.is_available():
        return TritonMode(
            "cuda", f"compiled Triton kernels on CUDA ({torch.cuda.get_device_name()}); "
            f"{ENV_VAR} was not set when they were imported")
    return TritonMode(
        "unavailable",
        f"no CUDA device, and {ENV_VAR}=1 was not set when the kernels were imported (set it "
        "in the environment to run them on the CPU through Triton's interpreter)")


def _interpret_requested() -> bool:
    return os.environ.get(ENV_VAR, "0").strip().lower() in ("1", "true", "yes", "on")


def helpers_interpreted() -> bool:
    """Whether Triton's own ``@triton.jit`` helpers (``triton.language.standard``) are
    interpreted: an interpreted kernel that calls a compiled helper fails ("Cannot call
    @triton.jit'd outside of the scope of a kernel"), which happens when Triton was imported
    before ``TRITON_INTERPRET=1`` was set and the kernel after."""
    try:
        from triton.language import standard
    except ImportError:
        return False
    return _interpreted(standard.sigmoid)


def environment_mode() -> TritonMode:
    """The mode a kernel imported now would get (from ``TRITON_INTERPRET`` and whether a CUDA
    device exists; imports neither Triton nor any kernel, so it is cheap enough for target
    discovery)."""
    if _interpret_requested():
        return TritonMode(
            "interpreter",
            f"{ENV_VAR}=1 is set: Triton kernels run on the CPU through Triton's interpreter "
            "(slow; no timing, races or hardware accumulation)")
    if torch.cuda.is_available():
        return TritonMode("cuda", f"a CUDA device is present and {ENV_VAR} is not set: "
                                  "compiled Triton kernels on CUDA")
    return TritonMode(
        "unavailable",
        f"no CUDA device and {ENV_VAR} is not set (set {ENV_VAR}=1 to run the Triton kernels "
        "on the CPU through Triton's interpreter)")


def environment_note() -> str:
    """``Triton here: MODE (REASON)`` for :func:`environment_mode`: the ``detail`` of the
    targets whose kernels are Triton's, appended to their description."""
    mode = environment_mode()
    return f"Triton here: {mode.name} ({mode.reason})"
