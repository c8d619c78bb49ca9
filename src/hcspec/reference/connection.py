"""The hyper-connection update shared by static HC, dynamic HC and mHC, and their base class.

For one token with state ``X ∈ R^{n×d}`` (streams are rows) and weights
``h_pre, h_post ∈ R^n``, ``H_res ∈ R^{n×n}`` (the row convention of docs/reference.md;
HC arXiv:2409.19606 Eq. 3–5 with ``h_pre = A_m``, ``h_post = Bᵀ``, ``H_res = A_rᵀ``;
mHC arXiv:2512.24880 Eq. 3):

    x_in = h_preᵀ X              (read: one d-vector)
    z    = F(x_in)               (the branch, called once)
    X'   = H_res X + h_post zᵀ   (mix the streams and write the branch output back)

The kinds differ only in how they produce the weights; :class:`HyperConnection` holds the
rest (validation, the update of :mod:`hcspec.reference.step`, stream expand/reduce, the
stack). ``Branch``, ``Weights``, ``apply_connection``, ``read`` and ``write`` are
:mod:`hcspec.reference.step`'s, re-exported here.
"""

from __future__ import annotations

import copy
from abc import abstractmethod
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import ClassVar, TypeVar

import torch
from torch import nn

from hcspec.reference import _checks
from hcspec.reference.stack import HyperConnectionStack
from hcspec.reference.step import Branch, Weights, apply_connection, read, write
from hcspec.reference.streams import expand_streams, reduce_streams

_Forward = TypeVar("_Forward", bound=Callable[..., torch.Tensor])

_CARRIABLE: set[Callable[..., torch.Tensor]] = set()
"""The forwards marked :func:`carriable` (the very function objects: a wrapper made with
``functools.wraps`` is not one of them)."""


def carriable(forward: _Forward) -> _Forward:
    """Mark a ``forward`` that computes exactly :meth:`HyperConnection.weights`, then
    :func:`~hcspec.reference.step.read`, the branch and :func:`~hcspec.reference.step.write`:
    :meth:`HyperConnection.stack` may then carry the pre-mix past it (a forward that does
    something else, e.g. a subclass's override, is not marked and runs as it is)."""
    _CARRIABLE.add(forward)
    return forward


