"""mHC with an orthostochastic ``H_res``: the entrywise square of an orthogonal factor made by
Newton–Schulz iterations, in place of mHC's Sinkhorn–Knopp projection (mHC arXiv:2512.24880
§4.1 names the Birkhoff polytope; the orthostochastic matrices ``Q ∘ Q``, ``Q`` orthogonal, are
doubly stochastic matrices inside it, spec ``constructions.orthostochastic_exact``).

Per token with state ``x_l ∈ R^{n×d}`` (as :mod:`hcspec.reference.manifold`, mHC Eq. 7–8)::

    x'      = RMSNorm(vec(x_l))
    H̃_pre  = α_pre · (x' φ_pre) + b_pre,    h_pre  = σ(H̃_pre)
    H̃_post = α_post · (x' φ_post) + b_post, h_post = 2σ(H̃_post)
    H̃_res  = α_res · mat(x' φ_res) + b_res  ([n, n], row-major as mHC's)
    X₀      = H̃_res / ‖H̃_res‖_F,  X_{t+1} = 1.5 X_t − 0.5 X_t X_tᵀ X_t   (t < T)
    H_res   = X_T ∘ X_T

``X_T`` tends to the orthogonal polar factor of ``H̃_res`` (each singular value ``s`` of
``X₀`` lies in (0, 1] and follows ``s ← 1.5 s − 0.5 s³``, which converges quadratically to 1).
After a finite ``T`` the rows and columns of ``H_res`` miss 1 by the diagonal of
``X_T X_Tᵀ − I``, at most its spectral norm ``max_i |s_i² − 1|`` (spec
``constructions.orthostochastic_inexact``): the bound the conformance constraints derive from
the declared ``T`` and the target's own logits. The torch statement of ``H_res`` is
:func:`hcspec.formulas.mhc.orthostochastic` (the kit's oracle uses the same one). The module
declares ``h_res_construction="orthostochastic"`` with its ``T`` to the conformance kit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import torch
from torch import nn

from hcspec.formulas.mhc import orthostochastic
from hcspec.reference import _checks
from hcspec.reference.connection import HyperConnection, Weights
from hcspec.reference.sinkhorn import working_precision
from hcspec.spec.record import DEFAULT_NEWTON_SCHULZ, Formula

ALPHA_INIT = 0.01
"""Initial gating scalars (mHC App. A.1, as the reference mHC)."""
SUPPORTED = (1, 2, 3, 4, 5, 6, 7, 8)
"""The expansion rates the built-in target declares (``φ_res`` is ``[n·d, n²]`` as mHC's)."""


class OrthoHyperConnection(HyperConnection):
    """mHC with ``H_res = X_T ∘ X_T``, ``X_T`` the Newton–Schulz factor of ``H̃_res``.

    Parameters (as :class:`hcspec.reference.manifold.ManifoldHyperConnection`'s readable form):
    ``phi_pre [n·d, n]``, ``phi_post [n·d, n]``, ``phi_res [n·d, n²]``, ``b_pre [n]``,
    ``b_post [n]``, ``b_res [n, n]``, scalars ``alpha_pre``, ``alpha_post``, ``alpha_res``.
    Init: φ ~ N(0, 1/(n·d)), α = 0.01, ``b_pre = b_post = 0``, ``b_res = I`` (its polar factor
    is ``I``, so ``H_res`` starts next to the identity mixing; the logits start perfectly
    conditioned and 10 iterations meet the float64 rounding from ``s = 1/√8``).

    Args:
        n: expansion rate ≥ 1. d: hidden size ≥ 1. layer_index: stored, ≥ 0.
        iterations: the Newton–Schulz iterations ``T`` run, an int ≥ 1. The class declares
            :data:`~hcspec.spec.record.DEFAULT_NEWTON_SCHULZ` (10) to the kit; another count
            is a bug the kit catches (its mutant runs 9 while declaring 10).
        norm_eps: ε of the RMSNorm of the flattened state (> 0).
        dtype, device: of the parameters.

    Shapes of calls: :class:`hcspec.reference.connection.HyperConnection`; :meth:`logits`
    returns ``(H̃_pre [B,T,n], H̃_post [B,T,n], H̃_res [B,T,n,n])``. float16/bfloat16 compute
    the mean square and the Newton–Schulz iterations in float32 and return the input's dtype.

    Raises:
        ValueError: a size not a positive integer, ``iterations < 1``, ``norm_eps <= 0``.
    """

    kind: ClassVar[str] = "mhc"
    conventions: ClassVar[Mapping[str, object]] = MappingProxyType({
        **HyperConnection.conventions, "h_res_construction": "orthostochastic",
        "formula": Formula(construction="orthostochastic",
                           newton_schulz_iterations=DEFAULT_NEWTON_SCHULZ),
        "supported_expansion_rates": SUPPORTED,
        "notes": f"hcspec reference orthostochastic mHC: H_res = Q∘Q, Q by "
                 f"{DEFAULT_NEWTON_SCHULZ} Newton–Schulz iterations from H̃_res/‖H̃_res‖_F"})
    """The declaration: mHC's gates, ``H_res`` by the ``orthostochastic`` construction with
    10 Newton–Schulz iterations."""

    def __init__(self, n: int, d: int, layer_index: int = 0, *,
                 iterations: int = DEFAULT_NEWTON_SCHULZ, norm_eps: float = 1e-6,
                 dtype: torch.dtype | None = None,
                 device: torch.device | str | None = None) -> None:
        super().__init__(n, d)
        self.layer_index = _checks.non_negative_int("layer_index", layer_index)
        self.formula = Formula(construction="orthostochastic",
                               newton_schulz_iterations=iterations)
        self.iterations = self.formula.newton_schulz_iterations
        if not norm_eps > 0:
            raise ValueError(f"norm_eps must be > 0, got {norm_eps!r}")
        self.norm_eps = float(norm_eps)
        n, nd = self.n, self.n * self.d

        def param(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.empty(shape, dtype=dtype, device=device))

        self.phi_pre = param(nd, n)
        self.phi_post = param(nd, n)
        self.phi_res = param(nd, n * n)
        self.b_pre = param(n)
        self.b_post = param(n)
        self.b_res = param(n, n)
        self.alpha_pre = param()
        self.alpha_post = param()
        self.alpha_res = param()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Apply the init documented on the class (φ from torch's global generator)."""
        std = 1.0 / math.sqrt(self.n * self.d)
        with torch.no_grad():
            for phi in (self.phi_pre, self.phi_post, self.phi_res):
                phi.normal_(0.0, std)
            self.b_pre.zero_()
            self.b_post.zero_()
            self.b_res.copy_(torch.eye(self.n))
            for alpha in (self.alpha_pre, self.alpha_post, self.alpha_res):
                alpha.fill_(ALPHA_INIT)

    def logits(self, x: torch.Tensor) -> Weights:
        """``(H̃_pre [B,T,n], H̃_post [B,T,n], H̃_res [B,T,n,n])`` at ``x [B,T,n,d]`` (mHC
        Eq. 7, row convention: ``H̃_res[..., i, j]`` for ``H_res[i, j]``), in the dtype and on
        the device of ``x``, differentiable.

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]`` with this module's sizes.
        """
        x = self._check_state(x)
        batch, tokens, n, d = x.shape
        flat = x.reshape(batch, tokens, n * d)
        norm = torch.linalg.vector_norm(working_precision(flat), dim=-1, keepdim=True)
        inv_rms = torch.rsqrt(norm.square() / (n * d) + self.norm_eps).to(flat.dtype)
        res = (inv_rms * (flat @ self.phi_res)).reshape(batch, tokens, n, n)
        return (self.alpha_pre * (inv_rms * (flat @ self.phi_pre)) + self.b_pre,
                self.alpha_post * (inv_rms * (flat @ self.phi_post)) + self.b_post,
                self.alpha_res * res + self.b_res)

    def _weights(self, x: torch.Tensor) -> Weights:
        pre, post, res = self.logits(x)
        H = orthostochastic(working_precision(res), self.iterations).to(res.dtype)
        return torch.sigmoid(pre), 2.0 * torch.sigmoid(post), H
