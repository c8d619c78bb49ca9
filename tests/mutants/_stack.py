"""Shared pieces of the stack mutants: the reference mHC whose ``stack(L)`` returns a stack of a
given (mutant) class, each later sublayer built by the mutant's own factory at
``layer_index + k`` with seed ``seed + k`` (its own parameters, as the reference targets do);
and :class:`PreviousInputStack`, DeepSeek-V4.1's single pass on reference sublayers (right, and
declared: the base of the previous-input mutants; :func:`make_previous_input` is its target)."""

from __future__ import annotations

import functools
from typing import Any

import torch

from hcspec.reference import ManifoldHyperConnection, Weights
from hcspec.reference.connection import read, write
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


class PreviousInputStack(HyperConnectionStack):
    """DeepSeek-V4.1's single pass on reference sublayers, declared ``pre_mix_from =
    "previous_input"``: sublayer k computes ``(h_pre,k, h_post,k, H_res,k)`` from its input
    ``X_k``, reads ``X_k`` with the carried pre-mix ``p_k`` (``p_0 = e_0``, the declared
    ``initial_pre_mix``; ``p_k = h_pre,k−1``, computed from ``X_{k−1}``) and writes with its own
    ``h_post,k`` and ``H_res,k``; ``weights`` reports ``(p_k, h_post,k, H_res,k)``. A mutant
    overrides :meth:`_next_pre`, the pre-mix carried out of sublayer k."""

    pre_mix_from = "previous_input"

    def __init__(self, sublayers: Any, *, carry: bool = True) -> None:
        super().__init__(sublayers, carry=carry)
        self.initial_pre_mix = torch.zeros(self.n, dtype=torch.float64)
        self.initial_pre_mix[0] = 1.0

    def _run(self, x: torch.Tensor,
             branches: Any) -> tuple[torch.Tensor, list[Weights]]:
        if len(branches) != self.layers:
            raise ValueError(f"expected {self.layers} branches, got {len(branches)}")
        pre = self.initial_pre_mix.to(x).expand(*x.shape[:2], self.n)
        used: list[Weights] = []
        for k, branch in enumerate(branches):
            own_pre, h_post, H_res = self.sublayer(k).weights(x)
            used.append((pre, h_post, H_res))
            written = write(x, self._branch(branch, read(x, pre)), h_post, H_res)
            pre = self._next_pre(k, written, own_pre)
            x = written
        return x, used

    def _next_pre(self, k: int, written: torch.Tensor, own_pre: torch.Tensor) -> torch.Tensor:
        """The pre-mix carried into sublayer k + 1: sublayer k's, from its input (V4.1)."""
        del k, written
        return own_pre


def make_previous_input(n: int, d: int, *, layer_index: int = 0,
                        dtype: torch.dtype = torch.float64, device: str = "cpu",
                        seed: int = 0) -> Any:
    """Target: the reference mHC whose stacks are (right) :class:`PreviousInputStack`."""
    return make_stacked(PreviousInputStack, n, d, layer_index, dtype, device, seed)
