"""Crossing between torch and another array framework: the :class:`Framework` protocol (how to
convert and how to take a vjp) and :func:`cross`, which wraps a framework function as a
``torch.autograd.Function`` whose backward is the framework's own vjp."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import torch
from torch.autograd.function import once_differentiable


class Framework(Protocol):
    """An array framework as the bridge uses it.

    Attributes:
        name: the framework's name, for messages (``"mlx"``).
    """

    name: str

    def asarray(self, value: np.ndarray, dtype: str) -> Any:
        """A framework array of dtype ``dtype`` (a torch dtype's name, ``"float64"``,
        ``"bfloat16"``) holding ``value`` (float32 where NumPy lacks ``dtype``)."""
        ...

    def to_numpy(self, array: Any) -> np.ndarray:
        """``array`` on the host as NumPy (a dtype NumPy lacks, as float32, exactly)."""
        ...

    def dtype_name(self, array: Any) -> str:
        """The torch dtype name of ``array``'s dtype (``"float32"``)."""
        ...

    def call(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any]) -> Sequence[Any]:
        """``fn(*primals)``, evaluated."""
        ...

    def vjp(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any],
            cotangents: Sequence[Any]) -> Sequence[Any]:
        """The vector-Jacobian product of ``fn`` at ``primals`` with ``cotangents`` (one per
        output of ``fn``): one array per primal, shaped like it."""
        ...


def _to_framework(framework: Framework, t: torch.Tensor) -> Any:
    host = t.detach().to("cpu")
    if host.dtype == torch.bfloat16:  # NumPy has no bfloat16: float32 holds it exactly
        host = host.to(torch.float32)
    # always a copy (np.array copies): the framework never sees the caller's storage, its
    # strides or a chance to write into it (the properties of those bug classes are then not
    # applicable on a bridged target: Conventions.bridged)
    return framework.asarray(np.array(host.numpy(), copy=True, order="C"),
                             str(t.dtype).removeprefix("torch."))


def _to_torch(framework: Framework, array: Any, device: torch.device,
              dtype: torch.dtype | None = None) -> torch.Tensor:
    name = framework.dtype_name(array)
    own = getattr(torch, name, None)
    if not isinstance(own, torch.dtype):
        raise TypeError(f"{framework.name}: the array dtype {name!r} has no torch equivalent")
    host = torch.from_numpy(np.array(framework.to_numpy(array), copy=True))
    return host.to(device=device, dtype=dtype or own)


class _Call:
    """One framework function on flat arrays, with how its results come back to torch."""

    def __init__(self, framework: Framework, fn: Callable[..., Sequence[Any]],
                 device: torch.device) -> None:
        self.framework, self.fn, self.device = framework, fn, device

    def forward(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        arrays = [_to_framework(self.framework, t) for t in inputs]
        outputs = self.framework.call(self.fn, arrays)
        return tuple(_to_torch(self.framework, o, self.device) for o in outputs)

    def backward(self, inputs: Sequence[torch.Tensor], grads: Sequence[torch.Tensor],
                 wanted: Sequence[bool]) -> tuple[torch.Tensor | None, ...]:
        arrays = [_to_framework(self.framework, t) for t in inputs]
        cotangents = [_to_framework(self.framework, g) for g in grads]
        pulled = self.framework.vjp(self.fn, arrays, cotangents)
        if len(pulled) != len(inputs):
            raise RuntimeError(f"{self.framework.name}: vjp returned {len(pulled)} arrays for "
                               f"{len(inputs)} primals")
        return tuple(
            _to_torch(self.framework, g, t.device, t.dtype) if want else None
            for g, t, want in zip(pulled, inputs, wanted, strict=True))


class _Crossing(torch.autograd.Function):
    """``call``'s framework function as a torch op whose backward is the framework's vjp."""

    @staticmethod
    def forward(ctx: Any, call: _Call, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.call = call
        ctx.save_for_backward(*inputs)
        return call.forward(inputs)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        inputs = ctx.saved_tensors
        return (None, *ctx.call.backward(inputs, grads, ctx.needs_input_grad[1:]))


def cross(framework: Framework, fn: Callable[..., Sequence[Any]],
          *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Run the framework function ``fn(*arrays) -> sequence of arrays`` on torch tensors.

    The inputs cross to the framework (NumPy on the host, dtypes kept), ``fn`` runs there, its
    outputs come back as torch tensors on the first input's device, each in the torch dtype of
    the framework array's dtype. The result is differentiable: its backward sends the
    cotangents to the framework and returns ``framework.vjp(fn, arrays, cotangents)``, each
    gradient cast to its input's dtype (once differentiable).

    Raises:
        ValueError: no input.
        TypeError: an output dtype without a torch equivalent.
        RuntimeError: the framework's vjp returned another number of arrays than primals.
    """
    if not inputs:
        raise ValueError("cross: give at least one input tensor")
    outputs: tuple[torch.Tensor, ...] = _Crossing.apply(  # type: ignore[no-untyped-call]
        _Call(framework, fn, inputs[0].device), *inputs)
    return outputs
