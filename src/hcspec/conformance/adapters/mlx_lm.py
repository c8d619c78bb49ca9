"""Adapter for mlx-lm's DeepSeek-V4.1 mHC (PyPI ``mlx-lm``, module
``mlx_lm.models.deepseek_v41``), written against version :data:`WRITTEN_FOR` with ``mlx[cpu]``.
TARGET ``mlx_lm:deepseek-v41``. The package is MLX, not PyTorch: it joins the kit through
:mod:`hcspec.conformance.bridge` (arrays through NumPy, the backward is ``mx.vjp``).

What the package computes (read from its source). ``HyperConnection(args)(streams [B,T,n,d])``
returns ``(pre, post, comb)``, all float32, from an unweighted RMS norm of ``vec(X)`` over n·d
(``eps = args.rms_norm_eps``) times ``fn`` (scaled per group by ``scale``, plus ``base``):

* ``pre = σ(·) + hc_eps``, ``post = 2σ(·)``;
* ``comb = softmax(·, -1) + hc_eps`` then ``_sinkhorn``: a column normalisation and
  ``hc_sinkhorn_iters − 1`` (row, column) rounds, each ``M / (M.sum + eps)`` — the loop in
  Python, used where the Metal kernel is absent (``_sinkhorn_kernel is None`` off Apple
  silicon, or the default device not the GPU). Here (mlx[cpu]) that fallback is the code
  path under test; :func:`sinkhorn_path` says which path the installed package takes.

``DecoderLayer.__call__`` composes each sublayer as ``streams = _expand(F(_collapse(streams,
pre_mix)), streams, post, comb)`` with ``_expand``: ``X'_j = post_j · z + Σ_i comb[i, j] X_i``
(``H_res = combᵀ``), the output cast to the streams' dtype, and ``_collapse``: ``Σ_i pre_i
X_i`` in float32, cast to the streams' dtype. DeepSeek-V4.1 is "single-pass": the ``pre`` a
HyperConnection computes is *not* its own sublayer's read weight — the attention sublayer reads
with the ``pre_mix`` carried from the previous layer's ffn HyperConnection, and the ffn
sublayer with the attention HyperConnection's ``pre`` (computed on the attention's input,
before the attention wrote to the streams).

The kit's one-sublayer impl (the factory) uses one HyperConnection for all three coefficients
(``pre`` from its own input, as ``stack(L).sublayer(k)``); the carried pre-mix is offered by
``stack(L)`` (the shared ``stack`` capability), chained as ``TextModel`` and ``DecoderLayer``
chain it: sublayer 0 reads with the model's initial pre-mix (the one-hot ``e_0``, float32, which
reads stream 0), sublayer k ≥ 1 with the ``pre`` sublayer k − 1's HyperConnection computed on
sublayer k − 1's input.

The input RMSNorms of the decoder (learned weights) belong to the branch ``F``; the parameters
are the package's (``fn``, ``base``, ``scale``), initialised as its constructor does (zeros,
zeros, ones) and kept in float32 (the model's ``cast_predicate`` keeps ``attn_hc.``/``ffn_hc.``
in float32); ``layer_index`` has no effect (no layer-dependent init). ``reduce`` is the model's
final ``_collapse(streams, pre)`` with this HyperConnection's ``pre`` (declared learned).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from typing import Any, Final

import numpy as np
import torch

from hcspec.conformance.adapters._capture import check_branch_output, check_state
from hcspec.conformance.adapters.declarations.mlx_lm import MODULE, WRITTEN_FOR
from hcspec.conformance.bridge import (
    BridgedConnection,
    Built,
    FlatFunction,
    Framework,
    Sublayer,
    check_sizes,
    cross,
    declare,
    mlx_framework,
    torch_parameters,
)
from hcspec.conformance.protocol import Branch, Conventions, Weights

SINKHORN_ITERS: Final = 20
"""``ModelArgs.hc_sinkhorn_iters``'s default."""

HC_EPS: Final = 1e-6
"""``ModelArgs.hc_eps``'s default."""

