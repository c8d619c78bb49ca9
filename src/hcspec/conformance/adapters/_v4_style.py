"""The implementation of :mod:`hcspec.conformance.adapters.deepseek_v4_style`: the connection
that calls a DeepSeek-V4-style module and composes its step (:class:`V4StyleConnection`, with
the published parameters in :class:`PublishedV4StyleConnection`) and the target that builds one
(:func:`v4_style_target`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from hcspec.conformance.adapters._capture import (
    WrapsModule,
    check_branch_output,
    check_state,
    seeded,
)
from hcspec.conformance.adapters._stacking import sequential_stack
from hcspec.conformance.adapters._v4_terms import (
    Build,
    CombOrientation,
    ComposeDtype,
    DecoderLayerOf,
    Decompose,
    Decomposition,
    Logits,
    PublishedTensors,
    ReadPre,
    Reduce,
    V4Style,
)
from hcspec.conformance.protocol import Branch, Conventions, Factory, Kind, Stack, Weights


class V4StyleConnection(WrapsModule):
    """A DeepSeek-V4-style module presented as a kit impl (:mod:`hcspec.conformance.protocol`).

    Shapes: ``forward(x [B,T,n,d], branch) -> [B,T,n,d]``, ``weights(x) -> (h_pre [B,T,n],
    h_post [B,T,n], H_res [B,T,n,n])``, ``expand(h [B,T,d]) -> [B,T,n,d]`` (replication, as
    DeepSeek-V4's embedding), ``reduce(x [B,T,n,d]) -> [B,T,d]`` (the sum, the mean, or the
    learned head, as declared). Dtype: the output is the declared ``output_dtype``, else ``x``'s.

    Raises:
        ValueError: (from the methods) ``x`` not ``[B, T, n, d]``, a branch output of another
            shape, or a decomposition whose tensors have the wrong shapes.

    ``parameters``, ``buffers`` and the training mode are the module's (:class:`WrapsModule`;
    the reduction head's parameters are among them when it is a submodule).
    """

    logits: Callable[[torch.Tensor], Weights]
    """Present only when the factory was given ``logits`` (:data:`Logits`): the module's
    pre-activation logits at ``x`` in the row form (capability ``logits``)."""

    def __init__(self, module: nn.Module, decompose: Decompose, n: int, d: int,
                 style: V4Style, reduce: Reduce | None = None,
                 read_pre: ReadPre | None = None, logits: Logits | None = None,
                 successor: Callable[[int], V4StyleConnection] | None = None,
                 stack_of: StackOf | None = None,
                 decoder_layer: DecoderLayerOf | None = None) -> None:
        self.module: Any = module
        self.n, self.d = n, d
        self.kind: str = style.kind
        self.style = style
        self.conventions = style.conventions
        self._decompose = decompose
        self._reduce = reduce
        self._read_pre = read_pre
        self._identity = style.conventions.residual_mixing == "identity"
        self._successor = successor
        self._stack_of = stack_of
        self._layer_step = decoder_layer(module) if decoder_layer is not None else None
        if logits is not None:
            self._logits_of = logits
            self.logits = self._row_form_logits

    # --- the protocol ---------------------------------------------------------------------
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``X'_j = post_j · F(collapsed) + Σ_i H_res[j, i] X_i``; ``branch`` is called once on
        ``collapsed``.

        The state goes to the package's module as given (no validation here: a state of
        another rank, ``[B, n, d]`` or ``[B, H, W, n, d]``, reaches the package, whose own
        error, or result, is what the kit's shape properties see).

        With the factory's ``decoder_layer``, the package's own decoder layer composes
        (:data:`LayerStep`): ``X'`` is what the layer returns, its orientation the layer's.

        Raises:
            ValueError: see the class (a decomposition of the wrong shapes); whatever the
                package raises (through a decoder layer, its output is returned unchecked).
        """
        if self._layer_step is not None:
            def checked(h: torch.Tensor) -> torch.Tensor:
                return check_branch_output(branch(h), h)

            out = self._layer_step(x, checked)
            # returned as the layer gives it: a wrong shape is for the kit's shape family to see
            return out.to(self._output_dtype(x)) if isinstance(out, torch.Tensor) else out
        parts = self._parts(x)
        collapsed = parts.collapsed
        if collapsed is None:
            assert parts.pre is not None  # checked in _parts
            collapsed = self._collapse(parts.pre, x)
        z = check_branch_output(branch(collapsed), collapsed)
        work = x.dtype if self.style.compose_dtype == "input" else torch.float32
        if parts.comb is None:  # residual_mixing="identity": the streams pass unchanged
            mixed = x.to(work)
        else:
            mixed = torch.matmul(self._h_res(parts.comb).to(work), x.to(work))
        out = parts.post.to(work).unsqueeze(-1) * z.to(work).unsqueeze(-2) + mixed
        return out.to(self._output_dtype(x))

    def weights(self, x: torch.Tensor) -> Weights:
        """The module's ``(pre, post, H_res)`` at ``x`` in the kit's row form, in the declared
        ``weights_dtype`` (the engine's own coefficients, unrounded), else the output dtype;
        differentiable w.r.t. ``x`` and the parameters.

        Raises:
            ValueError: see the class; also a decomposition without ``pre``.
        """
        check_state(x, self.n, self.d)
        parts = self._parts(x)
        if parts.pre is None:
            if self._read_pre is None:
                raise ValueError("decompose gives no pre and the factory has no read_pre")
            parts = parts._replace(pre=self._read_pre(self.module, x))
            assert parts.pre is not None
        dtype = self.conventions.weights_dtype or self._output_dtype(x)
        if parts.comb is None:
            eye = torch.eye(self.n, dtype=dtype, device=x.device)
            h_res = eye.expand(*x.shape[:2], self.n, self.n)
        else:
            h_res = self._h_res(parts.comb).to(dtype)
        return parts.pre.to(dtype), parts.post.to(dtype), h_res

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """Replicate ``h [B, T, d]`` into the n streams ``[B, T, n, d]``.

        Raises:
            ValueError: ``h`` is not ``[B, T, d]``.
        """
        if h.dim() != 3 or h.shape[-1] != self.d:
            raise ValueError(f"expand: expected [B, T, {self.d}], got {list(h.shape)}")
        return h.unsqueeze(-2).expand(*h.shape[:-1], self.n, self.d).contiguous()

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The streams' sum (HC's ``1ᵀ X``), their mean (declared ``reduce="mean"``), or the
        learned head given to the factory.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``.
        """
        check_state(x, self.n, self.d)
        if self._reduce is not None:
            return self._reduce(self.module, x)
        if self.conventions.reduce == "mean":
            return x.mean(dim=-2)
        return x.sum(dim=-2)

    def stack(self, layers: int) -> Stack:
        """``layers`` consecutive sublayers starting with this one (the kit's ``stack``
        capability): sublayer k ≥ 1 is what the factory builds for ``layer_index + k`` with
        seed ``seed + k``. Run by the factory's ``stack_of`` (the package's own carried state)
        when given, else one after the other, each computing its own coefficients
        (:func:`hcspec.conformance.adapters._stacking.sequential_stack`).

        Raises:
            ValueError: ``layers`` is not a positive int, or this adapter was not built by
                :func:`v4_style_target` (no factory to build the later sublayers).
        """
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
            raise ValueError(f"layers: expected a positive int, got {layers!r}")
        if self._successor is None and layers > 1:
            raise ValueError("stack: this adapter has no factory for its later sublayers "
                             "(build it with v4_style_target)")
        later = [self._successor(k) for k in range(1, layers)] if self._successor else []
        sublayers = [self, *later]
        return self._stack_of(sublayers) if self._stack_of else sequential_stack(sublayers)

    def _row_form_logits(self, x: torch.Tensor) -> Weights:
        """The module's ``(pre, post, comb)`` logits at ``x`` in the row form: ``comb``'s
        transposed where the target declares ``comb="source_target"`` (entry ``[i, j]`` then
        belongs to ``H_res[i, j]``)."""
        check_state(x, self.n, self.d)
        pre, post, comb = self._logits_of(self.module, x)
        return pre, post, self._h_res(comb)

    # --- internals ------------------------------------------------------------------------
    def _collapse(self, pre: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``Σ_i pre_i X_i`` ``[B, T, d]`` of ``pre [B, T, n]`` and ``x [B, T, n, d]``, in the
        declared ``compute_dtype`` (or ``x``'s dtype where that is finer, or none is declared)
        and returned in ``x``'s dtype: DeepSeek-V4 takes the products and the sum in float32
        and rounds once, so a bfloat16 state is not rounded n times along the sum."""
        declared = self.conventions.compute_dtype
        work = x.dtype if declared is None else torch.promote_types(x.dtype, declared)
        return (pre.to(work).unsqueeze(-1) * x.to(work)).sum(dim=-2).to(x.dtype)

    def _output_dtype(self, x: torch.Tensor) -> torch.dtype:
        return self.conventions.output_dtype or x.dtype

    def _h_res(self, comb: torch.Tensor) -> torch.Tensor:
        return comb.transpose(-1, -2) if self.style.comb == "source_target" else comb

    def _parts(self, x: torch.Tensor) -> Decomposition:
        parts = self._decompose(self.module, x)
        lead = tuple(x.shape[:-2])  # [B, T] for the protocol's state; any leading axes
        n = self.n
        expected = {"pre": (*lead, n), "post": (*lead, n), "comb": (*lead, n, n),
                    "collapsed": (*lead, self.d)}
        for name, shape in expected.items():
            value = getattr(parts, name)
            if value is None and name in ("pre", "collapsed"):
                continue
            if name == "comb" and (value is None) != self._identity:
                raise ValueError(
                    "decompose: comb must be None exactly when the conventions declare "
                    f"residual_mixing='identity' (declared {self.conventions.residual_mixing!r})")
            if value is None:
                continue
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape:
                got = list(value.shape) if isinstance(value, torch.Tensor) else value
                raise ValueError(f"decompose: {name} should be {list(shape)}, got {got}")
        if parts.pre is None and parts.collapsed is None:
            raise ValueError("decompose: give pre, collapsed, or both")
        return parts


