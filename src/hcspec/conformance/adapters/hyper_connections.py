"""Adapters for the ``hyper-connections`` package (PyPI, import name ``hyper_connections``),
written against version :data:`WRITTEN_FOR`.

Three modules of the package, each one HC-wrapped sublayer:

* ``hyper_connections.HyperConnections`` — dynamic HC (HC arXiv:2409.19606 §2.3, Eq. 10–13,
  with an RMS norm in place of the LayerNorm), TARGET ``hyper_connections:hc``;
* ``hyper_connections.ManifoldConstrainedHyperConnections`` — mHC (mHC arXiv:2512.24880 Eq. 7–9)
  with the streams folded into the batch, ``hyper_connections:mhc``;
* ``hyper_connections.mHCv2.ManifoldConstrainedHyperConnections`` — the same mHC with the
  streams on axis −2 (``[B, T, n, d]``, the kit's layout), ``hyper_connections:mhc-v2``.

What the adapters translate (read from the package source; every item is also declared in
the impl's :class:`~hcspec.conformance.protocol.Conventions` and shown in the report):

* **Layout.** ``HyperConnections`` and the first mHC module take the streams folded into the
  batch, ``[(B·n), T, d]`` with the batch index outer (row ``b·n + s``); the adapters fold and
  unfold. ``mHCv2`` takes ``[B, T, n, d]`` as is.
* **Branch injection.** Built without a ``branch``, a module returns ``(branch_input,
  add_residual)``; the adapter calls the kit's branch once on ``branch_input`` and passes its
  output to ``add_residual``. The branch receives ``x_in = h_preᵀ X`` of the raw streams: the
  package's own norm only feeds the weight generation (declared ``branch_input="x_in"``).
* **Orientation.** The package mixes ``out[t] = Σ_s alpha[s, t] X[s]``: column 0 of ``alpha``
  reads the branch input (``h_pre[s] = alpha[s, 0]``) and columns ``1..n`` are the paper's
  ``A_r = H_resᵀ`` (``H_res[j, s] = alpha[s, 1 + j]``). ``weights`` transposes.
* **Sinkhorn–Knopp** (mHC): each round normalises over the source-stream axis, then over the
  target axis, on ``A_r``; in the kit's row form the **columns** of ``H_res`` are exact
  (``1ᵀ H_res = 1ᵀ``) and the rows converge (declared ``sinkhorn_exact_axis="columns"``).
* **Precision** (mHC): the norm output, the weights, Sinkhorn–Knopp, the mix and the
  ``h_post·z`` product are computed in float32 and cast back to the input dtype (declared
  ``compute_dtype=torch.float32``). ``HyperConnections`` computes in the module's dtype.
* **Expand / reduce**: the package's own functions (replicate; sum over the streams).
* **Init**: ``layer_index`` is always passed (the package picks a *random* stream for
  ``h_pre`` when it is ``None``). The packages' inits are deterministic; ``seed`` is still
  applied (:func:`hcspec.conformance.adapters._capture.seeded`) for dropout masks drawn at build
  time
  and for future versions.
* **Train/eval**: the modules are returned as PyTorch builds them, in training mode. With
  ``dropout > 0`` the package drops entries of the whole updated state (residual path
  included) in training mode; the adapter does not switch it off.

``weights(x)`` reads the ``alpha`` tensor that the package's mixing ``einsum`` really used
(recorded with :class:`~hcspec.conformance.adapters._capture.CallRecorder`; einops routes its
``einsum`` to ``torch.einsum``) and the ``beta`` (= ``h_post``) that ``width_connection``
returns; nothing is recomputed by the adapter.
"""

from __future__ import annotations

from collections.abc import Callable
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
from hcspec.conformance.adapters._triton import kernel_mode
from hcspec.conformance.adapters.declarations.hyper_connections import WRITTEN_FOR
from hcspec.conformance.protocol import Branch, Conventions, Kind, Weights

FOLDED: Final = "streams folded into the batch [(B·n), T, d], batch index outer (b·n + s)"
ORIENTATION: Final = "package alpha[s, 1+j] = H_res[j, s] (A_r = H_resᵀ); the adapter transposes"