PARAMETER_DTYPE: Final = torch.float32
"""The HyperConnection parameters stay float32 (the model's ``cast_predicate``)."""


def package() -> Any:
    """``mlx_lm.models.deepseek_v41`` (imports mlx and mlx-lm).

    Raises:
        ImportError: mlx-lm (or mlx) is not installed.
    """
    return importlib.import_module(MODULE)


def sinkhorn_path() -> str:
    """Which Sinkhorn–Knopp the installed package runs on the default device: ``"fallback"``
    (the Python loop of ``_sinkhorn``) or ``"metal"`` (its Metal kernel), by the package's own
    condition."""
    pkg = package()
    mx = pkg.mx
    fallback = pkg._sinkhorn_kernel is None or mx.default_device() != mx.gpu
    return "fallback" if fallback else "metal"


def conventions(path: str = "fallback") -> Conventions:
    """What mlx-lm's DeepSeek-V4.1 HyperConnection declares (see the module docstring), the
    notes naming the Sinkhorn–Knopp ``path`` taken (:func:`sinkhorn_path`)."""
    taken = ("the _sinkhorn fallback loop: no Metal kernel on this device" if path == "fallback"
             else "the package's Metal kernel, not the fallback loop")
    return Conventions(
        reduce="learned", sinkhorn_iterations=SINKHORN_ITERS, sinkhorn_variant="softmax",
        sinkhorn_iterations_count="rounds_from_softmax", sinkhorn_additive_eps=HC_EPS,
        sinkhorn_denominator_eps=HC_EPS, sinkhorn_exact_axis="rows", h_pre_eps=HC_EPS,
        notes=(f"mlx-lm {WRITTEN_FOR} deepseek_v41.HyperConnection composed as DecoderLayer "
               "does: X' = _expand(F(_collapse(X, pre)), X, post, comb), H_res = combᵀ; "
               "comb = softmax(L, -1) + eps, a column normalisation, then iters − 1 (row, "
               f"column) rounds with eps in the denominators ({taken}); pre = σ + eps, "
               "post = 2σ; weights in float32 "
               "from an unweighted RMS norm of vec(X); parameters float32; weights cast to "
               "the state's dtype; reduce = _collapse with this HyperConnection's pre"))


class _Functions:
    """The framework-side functions of one ``HyperConnection`` (parameters set per call)."""

    def __init__(self, pkg: Any, module: Any) -> None:
        self.pkg, self.module, self.mx = pkg, module, pkg.mx

    def coefficients(self, params: Any, x: Any) -> tuple[Any, Any, Any]:
        self.module.update(dict(params))
        pre, post, comb = self.module(x)
        return pre, post, comb

    def read(self, params: Any, x: Any) -> tuple[Any, ...]:
        pre, post, comb = self.coefficients(params, x)
        return self.pkg._collapse(x, pre), post, comb

    def read_carried(self, params: Any, x: Any, carried: Any) -> tuple[Any, ...]:
        """As ``DecoderLayer``: read with the carried ``pre_mix``; return this
        HyperConnection's ``pre`` to carry on."""
        pre, post, comb = self.coefficients(params, x)
        return self.pkg._collapse(x, carried), post, comb, pre

    def write(self, params: Any, x: Any, z: Any, post: Any, comb: Any) -> Any:
        del params
        return self.pkg._expand(z, x, post, comb)

    def weights(self, params: Any, x: Any) -> tuple[Any, ...]:
        pre, post, comb = self.coefficients(params, x)
        return (pre.astype(x.dtype), post.astype(x.dtype),
                self.mx.swapaxes(comb, -1, -2).astype(x.dtype))

    def logits(self, params: Any, x: Any) -> tuple[Any, ...]:
        """The arguments of σ, 2σ and the softmax (recomputed as ``HyperConnection`` does,
        up to the split; ``weights`` is the package's call)."""
        self.module.update(dict(params))
        mod, mx, n = self.module, self.mx, self.module.hc
        flat = x.reshape(*x.shape[:2], -1).astype(mx.float32)
        flat = mx.fast.rms_norm(flat, weight=None, eps=mod.norm_eps)
        mix = (flat @ mod.fn.T) * mod.scale[mod._scale_ids] + mod.base
        pre, post, comb = mx.split(mix, [n, 2 * n], axis=-1)
        comb = comb.reshape(*comb.shape[:-1], n, n)
        return (pre.astype(x.dtype), post.astype(x.dtype),
                mx.swapaxes(comb, -1, -2).astype(x.dtype))

    def reduce(self, params: Any, x: Any) -> Any:
        pre, _, _ = self.coefficients(params, x)
        return self.pkg._collapse(x, pre)


