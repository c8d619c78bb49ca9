"""Adapter for the hyper-connection of ``x-transformers`` (PyPI, import name ``x_transformers``),
written against version :data:`WRITTEN_FOR`. TARGET ``x_transformers:hc``.

``x_transformers.Decoder(dim, depth, num_residual_streams=n)`` with ``n > 1`` wraps every
sublayer (attention and feed-forward alike) in ``x_transformers.x_transformers.HyperConnection``
built as ``HyperConnection(dim, layer_index=i, num_residual_streams=n,
sinkhorn_iters=hyper_conn_sinkhorn_iters)`` (default 5 iterations), ``i`` the 0-based index of
the sublayer in the stack. What the decoder does with it (read from the package source):

* **Layout.** The streams are folded into the batch, ``[(B·n), T, d]`` with the batch index
  outer (row ``b·n + s``); the adapter folds and unfolds.
* **Composition.** ``x, inner, kw = hc.prepare(x)`` gives the branch input ``[B, T, d]``, the
  mixed residual streams ``[B, T, n, d]`` and ``beta``; the decoder applies the sublayer's
  pre-norm and the sublayer to ``x`` (the branch here: the norm lives inside ``F``, declared
  ``branch_input="x_in"``) and then calls ``hc(out, inner, beta=beta)``, which adds
  ``beta ⊗ out`` to the mixed streams. The adapter does exactly that, once per call.
* **Weights.** ``prepare`` builds ``alpha [B, T, n, 1 + n]`` from a per-stream
  ``LayerNorm(d, bias=False)`` of the streams (static + 0.01 × dynamic), takes ``σ`` of column
  0 (``h_pre``), runs ``sinkhorn`` on columns ``1..n`` and mixes ``out[t] = Σ_s alpha[s, t]
  X[s]``: ``h_pre[s] = alpha[s, 0]`` and ``H_res[j, s] = alpha[s, 1 + j]`` (the package stores
  ``A_r = H_resᵀ``; ``weights`` transposes). ``h_post = beta = 2σ(1 + 0.01 · 2σ(·))``. The
  adapter reads ``alpha`` from the mixing ``einsum`` (recorded with
  :class:`~hcspec.conformance.adapters._capture.CallRecorder`) and ``beta`` from ``prepare``'s
  result; nothing is recomputed.
* **Sinkhorn–Knopp**: ``softmax`` over the source axis, then 5 rounds of L1 normalisation of
  the target axis then the source axis, in float32, cast back. As written it is handed the
  mixing logits reshaped to ``[..., s, 1, n]`` (one 1 × n matrix per source stream), so every
  normalisation acts on a single row (see docs/findings/x_transformers.md).
* **Expand / reduce** (the decoder's, outside the sublayer): replication plus a learned
  ``stream_emb [n, d]`` that is zero at init (the adapter offers the init: plain replication);
  the sum over the streams (before the final norm).
* **Precision**: the module's dtype, except the Sinkhorn–Knopp step (float32).
* ``layer_index`` is the package's own 0-based ``layer_index`` (static ``h_pre`` logit 1 on
  stream ``layer_index mod n``); the module is deterministic at init; ``seed`` is still
  applied.
"""

from __future__ import annotations

from typing import Any, Final

import torch

from hcspec.conformance.adapters._capture import (
    CallRecorder,
    PackageChanged,
    WrapsModule,
    check_branch_output,
    check_state,
    seeded,
)
from hcspec.conformance.adapters.declarations.x_transformers import WRITTEN_FOR
from hcspec.conformance.protocol import Branch, Conventions, Kind, Weights

DECODER_SINKHORN_ITERS: Final = 5
"""``Decoder``'s default ``hyper_conn_sinkhorn_iters``."""