StackOf = Callable[[list[V4StyleConnection]], Stack]
"""``stack_of(sublayers) -> Stack``: the package's own run of consecutive sublayers (with its
carried state, e.g. DeepSeek-V4.1's fused pre of the next sublayer), given the L adapters
built for ``layer_index … layer_index + L − 1`` (:class:`hcspec.conformance.protocol.Stack`)."""


class PublishedV4StyleConnection(V4StyleConnection):
    """A :class:`V4StyleConnection` whose module holds a published layout's tensors: also
    ``published_parameters()`` and ``load_published(params)`` (:class:`PublishedTensors`)."""

    published: PublishedTensors

    def published_parameters(self) -> dict[str, object]:
        """The layout's tensors (the module's own parameters, differentiable) and settings."""
        return self.published.read(self.module)

    def load_published(self, params: Mapping[str, object]) -> None:
        """Set the module's parameters from ``params`` (:meth:`PublishedTensors.load`)."""
        self.published.load(self.module, params)


def v4_style_target(build: Build, decompose: Decompose, *, comb: CombOrientation,
                    conventions: Conventions, kind: Kind = "mhc",
                    compose_dtype: ComposeDtype = "input", keep_float32: bool = False,
                    reduce: Reduce | None = None, read_pre: ReadPre | None = None,
                    stack_of: StackOf | None = None,
                    published: PublishedTensors | None = None,
                    logits: Logits | None = None,
                    decoder_layer: DecoderLayerOf | None = None) -> Factory:
    """A kit target (factory) for a DeepSeek-V4-style module.

    Args:
        build: ``build(n, d, layer_index) -> module`` (:data:`Build`), called under ``seed``
            with torch's global RNG forked (the caller's random state is untouched).
        decompose: ``decompose(module, x) -> Decomposition`` (:data:`Decompose`).
        comb: the orientation of ``comb`` (:data:`CombOrientation`).
        conventions: what the target declares (:class:`Conventions`).
        kind, compose_dtype, keep_float32: as on :class:`V4Style`.
        reduce: a learned reduction head (:data:`Reduce`); declare ``reduce="learned"``.
        read_pre: how ``weights`` reads ``pre`` when ``decompose`` gives only ``collapsed``
            (:data:`ReadPre`).
        stack_of: the package's own run of consecutive sublayers (:data:`StackOf`); without
            it, ``impl.stack(L)`` runs L independently built sublayers one after the other.
        logits: the module's pre-activation logits (:data:`Logits`): the target then offers
            ``logits(x)`` (mHC only; the ``variant`` family uses it).
        published: where the module keeps a published layout's tensors
            (:class:`PublishedTensors`); the target then declares ``conventions.published``
            and offers ``published_parameters``/``load_published``.
        decoder_layer: compose through the package's own decoder layer
            (:data:`DecoderLayerOf`, called once per impl on its module) instead of from the
            declared orientation; ``weights`` still follows ``comb``.

    Returns:
        ``make(n, d, *, layer_index=0, dtype=torch.float64, device="cpu", seed=0)`` building a
        fresh :class:`V4StyleConnection`, which offers ``stack(L)`` (sublayer k built by
        ``make`` for ``layer_index + k``, seed ``seed + k``).

    Raises:
        ValueError: an unknown ``comb`` or ``compose_dtype`` (at once); ``reduce`` given without
            ``conventions.reduce == "learned"`` or the reverse.
    """
    if published is not None:
        conventions = dataclasses.replace(conventions, published=published.layout)
    style = V4Style(comb, conventions, kind, compose_dtype, keep_float32)
    if (reduce is not None) != (conventions.reduce == "learned"):
        raise ValueError("a learned reduction head is given exactly when the conventions "
                         "declare reduce='learned'")

    def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0) -> V4StyleConnection:
        for name, value in (("n", n), ("d", d)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if layer_index < 0:
            raise ValueError(f"layer_index: expected >= 0 (0-based), got {layer_index}")
        with seeded(seed, device):
            module = build(n, d, layer_index)
        module = module.to(device=device, dtype=torch.float32 if keep_float32 else dtype)

        def successor(k: int) -> V4StyleConnection:
            return make(n, d, layer_index=layer_index + k, dtype=dtype, device=device,
                        seed=seed + k)

        cls = V4StyleConnection if published is None else PublishedV4StyleConnection
        impl = cls(module, decompose, n, d, style, reduce, read_pre, logits=logits,
                   successor=successor, stack_of=stack_of, decoder_layer=decoder_layer)
        if isinstance(impl, PublishedV4StyleConnection) and published is not None:
            impl.published = published
        return impl

    make.__doc__ = (f"Kit factory for a DeepSeek-V4-style module built by "
                    f"{getattr(build, '__qualname__', build)!s} (comb {comb}).")
    return make
