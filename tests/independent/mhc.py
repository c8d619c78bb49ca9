"""Manifold-constrained hyper-connections (mHC): arXiv:2512.24880 §4.1–4.2, Eq. 3 and 7–9.

Per token the state ``x_l ∈ R^{n×C}`` (C = d here) is flattened stream-major to
``x̃ = vec(x_l) ∈ R^{1×nC}`` and RMS-normalised, ``x' = RMSNorm(x̃)`` (Eq. 7). Then (Eq. 7–8)

    H̃_pre  = α_pre  · (x' φ_pre)       + b_pre      H_pre  = σ(H̃_pre)          ∈ (0, 1)^{1×n}
    H̃_post = α_post · (x' φ_post)      + b_post     H_post = 2σ(H̃_post)        ∈ (0, 2)^{1×n}
    H̃_res  = α_res  · mat(x' φ_res)    + b_res      H_res  = SinkhornKnopp(H̃_res)   (Eq. 9)

and the layer is ``x_{l+1} = H_res x_l + H_postᵀ F(H_pre x_l)`` (Eq. 3). In the row convention
of docs/reference.md this is ``h_pre = H_preᵀ``, ``h_post = H_postᵀ``, ``H_res = H_res``; in the HC
paper layout used internally, ``A_m = H_preᵀ``, ``B = H_post``, ``A_r = H_resᵀ``.

Choices the paper leaves open (documented here, all ours):
- RMSNorm has no learnable gain (a gain on x' would be absorbed into the φ rows) and eps 1e-6;
  it is computed after dividing by the (gradient-free) max-abs so states near overflow are fine.
- ``mat`` is row-major: ``H̃_res[i, j] = (x' φ_res)[i·n + j]``.
- α_pre = α_post = α_res = 0.01 (the paper's init).
- φ_pre, φ_post, φ_res ~ N(0, 1/(nC)) from ``seed`` (so ``x' φ`` has unit variance and the
  dynamic part starts at ~0.01 while still depending on the input, which tests more).
- b_pre = 0 (H_pre = ½ on every stream at α → 0; the branch's own pre-norm absorbs the scale),
  b_post = 0 (H_post = 1, as HC's B = 1), b_res = 4·I (H_res ≈ ((e⁴−1)I + 11ᵀ)/(e⁴+n−1),
  near the identity yet far enough from saturation for gradients to flow).
- Sinkhorn–Knopp: 20 rounds (t_max of the paper), column then row, in the log domain; rows are
  exact, columns within the convergence error.
- Dtypes: for bfloat16/float16 inputs the mappings (norm, projections, σ, Sinkhorn) run in
  float32 and the resulting weights are cast to the input dtype for the mixing; float32 and
  float64 run in their own dtype. So nothing is computed coarser than the input dtype, and the
  declared ``conventions["internal_dtype"]`` is ``"input"`` for every dtype (a declaration that
  changed with the dtype would make the kit's per-impl conventions inconsistent).
- expand replicates, reduce sums (no learned head reduce).

Written independently of ``reference/`` (the false-positive check of the conformance kit).
"""

from __future__ import annotations

import math
from typing import Final

import torch
from torch import Tensor, nn

from tests.independent._paper_layout import PaperLayoutConnection, check_factory_arguments
from tests.independent.hc_static import assemble_hc_matrix
from tests.independent.sinkhorn import DEFAULT_ITERATIONS, sinkhorn_knopp

RMS_NORM_EPS: Final = 1e-6
INIT_ALPHA: Final = 0.01
INIT_RES_DIAGONAL: Final = 4.0
_LOW_PRECISION: Final = (torch.bfloat16, torch.float16)


def rms_normalise(flat: Tensor, eps: float = RMS_NORM_EPS) -> Tensor:
    """``x / sqrt(mean(x²) + eps)`` over the last axis, overflow-safe (mHC Eq. 7's RMSNorm).

    Shapes/dtype/device: as ``flat`` (``[..., nC]``).
    """
    scale = flat.detach().abs().amax(dim=-1, keepdim=True).clamp_min(torch.finfo(flat.dtype).tiny)
    scaled = flat / scale
    return scaled * torch.rsqrt(scaled.square().mean(dim=-1, keepdim=True) + eps / scale.square())


