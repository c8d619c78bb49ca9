"""Shared pieces of the third-party adapters: reading the tensors a package computes, the
checks every adapter applies to what it is given (:mod:`hcspec.conformance.protocol.validation`,
re-exported here), and the delegation of ``parameters``,
``buffers`` and the training mode to the wrapped module (:class:`WrapsModule`).

:class:`CallRecorder` is a ``torch.overrides.TorchFunctionMode``: inside its ``with`` block it
sees every torch function and tensor method call, stores the ones it was asked for (function,
positional arguments, result) and returns each result unchanged, so the package computes
exactly what it computes without it. Adapters use it to read the package's own intermediate
values (the mixing matrix it really multiplied with) instead of re-deriving them from the
parameters with a re-typed formula. When a package changes so that the expected calls are not
there, the adapter raises :class:`PackageChanged` rather than read the wrong tensor.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch.overrides import TorchFunctionMode

from hcspec.conformance.protocol.validation import check_branch_output, check_state
from hcspec.conformance.seeding import seeded_global_rng

_Wrapper = TypeVar("_Wrapper", bound="WrapsModule")


class WrapsModule:
    """Mixin for an adapter that wraps one ``torch.nn.Module`` of a package in ``self.module``
    (set by the adapter's ``__init__``): ``parameters()``, ``buffers()``, ``train(mode)``,
    ``eval()`` and ``training`` are the wrapped module's (``train``/``eval`` return the adapter,
    as ``nn.Module``'s return the module). The adapter's class docstring says what the
    parameters are.
    """

    module: Any

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The wrapped module's parameters (``nn.Module.parameters``, recursing)."""
        params: Iterator[torch.nn.Parameter] = self.module.parameters()
        return params

    def buffers(self) -> Iterator[torch.Tensor]:
        """The wrapped module's buffers (``nn.Module.buffers``, recursing)."""
        buffers: Iterator[torch.Tensor] = self.module.buffers()
        return buffers

    def train(self: _Wrapper, mode: bool = True) -> _Wrapper:
        """Training (``True``) or evaluation mode of the wrapped module; returns the adapter."""
        self.module.train(mode)
        return self

    def eval(self: _Wrapper) -> _Wrapper:
        """Evaluation mode (``train(False)``)."""
        return self.train(False)

    @property
    def training(self) -> bool:
        """Whether the wrapped module is in training mode."""
        return bool(self.module.training)


class PackageChanged(RuntimeError):
    """The wrapped package no longer computes what its adapter reads (e.g. a different number
    of ``einsum`` calls): the adapter was written for another version. The message names the
    version the adapter was written for and what it found."""


@dataclass(frozen=True)
class Call:
    """One recorded torch call.

    Attributes:
        func: the torch function or tensor method called.
        args: its positional arguments, as given.
        result: what it returned (the same object the package received).
    """

    func: Callable[..., Any]
    args: tuple[Any, ...]
    result: Any


class CallRecorder(TorchFunctionMode):
    """Record the torch calls made inside the ``with`` block whose function is in ``wanted``
    (all of them when ``wanted`` is empty); results are returned unchanged (autograd included).
    """

    def __init__(self, wanted: Sequence[Callable[..., Any]] = ()) -> None:
        super().__init__()
        self.wanted = tuple(wanted)
        self.calls: list[Call] = []

    def __torch_function__(
        self, func: Callable[..., Any], types: Sequence[type], args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        result = func(*args, **(kwargs or {}))
        if not self.wanted or func in self.wanted:
            self.calls.append(Call(func, tuple(args), result))
        return result

    def of(self, func: Callable[..., Any]) -> list[Call]:
        """The recorded calls of ``func``, in call order."""
        return [c for c in self.calls if c.func is func]


@contextlib.contextmanager
def seeded(seed: int, device: str = "cpu") -> Iterator[None]:
    """Seed torch's global generator (CPU, and ``device`` when it is CUDA) for a package
    constructor without changing the caller's random state — the kit's
    :func:`hcspec.conformance.seeding.seeded_global_rng`, as the runner uses for each case — so
    ``make(..., seed=s)`` is reproducible and has no side effect.

    Raises:
        ValueError: ``seed < 0``.
    """
    if seed < 0:
        raise ValueError(f"seed: expected >= 0, got {seed}")
    with seeded_global_rng(seed, device):
        yield


__all__ = ["Call", "CallRecorder", "PackageChanged", "WrapsModule", "check_branch_output",
           "check_state", "seeded"]
