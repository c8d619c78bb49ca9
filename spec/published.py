"""The names of the published parameterizations: the parameter layouts that checkpoints and
papers use, each defining one step of a hyper-connected sublayer from its own tensors.

Pure data (no sympy, no torch) so that the kit's declarations and ``Conventions`` can name a
layout without importing either. The formulas are in :mod:`hcspec.reference.published` (the
readable PyTorch form) and :mod:`hcspec.spec.theorems.published` (the theorems that each
step, under its mapping, is the spec's closed form ``X' = H_res X + h_post F(h_preᵀ X)ᵀ``).
"""

from __future__ import annotations

from typing import Final, Literal

Parameterization = Literal["deepseek-v4", "mhc-paper", "hc-static", "hc-dynamic"]

DEEPSEEK_V4: Final = "deepseek-v4"
MHC_PAPER: Final = "mhc-paper"
HC_STATIC: Final = "hc-static"
HC_DYNAMIC: Final = "hc-dynamic"

PARAMETERIZATIONS: Final[tuple[Parameterization, ...]] = (
    DEEPSEEK_V4, MHC_PAPER, HC_STATIC, HC_DYNAMIC)
"""Every published parameterization, by name."""

SOURCES: Final[dict[str, str]] = {
    DEEPSEEK_V4: ("DeepSeek-V4 checkpoints (hc_attn_fn / hc_attn_scale / hc_attn_base per "
                  "layer and sublayer), as transformers 5.23.0 DeepseekV4HyperConnection and "
                  "TileKernels tile_kernels/torch/mhc.py compute them"),
    MHC_PAPER: "mHC arXiv:2512.24880 §4.2, Eq. 5-9 (φ, b, α; t_max rounds of Sinkhorn-Knopp)",
    HC_STATIC: "HC arXiv:2409.19606 §2.2, Eq. 1-5 (B, A_m, A_r)",
    HC_DYNAMIC: "HC arXiv:2409.19606 §2.3, Eq. 10-13 (B, A_m, A_r; W_β, W_m, W_r; s_α, s_β)",
}
"""Where each parameterization's formulas come from."""


DEEPSEEK_V4_SITES: Final[tuple[str, ...]] = ("attn", "ffn")
"""The two hyper-connected sites of a DeepSeek-V4 layer, in order: sublayer ``2i`` of a stack is
layer ``i``'s attention site, sublayer ``2i + 1`` its FFN site."""


def deepseek_v4_checkpoint_key(sublayer: int, name: str) -> str:
    """The key of the DeepSeek-V4 layout tensor ``name`` (``"hc_fn"``, ``"hc_scale"`` or
    ``"hc_base"``) of ``sublayer`` (counted from 0 over both sites of every layer) in a
    DeepSeek-V4 checkpoint: ``layers.{i}.hc_{attn|ffn}_{fn|scale|base}`` with
    ``i = sublayer // 2`` and the site :data:`DEEPSEEK_V4_SITES` ``[sublayer % 2]``.

    >>> deepseek_v4_checkpoint_key(3, "hc_fn")
    'layers.1.hc_ffn_fn'

    Raises:
        ValueError: ``sublayer < 0`` or ``name`` not one of the three layout tensors.
    """
    if sublayer < 0 or name not in ("hc_fn", "hc_scale", "hc_base"):
        raise ValueError(f"expected a sublayer >= 0 and one of hc_fn, hc_scale, hc_base; got "
                         f"{sublayer!r}, {name!r}")
    site = DEEPSEEK_V4_SITES[sublayer % 2]
    return f"layers.{sublayer // 2}.hc_{site}_{name.removeprefix('hc_')}"