class XTransformersHyperConnection(WrapsModule):
    """``x_transformers.x_transformers.HyperConnection`` as a kit impl, composed as
    ``Decoder(num_residual_streams=n)`` composes it.

    Shapes: ``forward(x [B,T,n,d], branch) -> [B,T,n,d]``; ``weights(x)`` -> ``(h_pre [B,T,n],
    h_post [B,T,n], H_res [B,T,n,n])`` in the row form; ``expand(h [B,T,d]) -> [B,T,n,d]``;
    ``reduce(x) -> [B,T,d]``. Dtype/device: the module's (the factory's), Sinkhorn–Knopp in
    float32.

    Raises:
        ImportError: x-transformers is not installed.
        ValueError: ``n``/``d`` not positive ints (from the factory), or (methods) ``x`` not
            ``[B, T, n, d]`` / a branch output of another shape.

    ``parameters``, ``buffers`` and the training mode are the module's (:class:`WrapsModule`):
    norm gain, static alpha/beta, dynamic projections and their scales; the module has no
    mode-dependent operation.
    """

    kind: Kind = "mhc"

    def __init__(self, module: Any, n: int, d: int) -> None:
        self.module: Any = module
        self.n, self.d = n, d
        self.conventions = Conventions(
            branch_input="x_in", reduce="sum",
            sinkhorn_iterations=int(self.module.sinkhorn_iters), sinkhorn_variant="softmax",
            sinkhorn_exact_axis="rows",
            notes=("x-transformers HyperConnection as Decoder(num_residual_streams=n) composes "
                   "it: streams folded into the batch [(B·n), T, d] (b·n + s); prepare() then "
                   "the call with beta; alpha[s, 1+j] = H_res[j, s] (adapter transposes); "
                   "weights from a per-stream LayerNorm(d, bias=False); Sinkhorn–Knopp: softmax "
                   "over the source axis, then rounds of target-axis then source-axis L1 "
                   "normalisation in float32, applied by the package to [..., s, 1, n] (one "
                   "row per source stream); expand = replication (Decoder's stream_emb is 0 "
                   "at init); reduce = sum"),
        )

    # --- the protocol ---------------------------------------------------------------------
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """One sublayer step as the decoder runs it: ``prepare`` on the folded state, the
        branch once on its branch input, then the module's call with ``beta``.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``, or the branch returns another shape.
        """
        check_state(x, self.n, self.d)
        batch, tokens = x.shape[:2]
        branch_input, residuals, kwargs = self.module.prepare(self._fold(x))
        z = check_branch_output(branch(branch_input), branch_input)
        out: torch.Tensor = self.module(z, residuals, **kwargs)
        return self._unfold(out, batch, tokens)

    def weights(self, x: torch.Tensor) -> Weights:
        """``(h_pre, h_post, H_res)`` the module uses at ``x [B, T, n, d]``, in the row form,
        differentiable w.r.t. ``x`` and the parameters.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``.
            PackageChanged: ``prepare`` no longer mixes with one ``alpha [B, T, n, n + 1]``
                in its last ``einsum`` or returns no ``beta [B, T, n]``.
        """
        check_state(x, self.n, self.d)
        batch, tokens = x.shape[:2]
        with CallRecorder((torch.einsum,)) as recorder:
            _, _, kwargs = self.module.prepare(self._fold(x))
        einsums = recorder.of(torch.einsum)
        alpha = einsums[-1].args[1] if einsums else None
        beta = kwargs.get("beta") if isinstance(kwargs, dict) else None
        if not (isinstance(alpha, torch.Tensor) and isinstance(beta, torch.Tensor)
                and tuple(alpha.shape) == (batch, tokens, self.n, self.n + 1)
                and tuple(beta.shape) == (batch, tokens, self.n)):
            raise PackageChanged(
                f"x-transformers: HyperConnection.prepare no longer mixes with alpha "
                f"[B, T, n, n + 1] and returns beta [B, T, n] (adapter written for "
                f"{WRITTEN_FOR})")
        h_pre = alpha[..., 0]
        H_res = alpha[..., 1:].transpose(-1, -2)
        return h_pre, beta, H_res

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """The decoder's stream expansion at init: replication (its learned ``stream_emb`` is
        zero at init): ``h [B, T, d] -> [B, T, n, d]``.

        Raises:
            ValueError: ``h`` is not ``[B, T, d]``.
        """
        if h.dim() != 3 or h.shape[-1] != self.d:
            raise ValueError(f"expand: expected [B, T, {self.d}], got {list(h.shape)}")
        return h.unsqueeze(-2).expand(*h.shape[:-1], self.n, self.d).contiguous()

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The decoder's reduction before its final norm: the sum over the streams,
        ``[B, T, n, d] -> [B, T, d]``.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``.
        """
        check_state(x, self.n, self.d)
        return x.sum(dim=-2)

    # --- layout ---------------------------------------------------------------------------
    def _fold(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, n, d = x.shape
        return x.permute(0, 2, 1, 3).reshape(batch * n, tokens, d)

    def _unfold(self, y: torch.Tensor, batch: int, tokens: int) -> torch.Tensor:
        return y.reshape(batch, self.n, tokens, self.d).permute(0, 2, 1, 3)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0,
         sinkhorn_iters: int = DECODER_SINKHORN_ITERS) -> XTransformersHyperConnection:
    """Factory (kit target form): the ``HyperConnection`` that ``Decoder(dim=d,
    num_residual_streams=n, hyper_conn_sinkhorn_iters=sinkhorn_iters)`` builds for its sublayer
    ``layer_index`` (0-based, as the package counts), in ``dtype`` on ``device``; ``seed`` is
    applied without touching the caller's random state.

    Raises:
        ImportError: x-transformers is not installed.
        ValueError: ``n``/``d`` not positive ints, ``layer_index < 0`` or ``seed < 0``.
    """
    from x_transformers.x_transformers import HyperConnection

    for name, value in (("n", n), ("d", d)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if layer_index < 0:
        raise ValueError(f"layer_index: expected >= 0 (0-based), got {layer_index}")
    with seeded(seed, device):
        module = HyperConnection(d, layer_index=layer_index, num_residual_streams=n,
                                 sinkhorn_iters=sinkhorn_iters)
    return XTransformersHyperConnection(module.to(dtype=dtype, device=device), n, d)