def _require_positive(n: int, d: int) -> None:
    for name, value in (("n", n), ("d", d)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")


class _HyperConnectionsBase(WrapsModule):
    """What the three adapters share: per-call branch injection, ``weights`` from the recorded
    mixing ``einsum``, the package's expand/reduce, ``parameters`` and train/eval.

    Subclasses set ``kind``, ``folded`` and build ``self.module``.

    ``parameters``, ``buffers`` and the training mode are the wrapped module's
    (:class:`WrapsModule`): static and dynamic weights, scales, norm gain; the mode switches
    dropout only.
    """

    kind: Kind
    folded: bool
    conventions: Conventions

    def __init__(self, n: int, d: int, module: torch.nn.Module, expand_reduce: tuple[Any, Any],
                 dtype: torch.dtype, device: str) -> None:
        self.n, self.d = n, d
        self.module: Any = module.to(dtype=dtype, device=device)
        self._expand, self._reduce = expand_reduce

    # --- the protocol ---------------------------------------------------------------------
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """One HC/mHC step of the package: ``x [B, T, n, d] -> X' [B, T, n, d]`` with ``x``'s
        dtype and device; ``branch`` (``[B, T, d] -> [B, T, d]``) is called exactly once on
        the ``branch_input`` the package computes.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``, or the branch returns another shape.
        """
        check_state(x, self.n, self.d)
        batch, tokens = x.shape[:2]
        branch_input, add_residual = self.module(self._to_package(x))
        z = check_branch_output(branch(branch_input), branch_input)
        out: torch.Tensor = add_residual(z)
        return self._from_package(out, batch, tokens)

    def weights(self, x: torch.Tensor) -> Weights:
        """The per-token weights the package uses at ``x [B, T, n, d]``, in the kit's row form:
        ``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])`` in ``x``'s dtype (mHC: the
        float32 values the package computed, cast), differentiable w.r.t. ``x`` and the
        parameters.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``.
            PackageChanged: the package's ``width_connection`` no longer mixes with one
                ``alpha [..., n, n + 1]`` in its last ``einsum``.
        """
        check_state(x, self.n, self.d)
        batch, tokens = x.shape[:2]
        with CallRecorder((torch.einsum,)) as recorder:
            _, _, extra = self.module.width_connection(self._to_package(x))
        einsums = recorder.of(torch.einsum)
        if not einsums:
            raise PackageChanged(
                f"hyper-connections: width_connection made no torch.einsum call (adapter "
                f"written for {WRITTEN_FOR})")
        alpha = einsums[-1].args[1]
        beta = extra.get("beta") if isinstance(extra, dict) else None
        sizes = (batch * tokens * self.n * (self.n + 1), batch * tokens * self.n)
        if not (isinstance(alpha, torch.Tensor) and isinstance(beta, torch.Tensor)
                and (alpha.numel(), beta.numel()) == sizes):
            raise PackageChanged(
                f"hyper-connections: the mixing einsum's alpha and width_connection's beta do "
                f"not have the [B, T, n, n + 1] / [B, T, n] sizes of version {WRITTEN_FOR}")
        alpha = alpha.reshape(batch, tokens, self.n, self.n + 1)
        h_pre = alpha[..., 0]
        H_res = alpha[..., 1:].transpose(-1, -2)
        h_post = beta.reshape(batch, tokens, self.n)
        return h_pre.to(x.dtype), h_post.to(x.dtype), H_res.to(x.dtype)

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        """The package's stream expansion (replicate): ``h [B, T, d] -> [B, T, n, d]``.

        Raises:
            ValueError: ``h`` is not ``[B, T, d]``.
        """
        if h.dim() != 3 or h.shape[-1] != self.d:
            raise ValueError(f"expand: expected [B, T, {self.d}], got {list(h.shape)}")
        out: torch.Tensor = self._expand(h)
        return self._from_package(out, h.shape[0], h.shape[1])

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The package's stream reduction (sum over the streams): ``[B, T, n, d] -> [B, T, d]``.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]``.
        """
        check_state(x, self.n, self.d)
        out: torch.Tensor = self._reduce(self._to_package(x))
        return out

    # --- layout ---------------------------------------------------------------------------
    def _to_package(self, x: torch.Tensor) -> torch.Tensor:
        if not self.folded:
            return x
        batch, tokens, n, d = x.shape
        return x.permute(0, 2, 1, 3).reshape(batch * n, tokens, d)

    def _from_package(self, y: torch.Tensor, batch: int, tokens: int) -> torch.Tensor:
        if not self.folded:
            return y
        return y.reshape(batch, self.n, tokens, self.d).permute(0, 2, 1, 3)


def _dropout_note(dropout: float) -> str:
    if dropout == 0.0:
        return "dropout 0"
    return (f"dropout {dropout} on the whole updated state (residual path included), active: "
            "the module is in training mode as built")


class HyperConnectionsAdapter(_HyperConnectionsBase):
    """``hyper_connections.HyperConnections`` (dynamic HC, HC Eq. 10–13) as a kit impl.

    Shapes: ``forward(x [B,T,n,d], branch) -> [B,T,n,d]``; ``weights`` as on the base. The
    module is moved to the factory's dtype and device and computes in that dtype.

    Raises:
        ImportError: hyper-connections is not installed.
        ValueError: ``n`` or ``d`` not a positive int, ``dropout`` outside ``[0, 1)``.
    """

    kind: Kind = "hc-dynamic"
    folded = True

    def __init__(self, n: int, d: int, *, layer_index: int, dtype: torch.dtype, device: str,
                 tanh: bool = True, dropout: float = 0.0) -> None:
        from hyper_connections import HyperConnections, get_expand_reduce_stream_functions

        _require_positive(n, d)
        _require_dropout(dropout)
        module = HyperConnections(n, dim=d, layer_index=layer_index, tanh=tanh, dropout=dropout)
        super().__init__(n, d, module, get_expand_reduce_stream_functions(n), dtype, device)
        self.conventions = Conventions(
            branch_input="x_in", reduce="sum",
            notes=(f"hyper-connections HyperConnections(tanh={tanh}, dropout={dropout}): "
                   f"{FOLDED}; {ORIENTATION}; weights from a per-stream RMSNorm with learnable "
                   f"gain (static + s·{'tanh' if tanh else 'identity'}(norm(X_s) W)); "
                   f"{_dropout_note(dropout)}"),
        )


class MHCFoldedAdapter(_HyperConnectionsBase):
    """``hyper_connections.ManifoldConstrainedHyperConnections`` (mHC, streams folded into the
    batch) as a kit impl.

    Shapes as on the base; computes in float32 inside and returns ``x``'s dtype.

    Raises:
        ImportError: hyper-connections is not installed.
        ValueError: ``n``/``d``/``sinkhorn_iters``/``num_dynamic_alpha_proposals`` not positive
            ints, ``dropout`` outside ``[0, 1)``.
    """

    kind: Kind = "mhc"
    folded = True

    def __init__(self, n: int, d: int, *, layer_index: int, dtype: torch.dtype, device: str,
                 sinkhorn_iters: int = 20, log_domain_sinkhorn: bool = False,
                 num_dynamic_alpha_proposals: int = 1, dropout: float = 0.0) -> None:
        from hyper_connections.manifold_constrained_hyper_connections import (
            ManifoldConstrainedHyperConnections,
            get_expand_reduce_stream_functions,
        )

        _require_positive(n, d)
        _require_positive(sinkhorn_iters, num_dynamic_alpha_proposals)
        _require_dropout(dropout)
        module = ManifoldConstrainedHyperConnections(
            n, dim=d, layer_index=layer_index, sinkhorn_iters=sinkhorn_iters,
            log_domain_sinkhorn=log_domain_sinkhorn, dropout=dropout,
            num_dynamic_alpha_proposals=num_dynamic_alpha_proposals)
        super().__init__(n, d, module, get_expand_reduce_stream_functions(n), dtype, device)
        self.conventions = _mhc_conventions(
            "ManifoldConstrainedHyperConnections", FOLDED, sinkhorn_iters, log_domain_sinkhorn,
            num_dynamic_alpha_proposals, dropout)


class MHCv2Adapter(_HyperConnectionsBase):
    """``hyper_connections.mHCv2.ManifoldConstrainedHyperConnections`` (mHC, ``[B,T,n,d]``)
    as a kit impl.

    Shapes as on the base; computes in float32 inside and returns ``x``'s dtype.

    Raises:
        ImportError: hyper-connections is not installed.
        ValueError: as :class:`MHCFoldedAdapter`.
    """

    kind: Kind = "mhc"
    folded = False

    def __init__(self, n: int, d: int, *, layer_index: int, dtype: torch.dtype, device: str,
                 sinkhorn_iters: int = 20, log_domain_sinkhorn: bool = False,
                 num_dynamic_alpha_proposals: int = 1, dropout: float = 0.0,
                 mix_streams_before_norm: bool = False,
                 use_triton_sinkhorn: bool = False) -> None:
        from hyper_connections.mHCv2 import (
            ManifoldConstrainedHyperConnections,
            get_expand_reduce_stream_functions,
        )

        _require_positive(n, d)
        _require_positive(sinkhorn_iters, num_dynamic_alpha_proposals)
        _require_dropout(dropout)
        module = ManifoldConstrainedHyperConnections(
            n, dim=d, layer_index=layer_index, sinkhorn_iters=sinkhorn_iters,
            log_domain_sinkhorn=log_domain_sinkhorn, dropout=dropout,
            num_dynamic_alpha_proposals=num_dynamic_alpha_proposals,
            mix_streams_before_norm=mix_streams_before_norm,
            use_triton_sinkhorn=use_triton_sinkhorn)
        triton_note = ""
        if use_triton_sinkhorn:
            triton_note = _use_triton_sinkhorn(module, sinkhorn_iters, device)
            log_domain_sinkhorn = True  # the kernel normalises log-probabilities
        super().__init__(n, d, module, get_expand_reduce_stream_functions(n), dtype, device)
        layout = "[B, T, n, d] (the kit's layout, no folding)"
        if mix_streams_before_norm:
            layout += "; a 1×1 conv over the streams (identity init) mixes the norm input only"
        self.conventions = _mhc_conventions(
            "mHCv2.ManifoldConstrainedHyperConnections", layout + triton_note, sinkhorn_iters,
            log_domain_sinkhorn, num_dynamic_alpha_proposals, dropout)


def _use_triton_sinkhorn(module: Any, iters: int, device: str) -> str:
    """Make ``module`` constrain ``H_res`` with the package's Triton Sinkhorn kernel
    (``TritonSinkhornFunction``: log-domain, column then row log-softmax per round, forward
    and backward kernels), in whichever Triton mode applies here; return the note for the
    conventions. The package itself calls the kernel only when a CUDA device exists and the
    logits are CUDA tensors, and falls back silently to its PyTorch plain-domain Sinkhorn on
    any exception; the adapter calls the kernel directly, so the kernel is what is checked and
    its failures are seen.

    Raises:
        ValueError: the Triton kernels cannot take ``device`` tensors in this process.
    """
    from hyper_connections.triton_sinkhorn import (
        TritonSinkhornFunction,
        sinkhorn_kernel_forward_log,
    )

    mode = kernel_mode(sinkhorn_kernel_forward_log)
    mode.require_device(device, "hyper-connections' Triton Sinkhorn")

    def triton_sinkhorn(logits: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = TritonSinkhornFunction.apply(logits, iters)
        return out

    module.residual_mix_constraint_fn = triton_sinkhorn
    return (f"; H_res from the package's Triton Sinkhorn kernel, called directly (the package "
            f"would call it only for CUDA tensors and fall back silently on any error); "
            f"Triton mode: {mode.name} ({mode.reason})")


def _require_dropout(dropout: float) -> None:
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout: expected 0 <= dropout < 1, got {dropout!r}")


def _mhc_conventions(cls: str, layout: str, iters: int, log_domain: bool, proposals: int,
                     dropout: float) -> Conventions:
    domain = "log domain" if log_domain else "plain domain (max shift, exp, L1 normalise)"
    return Conventions(
        branch_input="x_in", reduce="sum", compute_dtype=torch.float32,
        sinkhorn_iterations=iters, sinkhorn_exact_axis="columns",
        notes=(f"hyper-connections {cls}: {layout}; {ORIENTATION}; Sinkhorn–Knopp {iters} "
               f"rounds in the {domain}, exact in H_res columns; weights per stream from "
               f"RMSNorm(X_s) (not vec(X)), computed in float32; {proposals} dynamic "
               f"proposal(s) averaged after the constraints; {_dropout_note(dropout)}"),
    )


def _factory(cls: Callable[..., _HyperConnectionsBase], doc: str) -> Callable[..., Any]:
    def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0, **options: Any) -> _HyperConnectionsBase:
        with seeded(seed, device):
            return cls(n, d, layer_index=layer_index, dtype=dtype, device=device, **options)

    make.__doc__ = doc
    return make


make_hc = _factory(HyperConnectionsAdapter, """\
Factory (kit target form) for ``hyper_connections.HyperConnections``; keyword ``options`` are
the package's ``tanh`` and ``dropout``.

Raises:
    ImportError: hyper-connections is not installed. ValueError: see the adapter class.
""")

make_mhc = _factory(MHCFoldedAdapter, """\
Factory for ``hyper_connections.ManifoldConstrainedHyperConnections`` (folded layout);
``options``: ``sinkhorn_iters``, ``log_domain_sinkhorn``, ``num_dynamic_alpha_proposals``,
``dropout``.

Raises:
    ImportError: hyper-connections is not installed. ValueError: see the adapter class.
""")

make_mhc_v2 = _factory(MHCv2Adapter, """\
Factory for ``hyper_connections.mHCv2.ManifoldConstrainedHyperConnections``; ``options`` as
:func:`make_mhc` plus ``mix_streams_before_norm``.

Raises:
    ImportError: hyper-connections is not installed. ValueError: see the adapter class.
""")
