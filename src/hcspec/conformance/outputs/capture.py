"""What a replayed case compared, kept for a person: the inputs the kit drew and every
elementwise comparison (the target's tensor, the expected one, the scale of the error).

Off by default and free then: :func:`note_comparison` and :func:`note_input` return at once
unless the calling thread is inside :func:`capturing`. :mod:`hcspec.conformance.replay` turns
it on while it replays one failing case (``--save-failures``, the replay script, ``--pdb``), to
save the tensors and print the entries that disagree. The hooks sit where every check passes:
the scaled error of two tensors (``metrics.scaled_error``) and the case's state
(``Inputs.state``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Comparison:
    """One elementwise comparison: ``error = max|got − want| / max(1, scale)``.

    Attributes:
        got: the target's tensor (float64, CPU, detached copy).
        want: the expected tensor, same shape (float64, CPU).
        scale: the scale the error is divided by (``max(1, scale)``).
        error: the scaled error the check computed.
    """

    got: torch.Tensor
    want: torch.Tensor
    scale: float
    error: float


@dataclass
class Capture:
    """What one replay compared, in order.

    Attributes:
        comparisons: every :class:`Comparison`, in the order the check made them.
        inputs: the case's inputs by name (``state``, ``state_2``, ...), in the dtype they
            were drawn in, on the CPU.
    """

    comparisons: list[Comparison] = field(default_factory=list)
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)

    def matching(self, error: float | None) -> Comparison | None:
        """The last comparison whose error is ``error`` (the failing comparison's figure, as
        recorded by the check), else None."""
        if error is None:
            return None
        for comparison in reversed(self.comparisons):
            if comparison.error == error:
                return comparison
        return None


_ACTIVE: contextvars.ContextVar[Capture | None] = contextvars.ContextVar(
    "hcspec_capture", default=None)


@contextlib.contextmanager
def capturing() -> Iterator[Capture]:
    """Within the block, in the calling thread only, the comparisons and inputs are kept in
    the :class:`Capture` it yields."""
    captured = Capture()
    token = _ACTIVE.set(captured)
    try:
        yield captured
    finally:
        _ACTIVE.reset(token)


def _copy(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu").clone()


def note_comparison(got: torch.Tensor, want: torch.Tensor, scale: float | None,
                    error: float) -> None:
    """Keep one comparison when capturing (nothing otherwise). ``scale`` None means
    ``max|want|`` (as the scaled error defines it); tensors of different shapes are not
    kept (their error is ``inf``: no entry to show)."""
    captured = _ACTIVE.get()
    if captured is None or got.shape != want.shape:
        return
    b = want.detach().to("cpu", torch.float64)
    used = float(b.abs().max()) if scale is None and b.numel() else float(scale or 0.0)
    captured.comparisons.append(Comparison(_copy(got).to(torch.float64), b.clone(), used,
                                           error))


def note_input(name: str, tensor: torch.Tensor) -> None:
    """Keep one input of the case when capturing, under ``name`` (``name_2``, ... when it
    was kept already)."""
    captured = _ACTIVE.get()
    if captured is None:
        return
    key, count = name, 1
    while key in captured.inputs:
        count += 1
        key = f"{name}_{count}"
    captured.inputs[key] = _copy(tensor)