class ManifoldHyperConnection(PaperLayoutConnection):
    """mHC for one sublayer.

    Parameters: ``phi_pre [nd, n]``, ``phi_post [nd, n]``, ``phi_res [nd, n²]``, 0-dim
    ``alpha_pre``, ``alpha_post``, ``alpha_res``, biases ``b_pre [n]``, ``b_post [n]``,
    ``b_res [n, n]``. Attributes ``sinkhorn_iterations`` and ``conventions`` (declared to the
    conformance kit).
    """

    kind = "mhc"

    def __init__(self, n: int, d: int, dtype: torch.dtype, device: torch.device, seed: int,
                 sinkhorn_iterations: int = DEFAULT_ITERATIONS) -> None:
        super().__init__(n, d, dtype, device)
        self.sinkhorn_iterations = sinkhorn_iterations
        self.conventions: dict[str, str] = {
            "branch_input": "x_in",
            "reduce": "sum",
            "sinkhorn_exact_axis": "rows",
            "internal_dtype": "input",   # no coarser than the input's (see the module doc)
        }
        generator = torch.Generator(device="cpu").manual_seed(seed)
        std = 1.0 / math.sqrt(n * d)

        def projection(cols: int) -> nn.Parameter:
            draw = torch.randn(n * d, cols, generator=generator, dtype=torch.float64) * std
            return nn.Parameter(draw.to(dtype=dtype, device=device))

        def scalar(value: float) -> nn.Parameter:
            return nn.Parameter(torch.tensor(value, dtype=dtype, device=device))

        self.phi_pre = projection(n)
        self.phi_post = projection(n)
        self.phi_res = projection(n * n)
        self.alpha_pre = scalar(INIT_ALPHA)
        self.alpha_post = scalar(INIT_ALPHA)
        self.alpha_res = scalar(INIT_ALPHA)
        self.b_pre = nn.Parameter(torch.zeros(n, dtype=dtype, device=device))
        self.b_post = nn.Parameter(torch.zeros(n, dtype=dtype, device=device))
        self.b_res = nn.Parameter(INIT_RES_DIAGONAL * torch.eye(n, dtype=dtype, device=device))

    def mappings(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """mHC Eq. 7–9 in the paper's shapes: ``x [B,T,n,d]`` -> ``H_pre [B,T,1,n]``,
        ``H_post [B,T,1,n]``, ``H_res [B,T,n,n]``.

        Dtype: float32 for bfloat16/float16 inputs, else that of ``x``.
        """
        pre_logits, post_logits, res_logits = self._logits(x)
        h_pre_row = torch.sigmoid(pre_logits)
        h_post_row = 2 * torch.sigmoid(post_logits)
        h_res = sinkhorn_knopp(res_logits, self.sinkhorn_iterations)
        return h_pre_row, h_post_row, h_res

    def _logits(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """mHC Eq. 7: ``H̃_pre [B,T,1,n]``, ``H̃_post [B,T,1,n]``, ``H̃_res [B,T,n,n]`` (dtype
        as :meth:`mappings`)."""
        work = torch.float32 if x.dtype in _LOW_PRECISION else x.dtype

        def p(t: Tensor) -> Tensor:
            return t.to(work)

        n = self.n
        flat = rms_normalise(p(x).reshape(*x.shape[:-2], 1, n * self.d))      # x': [B,T,1,nd]
        pre_logits = p(self.alpha_pre) * (flat @ p(self.phi_pre)) + p(self.b_pre)
        post_logits = p(self.alpha_post) * (flat @ p(self.phi_post)) + p(self.b_post)
        res_logits = (p(self.alpha_res) * (flat @ p(self.phi_res)).reshape(*x.shape[:-2], n, n)
                      + p(self.b_res))
        return pre_logits, post_logits, res_logits

    def logits(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The kit's ``logits`` capability: the pre-activation logits of :meth:`mappings`,
        ``x [B,T,n,d]`` -> ``H̃_pre [B,T,n]``, ``H̃_post [B,T,n]``, ``H̃_res [B,T,n,n]``, the
        last in the row convention (``H_res = SinkhornKnopp(H̃_res)`` acts as ``H_res X``).

        Dtype: float32 for bfloat16/float16 inputs, else that of ``x``.

        Raises:
            ValueError, TypeError: ``x`` is not a ``[B,T,n,d]`` state of this module.
        """
        pre_logits, post_logits, res_logits = self._logits(self._check_state(x))
        return pre_logits.squeeze(-2), post_logits.squeeze(-2), res_logits

    def hc_matrix(self, x: Tensor) -> Tensor:
        """Paper-layout matrix ``[[0, H_post], [H_preᵀ, H_resᵀ]]``.

        Shapes: ``x [B,T,n,d]`` -> ``[B,T,n+1,n+1]``; dtype as :meth:`mappings`.
        """
        h_pre_row, h_post_row, h_res = self.mappings(x)
        return assemble_hc_matrix(a_m=h_pre_row.transpose(-1, -2), b=h_post_row,
                                  a_r=h_res.transpose(-1, -2))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> ManifoldHyperConnection:
    """Conformance-kit factory for mHC (the adapter protocol of docs/conformance.md).

    ``layer_index`` is accepted for the protocol and unused (mHC's init does not depend on it);
    ``seed`` draws φ.

    Raises:
        TypeError, ValueError: invalid ``n``, ``d``, ``layer_index``, ``dtype``, ``device``
            or ``seed`` (message names the expected and received value).
    """
    resolved = check_factory_arguments(n, d, layer_index, dtype, device, seed)
    return ManifoldHyperConnection(n, d, dtype, resolved, seed)
