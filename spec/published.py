"""The names of the published parameterizations: the parameter layouts that checkpoints and
papers use, each defining one step of a hyper-connected sublayer from its own tensors.

Pure data (no sympy, no torch) so that the kit's declarations and ``Conventions`` can name a
layout without importing either. The formulas are in :mod:`hcspec.reference.published` (the
readable PyTorch form) and :mod:`hcspec.spec.theorems.published` (the theorems that each
step, under its mapping, is the spec's closed form ``X' = H_res X + h_post F(h_preᵀ X)ᵀ``).
"""

from __future__ import annotations

from typing import Final, Literal

Parameterization = Literal["deepseek-v4", "mhc-paper", "hc-static", "hc-dynamic", "qwen4-exp"]

DEEPSEEK_V4: Final = "deepseek-v4"
MHC_PAPER: Final = "mhc-paper"
HC_STATIC: Final = "hc-static"
HC_DYNAMIC: Final = "hc-dynamic"
QWEN4_EXP: Final = "qwen4-exp"

PARAMETERIZATIONS: Final[tuple[Parameterization, ...]] = (
    DEEPSEEK_V4, MHC_PAPER, HC_STATIC, HC_DYNAMIC, QWEN4_EXP)
"""Every published parameterization, by name."""

SOURCES: Final[dict[str, str]] = {
    DEEPSEEK_V4: ("DeepSeek-V4 checkpoints (hc_attn_fn / hc_attn_scale / hc_attn_base per "
                  "layer and sublayer), as transformers 5.23.0 DeepseekV4HyperConnection and "
                  "TileKernels tile_kernels/torch/mhc.py compute them"),
    MHC_PAPER: "mHC arXiv:2512.24880 §4.2, Eq. 5-9 (φ, b, α; t_max rounds of Sinkhorn-Knopp)",
    HC_STATIC: "HC arXiv:2409.19606 §2.2, Eq. 1-5 (B, A_m, A_r)",
    HC_DYNAMIC: "HC arXiv:2409.19606 §2.3, Eq. 10-13 (B, A_m, A_r; W_β, W_m, W_r; s_α, s_β)",
    QWEN4_EXP: ("Qwen4-exp checkpoints (hc_norm.weight, input_mix_weight_down/up, "
                "block_inject_weight per sublayer), as transformers 5.23.0 "
                "Qwen4ExpTextGatedResidual computes them (hcspec.formulas.gated)"),
}
"""Where each parameterization's formulas come from."""
