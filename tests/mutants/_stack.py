"""Shared piece of the stack mutants: the reference mHC whose ``stack(L)`` returns a stack of a
given (mutant) class, each later sublayer built by the mutant's own factory at
``layer_index + k`` with seed ``seed + k`` (its own parameters, as the reference targets do)."""

from __future__ import annotations

import functools
from typing import Any

import torch

from hcspec.reference import ManifoldHyperConnection
from hcspec.reference.stack import HyperConnectionStack
from tests.mutants._base import build, mhc_conventions


class StackedMHC(ManifoldHyperConnection):
    """The reference mHC; :meth:`stack` builds a :attr:`stack_class` (set by the mutant)."""

    stack_class: type[HyperConnectionStack] = HyperConnectionStack

    def stack(self, layers: int, *, carry: bool | None = None) -> HyperConnectionStack:
        carried = True if carry is None else carry
        built = super().stack(layers, carry=carried)
        return self.stack_class(list(built.sublayers), carry=carried)  # type: ignore[arg-type]


def make_stacked(stack_class: type[HyperConnectionStack], n: int, d: int, layer_index: int,
                 dtype: torch.dtype, device: str, seed: int) -> Any:
    """A :class:`StackedMHC` whose stacks are ``stack_class``, built as the reference target
    (parameters drawn from ``seed``), declaring the reference's 20 rounds."""
    cls = type(f"{stack_class.__name__}MHC", (StackedMHC,), {"stack_class": stack_class})
    module: Any = build(cls, n, d, layer_index, dtype, device, seed, mhc_conventions(20))
    module.successor = functools.partial(_successor, stack_class, n, d, layer_index, dtype,
                                         device, seed)
    return module


def _successor(stack_class: type[HyperConnectionStack], n: int, d: int, layer_index: int,
               dtype: torch.dtype, device: str, seed: int, k: int) -> Any:
    return make_stacked(stack_class, n, d, layer_index + k, dtype, device, seed + k)
