"""Input validation shared by the reference modules.

Every check raises with a message that names what was expected and what was received, so a
caller sees ``expected x of shape [B, T, n=4, d=8], got (2, 3, 8, 4)`` rather than an einsum
error. The checks read shapes, dtypes and devices only: they never look at values (no
finiteness check), so they cost no host–device synchronisation on CUDA.
"""

from __future__ import annotations

import torch


def positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is an ``int`` ≥ 1 (``bool`` excluded).

    Raises:
        ValueError: when ``value`` is not a positive integer; the message names it.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def non_negative_int(name: str, value: object) -> int:
    """Return ``value`` if it is an ``int`` ≥ 0 (``bool`` excluded).

    Raises:
        ValueError: when ``value`` is not a non-negative integer; the message names it.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _tensor(name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def stream_state(x: object, n: int, d: int, name: str = "x") -> torch.Tensor:
    """Check that ``x`` is a multi-stream state ``[B, T, n, d]`` with the given ``n`` and ``d``.

    Raises:
        TypeError: when ``x`` is not a tensor.
        ValueError: wrong rank or wrong trailing ``(n, d)``; the message gives both shapes.
    """
    t = _tensor(name, x)
    if t.dim() != 4 or t.shape[-2:] != (n, d):
        raise ValueError(
            f"expected {name} of shape [B, T, n={n}, d={d}], got {tuple(t.shape)}"
        )
    return t


def hidden_state(h: object, d: int, name: str = "h") -> torch.Tensor:
    """Check that ``h`` is a single-stream hidden state ``[B, T, d]``.

    Raises:
        TypeError: when ``h`` is not a tensor.
        ValueError: wrong rank or wrong ``d``; the message gives both shapes.
    """
    t = _tensor(name, h)
    if t.dim() != 3 or t.shape[-1] != d:
        raise ValueError(f"expected {name} of shape [B, T, d={d}], got {tuple(t.shape)}")
    return t


def branch_output(z: object, expected: torch.Size) -> torch.Tensor:
    """Check that a branch returned a tensor of exactly the branch input's shape ``[B, T, d]``.

    Raises:
        TypeError: when the branch did not return a tensor.
        ValueError: when its shape differs from ``expected``; the message gives both.
    """
    t = _tensor("branch output", z)
    if t.shape != expected:
        raise ValueError(
            f"branch must return the shape of its input [B, T, d] = {tuple(expected)}, "
            f"got {tuple(t.shape)}"
        )
    return t


def same_dtype_device(x: torch.Tensor, like: torch.Tensor, name: str = "x") -> None:
    """Check that ``x`` has the dtype and device of the module's parameters (``like``).

    Raises:
        TypeError: on a dtype or device mismatch; the message names expected and received.
    """
    if x.dtype != like.dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but the module's parameters are {like.dtype}; "
            f"convert one of them (e.g. module.to({like.dtype}) or x.to(...))"
        )
    if x.device != like.device:
        raise TypeError(
            f"{name} is on {x.device} but the module's parameters are on {like.device}"
        )
