"""Manifold-constrained hyper-connections (mHC).

mHC arXiv:2512.24880 §4.2, Eq. 7–9, per token with state ``x_l ∈ R^{n×C}`` (C = d)::

    x'      = RMSNorm(vec(x_l))                      vec: row-major flatten to 1×nC
    H̃_pre  = α_pre  · (x' φ_pre)  + b_pre           φ_pre:  nC×n
    H̃_post = α_post · (x' φ_post) + b_post          φ_post: nC×n
    H̃_res  = α_res  · mat(x' φ_res) + b_res         φ_res:  nC×n², mat: row-major to n×n
    H_pre = σ(H̃_pre),  H_post = 2σ(H̃_post),  H_res = SinkhornKnopp(H̃_res)

and ``x_{l+1} = H_res x_l + H_postᵀ F(H_pre x_l)`` (Eq. 3), which is the row form of
docs/reference.md (Conventions) with ``h_pre = H_preᵀ``, ``h_post = H_postᵀ``.

The paper fixes α = 0.01 at init and 20 Sinkhorn rounds; the choices it leaves open (RMSNorm
gain, φ and b init) are documented on :class:`ManifoldHyperConnection` and in docs/reference.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar, Literal, get_args

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from hcspec.reference import _checks, fast, published
from hcspec.reference.connection import Branch, HyperConnection, Weights, carriable
from hcspec.reference.sinkhorn import DEFAULT_ITERATIONS, sinkhorn_knopp, working_precision

ALPHA_INIT = 0.01
"""Initial gating scalars α_pre, α_post, α_res (mHC App. A.1, Table 5)."""

RES_INIT_DIAGONAL = 0.7
"""Diagonal of H_res at init (from ``b_res``); see :class:`ManifoldHyperConnection`."""

Implementation = Literal["readable", "fast"]
IMPLEMENTATIONS: tuple[str, ...] = get_args(Implementation)
"""``readable`` (default): plain autograd over the equations; ``fast``:
:mod:`hcspec.reference.fast`."""


def res_bias_for_diagonal(n: int, diagonal: float) -> float:
    """The scalar ``c`` for which ``SinkhornKnopp(c·I)`` has ``diagonal`` on its diagonal.

    ``exp(c·I)`` has equal row and column sums, so Sinkhorn–Knopp only divides it by
    ``e^c + n − 1``: the diagonal is ``e^c / (e^c + n − 1)``, hence
    ``c = log(diagonal · (n − 1) / (1 − diagonal))``. For ``n = 1`` any ``c`` gives ``[1]``;
    0 is returned.

    Raises:
        ValueError: ``n`` not a positive integer or ``diagonal`` outside (0, 1).
    """
    n = _checks.positive_int("n", n)
    if not 0.0 < diagonal < 1.0:
        raise ValueError(f"diagonal must lie in (0, 1), got {diagonal!r}")
    if n == 1:
        return 0.0
    return math.log(diagonal * (n - 1) / (1.0 - diagonal))


class ManifoldHyperConnection(published.Published, HyperConnection):
    """mHC around one sublayer: sigmoid-bounded read/write, Sinkhorn–Knopp-projected mixing.

    Parameters: ``phi_pre [n·d, n]``, ``phi_post [n·d, n]``, ``phi_res [n·d, n²]``,
    ``b_pre [n]``, ``b_post [n]``, ``b_res [n, n]`` and the scalars ``alpha_pre``,
    ``alpha_post``, ``alpha_res``. The RMSNorm of the flattened state has no gain of its own:
    a gain in front of the linear maps φ is absorbed by φ (as the paper's kernels do, §4.3.1).
    ``mat`` is row-major: entry ``n·i + j`` of ``x' φ_res`` is ``H̃_res[i, j]``, where row i is
    the output stream i (``X'_i = Σ_j H_res[i, j] X_j``).

    Initialisation (the paper gives only α = 0.01; the rest is this reference's choice):

    * ``α_pre = α_post = α_res = alpha_init`` (0.01, mHC App. A.1 Table 5).
    * ``φ ~ N(0, 1/(n·d))``: ``x'`` has unit RMS, so each entry of ``x' φ`` has unit variance and
      α sets the size of the input-dependent part (≈ 0.01) as the paper intends. (φ = 0 would
      leave α without gradient at the start and make every token's weights identical.)
    * ``b_pre = 0`` → ``H_pre ≈ 1/2``: σ at its steepest, no stream privileged (HC's one-hot
      ``e_{k mod n}`` is out of a sigmoid's range). With the replicated input the branch reads
      ``(n/2)·h``, and the branch's own pre-norm removes that scale.
    * ``b_post = 0`` → ``H_post ≈ 1``: HC's ``B = 1`` init.
    * ``b_res = c·I`` with ``c = res_bias_for_diagonal(n, res_init_diagonal)`` → ``H_res`` ≈ the
      doubly stochastic matrix with diagonal 0.7 and off-diagonal 0.3/(n−1). Measured trade-off
      (n = 4, init-scale noise 0.01, 20 rounds): nearer identity slows Sinkhorn–Knopp and
      saturates it (diagonal 0.87: column error 5e-6 in float64, Jacobian norm 0.23; 0.95:
      2e-4 and 0.10), uniform (c = 0) mixes all streams into their mean (rank one). 0.7 keeps
      the columns at float32 rounding (~1e-10 in float64) and ~60% of the uniform Jacobian
      while leaving each stream mostly itself. With replicated streams any row-stochastic
      ``H_res`` maps the state to itself, so this choice does not change the initial forward.

    Args:
        n: expansion rate, ≥ 1. d: hidden size, ≥ 1.
        layer_index: the sublayer's index, ≥ 0; stored for a uniform constructor (the mHC init
            does not depend on it).
        sinkhorn_iterations: Sinkhorn–Knopp rounds (``t_max``), ≥ 1; default 20 (mHC §4.2).
        alpha_init: initial α. res_init_diagonal: diagonal of ``H_res`` at init, in (0, 1).
        norm_eps: ε of the RMSNorm of the flattened state.
        implementation: ``"readable"`` (default) computes the equations above with plain
            autograd; ``"fast"`` computes the same values with :mod:`hcspec.reference.fast`
            (custom autograd Functions sharing one gradient buffer, token-last Sinkhorn–Knopp
            with a recomputing backward; once-differentiable). The two agree to rounding
            (tested in float64; the kit checks ``reference:mhc-fast`` under the ci profile).
        recompute: if True, the weight generation (RMS norm, gates, Sinkhorn–Knopp iterates)
            keeps nothing for backward but its input and is recomputed there
            (``torch.utils.checkpoint``), as the mHC paper does for its kernels (§4.3.2):
            less activation memory for one more weight computation per step. The branch's
            own activations are not affected.
        dtype, device: of the parameters (torch's defaults when None).

    Shapes/dtype/device of calls: see :class:`hcspec.reference.connection.HyperConnection`. float16
    and bfloat16 run the Sinkhorn–Knopp rounds in float32 (see :func:`sinkhorn_knopp`).
    Guarantees of :meth:`weights`: ``H_pre ∈ [0, 1]``, ``H_post ∈ [0, 2]``, ``H_res ≥ 0`` with
    rows summing to 1 to rounding and columns to within the Sinkhorn–Knopp convergence error.

    Raises:
        ValueError: a size or count not a positive integer, ``res_init_diagonal`` outside
            (0, 1), ``norm_eps`` not positive, an unknown ``implementation``.
    """

    kind: ClassVar[str] = "mhc"
    conventions: ClassVar[Mapping[str, object]] = MappingProxyType({
        **HyperConnection.conventions, "published": "mhc-paper"})
    """The reference's declaration, and its published layout (mHC Eq. 5-9 names)."""
    NAMES: ClassVar[published.NameMap] = published.NameMap(
        "mhc-paper", {k: k for k in ("phi_pre", "phi_post", "phi_res", "b_pre", "b_post",
                                     "b_res", "alpha_pre", "alpha_post", "alpha_res")},
        settings={"norm_eps": "norm_eps", "sinkhorn_iters": "sinkhorn_iterations"})

    def __init__(
        self,
        n: int,
        d: int,
        layer_index: int = 0,
        *,
        sinkhorn_iterations: int = DEFAULT_ITERATIONS,
        alpha_init: float = ALPHA_INIT,
        res_init_diagonal: float = RES_INIT_DIAGONAL,
        norm_eps: float = 1e-6,
        implementation: Implementation = "readable",
        recompute: bool = False,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(n, d)
        self.layer_index = _checks.non_negative_int("layer_index", layer_index)
        self.sinkhorn_iterations = _checks.positive_int("sinkhorn_iterations", sinkhorn_iterations)
        if not norm_eps > 0:
            raise ValueError(f"norm_eps must be > 0, got {norm_eps!r}")
        self.norm_eps = float(norm_eps)
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(
                f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}"
            )
        self.implementation: Implementation = implementation
        self.recompute = bool(recompute)
        self.alpha_init = float(alpha_init)
        self.res_bias = res_bias_for_diagonal(self.n, res_init_diagonal)
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
        """Apply the init documented on the class (draws φ from torch's global generator)."""
        std = 1.0 / math.sqrt(self.n * self.d)
        with torch.no_grad():
            for phi in (self.phi_pre, self.phi_post, self.phi_res):
                phi.normal_(0.0, std)
            self.b_pre.zero_()
            self.b_post.zero_()
            eye = torch.eye(self.n, dtype=self.b_res.dtype, device=self.b_res.device)
            self.b_res.copy_(self.res_bias * eye)
            for alpha in (self.alpha_pre, self.alpha_post, self.alpha_res):
                alpha.fill_(self.alpha_init)

    def _phi(self) -> torch.Tensor:
        """``[φ_pre | φ_post | φ_res]``, ``[n·d, 2n + n²]`` (mHC Eq. 10 consolidates φ)."""
        return torch.cat([self.phi_pre, self.phi_post, self.phi_res], dim=1)

    def _recomputing(self) -> bool:
        return self.recompute and torch.is_grad_enabled()

    def _weights(self, x: torch.Tensor) -> Weights:
        if self.implementation == "fast":
            batch, tokens, n, _ = x.shape
            projected, square_sum, _, _ = fast.project(x, self._phi())
            h_pre, h_post, H_res = self._fast_gates(projected, square_sum)
            return (h_pre.view(batch, tokens, n), h_post.view(batch, tokens, n),
                    H_res.view(batch, tokens, n, n))
        if self._recomputing():
            weights: Weights = checkpoint(self._readable_weights, x, use_reentrant=False)
            return weights
        return self._readable_weights(x)

    @carriable
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` with this module's weights at ``x`` (as
        :meth:`HyperConnection.forward`, by the selected ``implementation``)."""
        if self.implementation == "readable":
            return super().forward(x, branch)
        x = self._check_state(x)
        batch, tokens, n, d = x.shape
        projected, square_sum, flat, conduit = fast.project(x, self._phi())
        h_pre, h_post, H_res = self._fast_gates(projected, square_sum)
        x_in, conduit = fast.read(flat, conduit, h_pre)
        z = _checks.branch_output(branch(x_in.view(batch, tokens, d)),
                                  torch.Size((batch, tokens, d)))
        out = fast.write(flat, conduit, H_res, h_post, z.reshape(batch * tokens, d))
        return out.view(batch, tokens, n, d)

    def _fast_gates(self, projected: torch.Tensor, square_sum: torch.Tensor) -> Weights:
        """Token-last weight generation: ``x_flat φ [m, N]``, ``‖x_flat‖² [N]`` -> ``h_pre
        [N, n]``, ``h_post [N, n]``, ``H_res [N, n, n]`` (recomputed in backward if asked)."""
        if self._recomputing():
            weights: Weights = checkpoint(self._fast_gates_now, projected, square_sum,
                                          use_reentrant=False)
            return weights
        return self._fast_gates_now(projected, square_sum)

    def _fast_gates_now(self, projected: torch.Tensor, square_sum: torch.Tensor) -> Weights:
        n = self.n
        inv_rms = torch.rsqrt(square_sum / (n * self.d) + self.norm_eps).to(projected.dtype)
        proj = projected * inv_rms
        h_pre = torch.sigmoid(self.alpha_pre * proj[:n] + self.b_pre.unsqueeze(1))
        h_post = 2.0 * torch.sigmoid(self.alpha_post * proj[n : 2 * n] + self.b_post.unsqueeze(1))
        res_logits = self.alpha_res * proj[2 * n :].view(n, n, -1) + self.b_res.unsqueeze(2)
        H_res = fast.sinkhorn_knopp_matrix_first(res_logits, self.sinkhorn_iterations)
        return (h_pre.t().contiguous(), h_post.t().contiguous(),
                H_res.permute(2, 0, 1).contiguous())

    def logits(self, x: torch.Tensor) -> Weights:
        """The pre-activation logits at ``x`` (mHC Eq. 7), the arguments of :meth:`weights`'
        σ, 2σ and Sinkhorn–Knopp: ``x [B,T,n,d]`` -> ``(H̃_pre [B,T,n], H̃_post [B,T,n],
        H̃_res [B,T,n,n])`` in the row convention (``H̃_res[..., i, j]`` for ``H_res[i, j]``),
        in the dtype and device of ``x``, differentiable w.r.t. ``x`` and the parameters.
        Both implementations compute the same logits (this is the readable form).

        Raises:
            ValueError: ``x`` is not ``[B, T, n, d]`` with this module's ``n`` and ``d``.
        """
        return self._readable_logits(self._check_state(x))

    def _readable_logits(self, x: torch.Tensor) -> Weights:
        batch, tokens, n, d = x.shape
        x_flat = x.reshape(batch, tokens, n * d)  # vec(x_l), row-major: stream 0 first
        # RMSNorm(x) φ = (x φ) / rms(x): project first and divide the n² + 2n results, as the
        # paper's kernels do (§4.3.1), so the normalised nd-vector is never materialised;
        # one matmul against [φ_pre | φ_post | φ_res] reads x once (Eq. 10 consolidates φ).
        # the mean square in float32 for float16/bfloat16 inputs (working_precision): the sum
        # of n·d squares overflows float16 from an RMS of √(65504 / (n·d)) on (5.6 at
        # n·d = 2056); its inverse square root comes back in the input's dtype
        norm = torch.linalg.vector_norm(working_precision(x_flat), dim=-1, keepdim=True)
        inv_rms = torch.rsqrt(norm.square() / (n * d) + self.norm_eps).to(x_flat.dtype)
        projected = inv_rms * (x_flat @ self._phi())  # [B, T, 2n + n²]
        proj_pre, proj_post = projected[..., :n], projected[..., n : 2 * n]
        proj_res = projected[..., 2 * n :].reshape(batch, tokens, n, n)  # mat(): row-major
        return (self.alpha_pre * proj_pre + self.b_pre,
                self.alpha_post * proj_post + self.b_post,
                self.alpha_res * proj_res + self.b_res)

    def _readable_weights(self, x: torch.Tensor) -> Weights:
        pre_logits, post_logits, res_logits = self._readable_logits(x)
        h_pre = torch.sigmoid(pre_logits)
        h_post = 2.0 * torch.sigmoid(post_logits)
        H_res = sinkhorn_knopp(res_logits, self.sinkhorn_iterations)
        return h_pre, h_post, H_res

    def extra_repr(self) -> str:
        """The module's line in ``repr``: the base class's fields, ``sinkhorn_iterations``,
        and ``implementation`` and ``recompute`` when they differ from the defaults."""
        extra = f"{super().extra_repr()}, sinkhorn_iterations={self.sinkhorn_iterations}"
        if self.implementation != "readable":
            extra += f", implementation={self.implementation!r}"
        return extra + (", recompute=True" if self.recompute else "")
