"""Dynamic hyper-connections (DHC): HC arXiv:2409.19606 §2.2 Eq. 10–13 and Alg. 2.

In the paper layout (streams on rows, ``H ∈ R^{n×d}``), with ``H̄ = norm(H)``:

    B(H)   = s_β ∘ tanh(H̄ W_β)ᵀ + B          (Eq. 11)   W_β ∈ R^{d×1}
    A_m(H) = s_α ∘ tanh(H̄ W_m)  + A_m        (Eq. 12)   W_m ∈ R^{d×1}
    A_r(H) = s_α ∘ tanh(H̄ W_r)  + A_r        (Eq. 13)   W_r ∈ R^{d×n}

``norm`` is a per-stream LayerNorm over d without learnable parameters (docs/reference.md; eps 1e-5,
torch's LayerNorm default). One scale ``s_α`` is shared by A_m and A_r, as in Alg. 2 where
W_m and W_r are the columns of a single ``d×(n+1)`` matrix. Init (Eq. 14, §2.2): all ``W = 0``,
``s_α = s_β = 0.01``, static blocks as :mod:`hc_static` — so DHC equals SHC at init exactly.

Internally the streams sit on columns (``S = Hᵀ ∈ R^{d×n}``), so ``H̄ W = S̄ᵀ W``.

Written independently of ``reference/`` (the false-positive check of the conformance kit).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tests.independent._paper_layout import PaperLayoutConnection, check_factory_arguments
from tests.independent.hc_static import assemble_hc_matrix, init_static_blocks

LAYER_NORM_EPS = 1e-5
INIT_SCALE = 0.01


def normalise_columns(columns: Tensor, eps: float = LAYER_NORM_EPS) -> Tensor:
    """LayerNorm without affine over axis -2 (the d axis of streams-on-columns ``[..., d, n]``).

    Equal to ``(s - mean) / sqrt(var + eps)`` per column; computed after dividing by the
    (gradient-free) column max-abs so that states near the dtype's overflow limit still give a
    finite, correct result (the function itself does not depend on that scale). bfloat16 and
    float16 are normalised in float32 (as torch's own LayerNorm accumulates) and cast back.
    A constant column (always the case for d = 1) normalises to exactly 0: the denominator is
    kept ≥ the dtype's tiny so that ``eps / scale²`` underflowing cannot give ``0 · inf``.
    Shapes/dtype/device: as ``columns``.
    """
    work = columns.float() if columns.dtype in (torch.bfloat16, torch.float16) else columns
    tiny = torch.finfo(work.dtype).tiny
    scale = work.detach().abs().amax(dim=-2, keepdim=True).clamp_min(tiny)
    scaled = work / scale
    centred = scaled - scaled.mean(dim=-2, keepdim=True)
    variance = centred.square().mean(dim=-2, keepdim=True)
    denominator = (variance + eps / scale.square()).clamp_min(tiny)
    return (centred * torch.rsqrt(denominator)).to(columns.dtype)


class DynamicHyperConnection(PaperLayoutConnection):
    """DHC for one sublayer: input-dependent paper matrix per token.

    Parameters: static ``A_m [n,1]``, ``B [1,n]``, ``A_r [n,n]``; dynamic ``W_m [d,1]``,
    ``W_r [d,n]``, ``W_beta [d,1]``; scales ``s_alpha``, ``s_beta`` (0-dim).
    """

    kind = "hc-dynamic"

    def __init__(self, n: int, d: int, layer_index: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        super().__init__(n, d, dtype, device)
        self.layer_index = layer_index
        a_m, b, a_r = init_static_blocks(n, layer_index, dtype, device)
        self.A_m = nn.Parameter(a_m)
        self.B = nn.Parameter(b)
        self.A_r = nn.Parameter(a_r)
        self.W_m = nn.Parameter(torch.zeros(d, 1, dtype=dtype, device=device))
        self.W_r = nn.Parameter(torch.zeros(d, n, dtype=dtype, device=device))
        self.W_beta = nn.Parameter(torch.zeros(d, 1, dtype=dtype, device=device))
        self.s_alpha = nn.Parameter(torch.tensor(INIT_SCALE, dtype=dtype, device=device))
        self.s_beta = nn.Parameter(torch.tensor(INIT_SCALE, dtype=dtype, device=device))

    def hc_matrix(self, x: Tensor) -> Tensor:
        """Per-token ``[[0, B(H)], [A_m(H), A_r(H)]]``: ``x [B,T,n,d]`` -> ``[B,T,n+1,n+1]``."""
        columns_bar = normalise_columns(x.transpose(-1, -2))          # S̄: [B, T, d, n]
        streams_bar = columns_bar.transpose(-1, -2)                   # S̄ᵀ = H̄: [B, T, n, d]
        alpha_dyn = self.s_alpha * torch.tanh(streams_bar @ torch.cat([self.W_m, self.W_r], -1))
        beta_dyn = self.s_beta * torch.tanh(streams_bar @ self.W_beta)    # [B, T, n, 1]
        return assemble_hc_matrix(
            a_m=self.A_m + alpha_dyn[..., :1],
            b=self.B + beta_dyn.transpose(-1, -2),
            a_r=self.A_r + alpha_dyn[..., 1:],
        )


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> DynamicHyperConnection:
    """Conformance-kit factory for dynamic HC (the adapter protocol of docs/conformance.md).

    ``seed`` is accepted for the protocol and unused: the paper's init (W = 0) is deterministic.

    Raises:
        TypeError, ValueError: invalid ``n``, ``d``, ``layer_index``, ``dtype``, ``device``
            or ``seed`` (message names the expected and received value).
    """
    resolved = check_factory_arguments(n, d, layer_index, dtype, device, seed)
    return DynamicHyperConnection(n, d, layer_index, dtype, resolved)
