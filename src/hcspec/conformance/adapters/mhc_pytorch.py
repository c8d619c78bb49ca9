"""Adapter for ``mhc-pytorch`` (PyPI; import name ``mhc``), written against version
:data:`WRITTEN_FOR`. TARGET ``mhc_pytorch:mhc``.

**Import-name clash.** The distribution installs the top-level module ``mhc``, which other
packages also use. Never install two distributions that provide ``mhc`` into one environment:
one silently overwrites the other's files. The kit checks which distribution provides ``mhc``
before it loads this adapter (:mod:`hcspec.conformance.subjects.targets`).

What ``mhc.ManifoldHyperConnections(dim, num_streams, block, collapse_mode)`` does (read from
its source): ``forward(h [B, T, d])`` replicates ``h`` into n streams, ``X = 1_n hᵀ``; computes
the weights from ``RMSNorm(vec(X))`` over ``n·d`` (mHC Eq. 7, no learnable gain), ``h_pre =
σ(·)``, ``h_post = 2σ(·)`` and ``H_res`` by 20 rounds of Sinkhorn–Knopp in the plain domain,
each normalising the rows and then the columns (so ``1ᵀ H_res = 1ᵀ`` is exact), in the row
form ``X' = H_res X + h_post zᵀ`` with ``z = block(h_preᵀ X)``; and then **collapses** ``X'``
back to ``[B, T, d]`` (the mean of the streams, or ``Σ_i h_pre[i] X'_i``). The multi-stream
state never leaves the call.

How the adapter presents that to the kit, and declares it:

* **State domain.** The package can only be given states ``X = 1_n hᵀ``; the adapter's
  ``forward`` accepts exactly those (and raises ``ValueError`` for any other state rather than
  pick one stream). It declares ``state_domain="replicated"``, so the kit draws replicated
  states and reports the properties that need a general state *not applicable*.
* **Output.** ``forward`` returns the package's own per-stream ``X'`` (before the collapse),
  recorded from the call (the ``+`` whose first operand is the ``H_res X`` product); the public,
  collapsed output is :meth:`MhcPytorchAdapter.forward_collapsed`.
* **Branch.** The package calls the ``block`` given at construction; the adapter passes a slot
  module that calls the kit's branch for the current call (exactly once per forward).
* **Weights.** The two ``torch.sigmoid`` results (``h_pre``, and the doubled one for
  ``h_post``) and the ``H_res`` operand of ``torch.matmul``, recorded from the call.
* **Precision.** The module is moved to the factory's dtype and computes in it.
* ``layer_index`` has no meaning for this package (no layer-dependent init); ``seed`` seeds its
  random ``nn.Linear`` init.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import nn

from hcspec.conformance.adapters._capture import (
    CallRecorder,
    PackageChanged,
    WrapsModule,
    check_branch_output,
    check_state,
    seeded,
)
from hcspec.conformance.adapters.declarations.mhc_pytorch import WRITTEN_FOR
from hcspec.conformance.protocol import Branch, Conventions, Kind, Weights

CollapseMode = Literal["mean", "weighted"]


class _BranchSlot(nn.Module):
    """The ``block`` handed to the package: calls whichever branch is set for this call.
    The branch is kept outside ``nn.Module``'s registry (a branch that is a module must not
    become a child: its parameters are not the connection's)."""

    def __init__(self) -> None:
        super().__init__()
        self.fn: Branch | None = None

    def set(self, fn: Branch | None) -> None:
        """Use ``fn`` for the next call (None: none)."""
        object.__setattr__(self, "fn", fn)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.fn is None:
            raise RuntimeError("mhc-pytorch adapter: the block was called outside forward")
        return check_branch_output(self.fn(h), h)


