"""Observing an impl: its forward and reported weights, validated, its weights probed through
the branch, and what the branch should receive under the declared conventions."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hcspec.conformance import probes
from hcspec.conformance.machinery.errors import NotApplicable, PropertyFailure
from hcspec.conformance.protocol import (
    Conventions,
    HyperConnectionImpl,
    Weights,
    has_expand,
    has_reduce,
    has_weights,
)
from hcspec.conformance.strategies import Case, CountingBranch


@dataclass(frozen=True)
class Observer:
    """Calls an impl and checks what it returns.

    Attributes:
        conventions: the declared conventions (probing and the branch input follow them).
    """

    conventions: Conventions

    def output_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype ``forward`` (and ``weights``, unless :meth:`weights_dtype` is declared)
        must return for an input of ``dtype``: the declared
        :attr:`~hcspec.conformance.protocol.Conventions.output_dtype`, else ``dtype``."""
        return self.conventions.output_dtype or dtype

    def weights_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype ``weights`` must return for an input of ``dtype``: the declared
        :attr:`~hcspec.conformance.protocol.Conventions.weights_dtype`, else
        :meth:`output_dtype`."""
        return self.conventions.weights_dtype or self.output_dtype(dtype)

    def describe_weights_dtype(self, dtype: torch.dtype) -> str:
        """``"torch.float32 (declared weights_dtype)"``, else :meth:`describe_output_dtype`."""
        if self.conventions.weights_dtype is None:
            return self.describe_output_dtype(dtype)
        return f"{self.conventions.weights_dtype} (declared weights_dtype)"

    def describe_output_dtype(self, dtype: torch.dtype) -> str:
        """``"torch.float64 (the input's)"`` or ``"torch.bfloat16 (declared output_dtype)"``."""
        if self.conventions.output_dtype is None:
            return f"{dtype} (the input's)"
        return f"{self.conventions.output_dtype} (declared output_dtype)"

    @staticmethod
    def forward(impl: HyperConnectionImpl, x: torch.Tensor, branch: CountingBranch, *,
                copy: bool = True) -> torch.Tensor:
        """``impl.forward(x, branch)``, its output checked to be a tensor of ``x``'s shape.
        The impl receives a copy of ``x`` unless ``copy=False`` (only
        ``state.input_unchanged`` passes the state itself; see
        :func:`hcspec.conformance.probes.forward_on_copy`).

        Raises:
            PropertyFailure: wrong type/shape or the branch was not called.
        """
        try:
            return probes.call(impl, x, branch, copy=copy)
        except probes.ProbeError as exc:
            raise PropertyFailure(str(exc)) from exc

    @staticmethod
    def weights(impl: HyperConnectionImpl, x: torch.Tensor) -> Weights:
        """``impl.weights(x)`` on a copy of ``x`` (an autograd clone, so the weights stay
        differentiable w.r.t. ``x``), checked for shapes ``[B,T,n]``, ``[B,T,n]``,
        ``[B,T,n,n]``.

        Raises:
            PropertyFailure: the impl has no ``weights``, or it did not return a triple of
                tensors of those shapes.
        """
        if not has_weights(impl):
            raise PropertyFailure("the impl has no weights(x), although the run's first impl "
                                  "offered it")
        got: object = impl.weights(x.clone())
        batch, tokens, n, _ = x.shape
        expected = ((batch, tokens, n), (batch, tokens, n), (batch, tokens, n, n))
        names = ("h_pre", "h_post", "H_res")
        if not (isinstance(got, (tuple, list)) and len(got) == 3):
            raise PropertyFailure(f"weights(x) returned {type(got).__name__}, expected a tuple "
                                  "(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])")
        for name, value, shape in zip(names, got, expected, strict=True):
            if not isinstance(value, torch.Tensor):
                raise PropertyFailure(
                    f"weights(x): {name} is {type(value).__name__}, expected a tensor")
            if tuple(value.shape) != shape:
                raise PropertyFailure(f"weights(x): {name} has shape {list(value.shape)}, "
                                      f"expected {list(shape)}")
        return (got[0], got[1], got[2])

    @staticmethod
    def expand(impl: HyperConnectionImpl, h: torch.Tensor) -> object:
        """``impl.expand(h)`` (unchecked result: the shape family checks it).

        Raises:
            PropertyFailure: the impl has no ``expand``.
        """
        if not has_expand(impl):
            raise PropertyFailure("the impl has no expand(h), although the run's first impl "
                                  "offered it")
        return impl.expand(h)

    @staticmethod
    def reduce(impl: HyperConnectionImpl, x: torch.Tensor) -> object:
        """``impl.reduce(x)`` (unchecked result: the shape family checks it).

        Raises:
            PropertyFailure: the impl has no ``reduce``.
        """
        if not has_reduce(impl):
            raise PropertyFailure("the impl has no reduce(x), although the run's first impl "
                                  "offered it")
        return impl.reduce(x)

    def probe(self, impl: HyperConnectionImpl, x: torch.Tensor,
              case: Case) -> probes.ProbedWeights:
        """Black-box weights of ``impl`` at ``x`` (see :mod:`hcspec.conformance.probes`).
        A property that probes declares
        :data:`hcspec.conformance.machinery.requirements.PROBING`.

        Raises:
            PropertyFailure: the impl cannot be probed (wrong output, branch not called).
            NotApplicable: the impl declares ``state_domain="replicated"`` (a property that
                probes without declaring the requirement).
        """
        if self.conventions.state_domain == "replicated":
            raise NotApplicable(
                "black-box probing of H_res and h_pre needs a full-row-rank [n, d] state; the "
                "impl declares state_domain='replicated' (X = 1_n hᵀ, rank 1)")
        try:
            return probes.probe(impl, x, self.conventions, seed=case.seed)
        except probes.ProbeError as exc:
            raise PropertyFailure(str(exc)) from exc

    def branch_input(self, x_in: torch.Tensor) -> torch.Tensor:
        """What the branch should receive for the aggregate ``x_in``, per the declared
        ``branch_input`` convention (float64)."""
        kind, eps = self.conventions.branch_input, self.conventions.norm_eps
        if kind == "rms_norm":
            return x_in / torch.sqrt(x_in.pow(2).mean(-1, keepdim=True) + eps)
        if kind == "layer_norm":
            centred = x_in - x_in.mean(-1, keepdim=True)
            return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps)
        return x_in