def _build(n: int, d: int, layer_index: int, seed: int) -> tuple[Built, _Functions]:
    del layer_index, seed  # the package's init is deterministic and layer-independent
    pkg = package()
    args = pkg.ModelArgs(hidden_size=d, hc_mult=n, hc_sinkhorn_iters=SINKHORN_ITERS,
                         hc_eps=HC_EPS)
    module = pkg.HyperConnection(args)
    fns = _Functions(pkg, module)
    params = {name: np.array(value) for name, value in module.parameters().items()}
    sublayer = Sublayer(read=fns.read, write=fns.write, weights=fns.weights, reduce=fns.reduce)
    return Built(params, sublayer), fns


class MlxV41Connection(BridgedConnection):
    """One DeepSeek-V4.1 sublayer of mlx-lm as a kit impl (:class:`BridgedConnection`) with
    ``logits(x)`` and ``stack(layers)``.

    Shapes and dtypes as :class:`BridgedConnection`; ``logits(x) -> (H̃_pre [B,T,n],
    H̃_post [B,T,n], H̃_res [B,T,n,n])`` in the row form of ``weights``.
    """

    def __init__(self, functions: _Functions, built: Built, framework: Framework,
                 params: dict[str, torch.Tensor], n: int, d: int, layer_index: int, seed: int,
                 declared: Conventions) -> None:
        super().__init__(framework, built.sublayer, params, n, d, "mhc", declared)
        self._functions = functions
        self._logits = FlatFunction(functions.logits, list(params), False)
        self._layer_index, self._seed = layer_index, seed

    def logits(self, x: torch.Tensor) -> Weights:
        """mHC's pre-activation logits at ``x`` (mHC Eq. 7), differentiable.

        Raises:
            ValueError: ``x`` not ``[B, T, n, d]``.
        """
        check_state(x, self.n, self.d)
        pre, post, res = cross(self.framework, self._logits, *self.params.values(), x)
        return pre, post, res

    def stack(self, layers: int) -> MlxV41Stack:
        """A fresh stack of ``layers`` sublayers from this impl's ``layer_index`` (each its own
        HyperConnection) run with the carried pre-mix (see the module docstring).

        Raises:
            ValueError: ``layers < 1``.
        """
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
            raise ValueError(f"layers: expected an int >= 1, got {layers!r}")
        device = next(iter(self.params.values())).device
        subs = [_make(self.n, self.d, layer_index=self._layer_index + k, device=str(device),
                      seed=self._seed) for k in range(layers)]
        return MlxV41Stack(subs)