class HyperConnection(nn.Module):
    """Base class: one hyper-connected sublayer, ``module(x, branch) -> x_next``.

    Subclasses implement :meth:`_weights`. Attributes ``n`` (expansion rate), ``d`` (hidden
    size) and ``kind`` (``"hc-static"``, ``"hc-dynamic"`` or ``"mhc"``) follow the conformance
    kit's adapter protocol, as do :meth:`weights`, :meth:`expand` and :meth:`reduce`.

    NaN/inf: values are not checked and no error is raised (a check would synchronise with the
    device on every call). The computation is per token, so a non-finite entry only affects its
    own token (unless the branch mixes tokens, as attention does). Within the token, NaN
    reaches every entry: ``x_in`` sums all streams and ``0 · NaN = NaN``, so even a zero
    weight does not shield it. ±inf does the same for dynamic HC and mHC, whose norms turn it
    into NaN while computing the weights; in static HC it reaches the entries it is mixed into
    (with NaN where ``inf − inf`` or ``0 · inf`` arise).
    """

    kind: ClassVar[str]
    conventions: ClassVar[Mapping[str, object]] = MappingProxyType({
        "branch_input": "x_in", "reduce": "sum",
        "notes": "hcspec reference: branch receives x_in, reduce sums the streams",
    })
    """The conventions declared to the conformance kit, as a plain mapping of the fields of
    the kit's ``Conventions`` (its ``protocol`` module): the branch receives ``x_in =
    h_preᵀ X`` itself (the pre-norm lives inside the branch) and :meth:`reduce` sums the
    streams (HC's ``1ᵀ X``). mHC adds its rounds through its ``sinkhorn_iterations``
    attribute."""
    n: int
    d: int
    successor: Callable[[int], HyperConnection] | None = None
    """How :meth:`stack` builds the sublayer ``k`` places after this one (k ≥ 1): the factories
    of :mod:`hcspec.reference.targets` set it to build ``factory(n, d, layer_index=layer_index
    + k, seed=seed + k)`` (fresh parameters of its own); None (a module built directly):
    :meth:`stack` uses deep copies of this module (the same values in tensors of their own)."""

    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        self.n = _checks.positive_int("n", n)
        self.d = _checks.positive_int("d", d)

    def stack(self, layers: int, *, carry: bool | None = None) -> HyperConnectionStack:
        """``layers`` consecutive sublayers starting with this one (the conformance kit's
        ``stack`` capability): sublayer 0 is this module itself (its parameters, not a copy),
        sublayer k ≥ 1 is built by :attr:`successor` (or deep-copied).

        ``carry``: True runs the single pass with a carried pre-mix, False each sublayer's own
        ``forward`` (:class:`hcspec.reference.stack.HyperConnectionStack`). None (default):
        carried when this module's ``forward`` is the reference's own (which computes exactly
        ``weights``, the read and the write the carried pass recombines); a subclass that
        overrides ``forward`` gets its own forward, sublayer by sublayer, since a carried pass
        would bypass it.

        Raises:
            ValueError: ``layers`` is not a positive int.
        """
        count = _checks.positive_int("layers", layers)
        if carry is None:
            carry = type(self).forward in _CARRIABLE
        build = self.successor
        later = [build(k) if build is not None else copy.deepcopy(self)
                 for k in range(1, count)]
        return HyperConnectionStack([self, *later], carry=carry)

    @abstractmethod
    def _weights(self, x: torch.Tensor) -> Weights:
        """Effective weights for an already validated ``x [B, T, n, d]``."""

    def _check_state(self, x: torch.Tensor) -> torch.Tensor:
        x = _checks.stream_state(x, self.n, self.d)
        _checks.same_dtype_device(x, next(self.parameters()))
        return x

    def weights(self, x: torch.Tensor) -> Weights:
        """Effective per-token weights ``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])``.

        Shapes: ``x [B, T, n, d]``. Static weights are broadcast (expanded views, not copies).
        Dtype/device: those of ``x`` (which must match the module's parameters).

        Raises:
            TypeError: ``x`` is not a tensor or has another dtype/device than the parameters.
            ValueError: ``x`` is not ``[B, T, n, d]`` with this module's ``n`` and ``d``.
        """
        return self._weights(self._check_state(x))

    @carriable
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` with this module's weights at ``x``.

        Shapes: ``x [B, T, n, d] -> [B, T, n, d]``; ``branch: [B, T, d] -> [B, T, d]``, called
        exactly once. Dtype/device: those of ``x``.

        Raises:
            TypeError: see :meth:`weights`; also a branch that does not return a tensor.
            ValueError: see :meth:`weights`; also a branch returning a shape other than
                ``[B, T, d]`` (the message names expected and received shapes).
        """
        x = self._check_state(x)
        return apply_connection(x, branch, *self._weights(x))

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """Replicate ``h [B, T, d]`` into this module's ``n`` streams (:func:`expand_streams`).

        Raises:
            TypeError, ValueError: as :func:`hcspec.reference.streams.expand_streams`, and when
                ``h``'s last axis is not ``d``.
        """
        return expand_streams(_checks.hidden_state(h, self.d), self.n)

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum the streams of ``x [B, T, n, d]`` into ``[B, T, d]`` (:func:`reduce_streams`).

        Raises:
            TypeError, ValueError: ``x`` is not ``[B, T, n, d]`` with this ``n`` and ``d``.
        """
        return reduce_streams(_checks.stream_state(x, self.n, self.d))

    def extra_repr(self) -> str:
        return f"n={self.n}, d={self.d}"


__all__ = ["Branch", "HyperConnection", "Weights", "apply_connection", "carriable", "read",
           "write"]