class MhcPytorchAdapter(WrapsModule):
    """``mhc.ManifoldHyperConnections`` (mhc-pytorch) as a kit impl on replicated states.

    Shapes: ``forward(x [B,T,n,d], branch) -> X' [B,T,n,d]`` for ``x = 1_n hᵀ`` per token;
    ``forward_collapsed(h [B,T,d], branch) -> [B,T,d]``; ``weights(x)`` ->
    ``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])``, already in the row form.
    Dtype/device: the factory's; the package computes in the module's dtype.

    Raises:
        ImportError: mhc-pytorch is not installed.
        ValueError: ``n``/``d`` not positive ints, or an unknown ``collapse_mode``.

    ``parameters``, ``buffers`` and the training mode are the module's (:class:`WrapsModule`):
    φ_pre, φ_post, φ_res (with biases), α, b, and the weight of an ``nn.RMSNorm`` the package
    builds but never uses; the package has no mode-dependent operation.
    """

    kind: Kind = "mhc"

    def __init__(self, n: int, d: int, *, dtype: torch.dtype, device: str,
                 collapse_mode: CollapseMode = "mean") -> None:
        from mhc import ManifoldHyperConnections

        for name, value in (("n", n), ("d", d)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if collapse_mode not in ("mean", "weighted"):
            raise ValueError(f"collapse_mode: expected 'mean' or 'weighted', got {collapse_mode!r}")
        self.n, self.d = n, d
        self._slot = _BranchSlot()
        self.module: Any = ManifoldHyperConnections(d, n, self._slot, collapse_mode=collapse_mode)
        self.module.to(dtype=dtype, device=device)
        self.conventions = Conventions(
            branch_input="x_in", sinkhorn_iterations=20, sinkhorn_exact_axis="columns",
            state_domain="replicated",
            notes=("mhc-pytorch ManifoldHyperConnections(collapse_mode="
                   f"{collapse_mode!r}): each call replicates h [B,T,d] into n streams and "
                   "collapses X' back (outside the protocol: forward returns the recorded "
                   "per-stream X'); weights from rms_norm(vec(X)) over n·d, α = 1 at init; "
                   "Sinkhorn–Knopp 20 rounds, plain exp without shift, rows then columns "
                   "(columns exact); computes in the module dtype"),
        )

    # --- the protocol ---------------------------------------------------------------------
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """The package's per-stream ``X'`` for a replicated ``x [B, T, n, d]``; ``branch`` is
        called once.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]`` or its streams differ.
            PackageChanged: the per-stream state cannot be found in the package's forward.
        """
        streams, _ = self._run(self._hidden(x), branch)
        return streams

    def forward_collapsed(self, h: torch.Tensor, branch: Branch) -> torch.Tensor:
        """The package's public output for ``h [B, T, d]`` (collapsed over the streams)."""
        _, out = self._run(h, branch)
        return out

    def weights(self, x: torch.Tensor) -> Weights:
        """``(h_pre, h_post, H_res)`` the package computes for a replicated ``x``,
        differentiable w.r.t. ``x`` and the parameters.

        Raises:
            ValueError: as :meth:`forward`.
            PackageChanged: not exactly two ``torch.sigmoid`` calls and one ``torch.matmul``.
        """
        h = self._hidden(x)
        with CallRecorder() as recorder:
            self._call(h, torch.zeros_like)
        sigmoids, matmuls = recorder.of(torch.sigmoid), recorder.of(torch.matmul)
        if len(sigmoids) != 2 or len(matmuls) != 1:
            raise PackageChanged(
                f"mhc-pytorch: expected 2 sigmoid and 1 matmul calls (version {WRITTEN_FOR}), "
                f"saw {len(sigmoids)} and {len(matmuls)}")
        h_pre = sigmoids[0].result
        doubled = [c.result for c in recorder.calls
                   if c.func is not torch.sigmoid and any(a is sigmoids[1].result for a in c.args)]
        if len(doubled) != 1:
            raise PackageChanged(f"mhc-pytorch: h_post = 2σ(·) not found (version {WRITTEN_FOR})")
        return h_pre, doubled[0], matmuls[0].args[0]

    # --- internals ------------------------------------------------------------------------
    def _hidden(self, x: torch.Tensor) -> torch.Tensor:
        check_state(x, self.n, self.d)
        h = x[:, :, 0, :]
        if not torch.equal(x, h.unsqueeze(2).expand_as(x)):
            raise ValueError(
                "mhc-pytorch replicates a [B, T, d] hidden state into its n streams on every "
                "call and cannot take a general [B, T, n, d] state (the streams of x differ); "
                "the adapter declares state_domain='replicated'")
        return h

    def _call(self, h: torch.Tensor, branch: Branch) -> torch.Tensor:
        self._slot.set(branch)
        try:
            out: torch.Tensor = self.module(h)
        finally:
            self._slot.set(None)
        return out

    def _run(self, h: torch.Tensor, branch: Branch) -> tuple[torch.Tensor, torch.Tensor]:
        with CallRecorder() as recorder:
            out = self._call(h, branch)
        matmuls = recorder.of(torch.matmul)
        if len(matmuls) != 1:
            raise PackageChanged(
                f"mhc-pytorch: expected one torch.matmul (H_res X) in forward (version "
                f"{WRITTEN_FOR}), saw {len(matmuls)}")
        mixed = matmuls[0].result
        sums = [c.result for c in recorder.calls
                if len(c.args) == 2 and c.args[0] is mixed and isinstance(c.result, torch.Tensor)
                and c.result.shape == mixed.shape]
        if len(sums) != 1:
            raise PackageChanged(
                f"mhc-pytorch: the per-stream state H_res X + h_post zᵀ was not found in forward "
                f"(version {WRITTEN_FOR})")
        return sums[0], out


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0,
         collapse_mode: CollapseMode = "mean") -> MhcPytorchAdapter:
    """Factory (kit target form) for ``mhc.ManifoldHyperConnections``; ``layer_index`` is
    accepted and ignored (the package has no layer-dependent init), ``seed`` seeds the random
    ``nn.Linear`` init without touching the caller's random state.

    Raises:
        ImportError: mhc-pytorch is not installed. ValueError: see the adapter class.
    """
    del layer_index
    with seeded(seed, device):
        return MhcPytorchAdapter(n, d, dtype=dtype, device=device, collapse_mode=collapse_mode)