class MlxV41Stack:
    """``layers`` consecutive DeepSeek-V4.1 sublayers of mlx-lm with the carried pre-mix (the
    shared ``stack`` contract: ``forward(x, branches)``, ``weights(x, branches)``,
    ``sublayer(k)``, ``parameters()``).

    Shapes: ``x [B,T,n,d]``; ``branches[k]``: ``[B,T,d] -> [B,T,d]``, called once each.
    The carried ``pre`` crosses as float32, as the model keeps ``pre_mix``.

    Declares the carry design (``Stack.pre_mix_from``): ``"previous_input"`` — sublayer k ≥ 1
    reads with the ``pre`` sublayer k − 1 computed from its own input, sublayer 0 with
    ``initial_pre_mix = e_0`` (``TextModel``'s, read stream 0).

    Raises:
        ValueError: (from the methods) ``x`` not ``[B,T,n,d]``, ``len(branches) != layers``,
            a branch output of another shape, ``k`` out of range.
    """

    def __init__(self, sublayers: Sequence[MlxV41Connection]) -> None:
        self._subs = list(sublayers)
        self.n, self.d, self.layers = self._subs[0].n, self._subs[0].d, len(self._subs)
        self.pre_mix_from: Final = "previous_input"
        self.initial_pre_mix = torch.zeros(self.n, dtype=torch.float32)
        self.initial_pre_mix[0] = 1.0  # TextModel's initial pre_mix: read stream 0
        names = list(self._subs[0].params)
        self._carried = [FlatFunction(s._functions.read_carried, names, False)
                         for s in self._subs]
        self._write = [FlatFunction(s._functions.write, names, True) for s in self._subs]

    def parameters(self) -> Iterator[torch.Tensor]:
        """Every sublayer's parameters, sublayer by sublayer."""
        for sub in self._subs:
            yield from sub.parameters()

    def sublayer(self, k: int) -> MlxV41Connection:
        """Sublayer ``k`` alone (same parameter tensors, its own ``pre``, no carried state).

        Raises:
            ValueError: ``k`` not in ``[0, layers)``.
        """
        if not 0 <= k < self.layers:
            raise ValueError(f"k: expected 0 <= k < {self.layers}, got {k}")
        return self._subs[k]

    def forward(self, x: torch.Tensor, branches: Sequence[Branch]) -> torch.Tensor:
        """``X_L`` after the ``layers`` sublayers (see the class)."""
        return self._run(x, branches, None)

    def weights(self, x: torch.Tensor, branches: Sequence[Branch]) -> list[Weights]:
        """``(h_pre, h_post, H_res)`` each sublayer used in the run (``h_pre`` the carried
        pre-mix: ``e_0`` for sublayer 0), row form, in ``x``'s dtype; each branch called
        once."""
        used: list[Weights] = []
        self._run(x, branches, used)
        return used

    def _run(self, x: torch.Tensor, branches: Sequence[Branch],
             used: list[Weights] | None) -> torch.Tensor:
        check_state(x, self.n, self.d)
        if len(branches) != self.layers:
            raise ValueError(f"expected {self.layers} branches, got {len(branches)}")
        carried = torch.zeros(*x.shape[:3], dtype=torch.float32, device=x.device)
        carried[..., 0] = 1.0  # TextModel's initial pre_mix: read stream 0
        state = x
        for k, sub in enumerate(self._subs):
            params = tuple(sub.params.values())
            fw = sub.framework
            x_in, post, comb, pre = cross(fw, self._carried[k], *params, state, carried)
            read_with = carried
            if used is not None:
                used.append((read_with.to(x.dtype), post.to(x.dtype),
                             comb.transpose(-1, -2).to(x.dtype)))
            z = check_branch_output(branches[k](x_in), x_in)
            (state,) = cross(fw, self._write[k], *params, state, z, post, comb)
            carried = pre
        return state


def _make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
          device: str = "cpu", seed: int = 0) -> MlxV41Connection:
    check_sizes(n, d, layer_index, seed)
    del dtype  # the parameters stay float32 (PARAMETER_DTYPE)
    framework = mlx_framework()
    built, functions = _build(n, d, layer_index, seed)
    params = torch_parameters(built.parameters, PARAMETER_DTYPE, device)
    declared = declare(conventions(sinkhorn_path()), torch.float32, framework.name)
    return MlxV41Connection(functions, built, framework, params, n, d, layer_index, seed,
                            declared)


def make_deepseek_v41(n: int, d: int, *, layer_index: int = 0,
                      dtype: torch.dtype = torch.float64, device: str = "cpu",
                      seed: int = 0) -> MlxV41Connection:
    """Factory (kit target form) for one sublayer of mlx-lm's DeepSeek-V4.1 mHC:
    ``deepseek_v41.HyperConnection(ModelArgs(hidden_size=d, hc_mult=n))`` composed as
    ``DecoderLayer`` does, run in MLX through the bridge (parameters float32 whatever
    ``dtype``; the state keeps its dtype).

    Raises:
        ImportError: mlx-lm or mlx is not installed.
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    return _make(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)
