"""The hyper-connection update shared by static HC, dynamic HC and mHC, and their base class.

For one token with state ``X ∈ R^{n×d}`` (streams are rows) and weights
``h_pre, h_post ∈ R^n``, ``H_res ∈ R^{n×n}`` (the row convention of docs/reference.md;
HC arXiv:2409.19606 Eq. 3–5 with ``h_pre = A_m``, ``h_post = Bᵀ``, ``H_res = A_rᵀ``;
mHC arXiv:2512.24880 Eq. 3):

    x_in = h_preᵀ X              (read: one d-vector)
    z    = F(x_in)               (the branch, called once)
    X'   = H_res X + h_post zᵀ   (mix the streams and write the branch output back)

The kinds differ only in how they produce the weights; :class:`HyperConnection` holds the
rest (validation, the update, stream expand/reduce).
"""

from __future__ import annotations

import copy
from abc import abstractmethod
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from hcspec.reference import _checks
from hcspec.reference.streams import expand_streams, reduce_streams

if TYPE_CHECKING:
    from hcspec.reference.stack import HyperConnectionStack

Branch = Callable[[torch.Tensor], torch.Tensor]
"""A sublayer ``F``: ``[B, T, d] -> [B, T, d]`` (e.g. pre-norm attention or FFN)."""

Weights = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""Effective per-token weights ``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])``."""


def apply_connection(
    x: torch.Tensor,
    branch: Branch,
    h_pre: torch.Tensor,
    h_post: torch.Tensor,
    H_res: torch.Tensor,
) -> torch.Tensor:
    """One hyper-connected sublayer with given weights: ``X' = H_res X + h_post F(h_preᵀ X)ᵀ``.

    Shapes: ``x [B, T, n, d]``, ``h_pre [B, T, n]``, ``h_post [B, T, n]``,
    ``H_res [B, T, n, n]`` -> ``[B, T, n, d]``; ``branch`` maps ``[B, T, d] -> [B, T, d]`` and is
    called exactly once. Autograd flows to ``x``, the three weights and the branch.
    Dtype/device: standard torch promotion of the inputs (the modules pass matching ones).
    Source: HC Eq. 3–5, mHC Eq. 3, in the row form of docs/reference.md.

    Raises:
        TypeError: a non-tensor input, or a branch that does not return a tensor.
        ValueError: ``x`` is not 4-D, a weight does not match ``x``'s ``[B, T, n]``, or the
            branch returns a shape other than ``[B, T, d]``; messages name both shapes.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"expected x of shape [B, T, n, d], got {shape}")
    batch, tokens, n, _ = x.shape
    for name, weight, expected in (
        ("h_pre", h_pre, (batch, tokens, n)),
        ("h_post", h_post, (batch, tokens, n)),
        ("H_res", H_res, (batch, tokens, n, n)),
    ):
        if not isinstance(weight, torch.Tensor) or tuple(weight.shape) != expected:
            got = tuple(weight.shape) if isinstance(weight, torch.Tensor) else weight
            raise ValueError(f"expected {name} of shape {list(expected)}, got {got}")
    x_in = read(x, h_pre)
    z = _checks.branch_output(branch(x_in), x_in.shape)
    return write(x, z, h_post, H_res)


def read(x: torch.Tensor, h_pre: torch.Tensor) -> torch.Tensor:
    """The branch input ``x_in = h_preᵀ X`` per token: ``x [B, T, n, d]``, ``h_pre [B, T, n]``
    -> ``[B, T, d]`` (HC Eq. 3 with ``A_m = h_pre``; mHC Eq. 3's ``H_pre x_l``). Shapes are not
    checked (:func:`apply_connection` checks them)."""
    return (h_pre.unsqueeze(-2) @ x).squeeze(-2)


def write(x: torch.Tensor, z: torch.Tensor, h_post: torch.Tensor,
          H_res: torch.Tensor) -> torch.Tensor:
    """The new state ``X' = H_res X + h_post zᵀ`` per token: ``x [B, T, n, d]``,
    ``z [B, T, d]``, ``h_post [B, T, n]``, ``H_res [B, T, n, n]`` -> ``[B, T, n, d]`` (HC
    Eq. 4–5; mHC Eq. 3). Shapes are not checked (:func:`apply_connection` checks them)."""
    mixed = H_res @ x  # H_res X per token: a fresh tensor, not a view
    # mixed + h_post zᵀ, accumulated in place (the matmul's backward needs its inputs, not its
    # output; measured ~15% faster than out of place on CPU)
    return mixed.addcmul_(h_post.unsqueeze(-1), z.unsqueeze(-2))


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
        from hcspec.reference.manifold import ManifoldHyperConnection  # they import this module
        from hcspec.reference.stack import HyperConnectionStack

        count = _checks.positive_int("layers", layers)
        if carry is None:
            carry = type(self).forward in (HyperConnection.forward,
                                           ManifoldHyperConnection.forward)
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
