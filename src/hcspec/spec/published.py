"""The names of the published parameterizations: the parameter layouts that checkpoints and
papers use, each defining one step of a hyper-connected sublayer from its own tensors.

Also each layout's settings and their published defaults (:data:`SETTINGS`), and the
:class:`~hcspec.spec.record.Formula` the two mHC layouts state at given settings
(:func:`formula`): the record every reader of a published step's degrees of freedom uses.

Pure data (no sympy, no torch) so that the kit's declarations and ``Conventions`` can name a
layout without importing either. The formulas are in :mod:`hcspec.formulas.published` (the
PyTorch statement, which the reference and the kit share) and
:mod:`hcspec.spec.theorems.published` (the theorems that each step, under its mapping, is the
spec's closed form ``X' = H_res X + h_post F(h_preᵀ X)ᵀ``; the DeepSeek-V4 one reads its gates
and orientation from :data:`DEEPSEEK_V4_FORMULA`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from hcspec.spec.record import Formula, Gate, SinkhornSpec

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

SETTINGS: Final[dict[str, dict[str, float]]] = {
    DEEPSEEK_V4: {"hc_eps": 1e-6, "norm_eps": 1e-6, "sinkhorn_iters": 20},
    MHC_PAPER: {"norm_eps": 1e-6, "sinkhorn_iters": 20},
    HC_STATIC: {},
    HC_DYNAMIC: {"norm_eps": 1e-5},
}
"""Each layout's settings (plain numbers a checkpoint may carry) and their published defaults."""


def formula(name: str, settings: Mapping[str, object] | None = None) -> Formula | None:
    """The step record layout ``name`` states, at ``settings`` (missing ones: the defaults of
    :data:`SETTINGS`; entries that are not settings are ignored), or None for the HC layouts
    (no Sinkhorn–Knopp, no gates) and for the gated ``qwen4-exp`` (an element-wise read, no
    per-stream gates: its record is :class:`hcspec.spec.record.GatedFormula`).

    ``deepseek-v4``: ``h_pre = σ(·) + hc_eps``, ``h_post = 2σ(·)``, ``comb`` the
    ``softmax``-first variant counted from the softmax, ``columns`` of ``comb`` normalised
    last, ``hc_eps`` after the softmax and in every denominator, ``sinkhorn_iters`` rounds,
    ``H_res = combᵀ`` (``transposed``). ``mhc-paper``: mHC Eq. 8–9 (σ, 2σ, ``exp``,
    ``sinkhorn_iters`` column-then-row rounds).

    Raises:
        ValueError: an unknown layout, or settings the record rejects (an eps outside
            [0, 1), ``sinkhorn_iters < 1``).
    """
    if name == QWEN4_EXP:
        return None
    if name not in SETTINGS:
        raise ValueError(f"unknown published parameterization {name!r}; "
                         f"known: {', '.join(PARAMETERIZATIONS)}")
    given = dict(settings or {})

    def setting(key: str) -> float:
        value = given.get(key, SETTINGS[name][key])
        if not isinstance(value, (int, float)):
            raise ValueError(f"published {name}: setting {key!r} must be a number, got "
                             f"{value!r}")
        return float(value)

    if name == DEEPSEEK_V4:
        return deepseek_v4_formula(setting("hc_eps"), int(setting("sinkhorn_iters")))
    if name == MHC_PAPER:
        return mhc_paper_formula(int(setting("sinkhorn_iters")))
    return None


def deepseek_v4_formula(hc_eps: float = 1e-6, sinkhorn_iters: int = 20) -> Formula:
    """DeepSeek-V4's step (:func:`formula`) at ``hc_eps`` and ``sinkhorn_iters``.

    Raises:
        ValueError: ``hc_eps`` outside [0, 1) or ``sinkhorn_iters < 1``.
    """
    return Formula(h_pre=Gate(1.0, hc_eps), h_post=Gate(2.0),
                   sinkhorn=SinkhornSpec("softmax", "rounds_from_softmax", "columns", hc_eps,
                                         hc_eps, sinkhorn_iters),
                   transposed=True)


def mhc_paper_formula(sinkhorn_iters: int = 20) -> Formula:
    """The mHC paper's step (Eq. 8–9, :func:`formula`) with ``sinkhorn_iters`` rounds.

    Raises:
        ValueError: ``sinkhorn_iters < 1``.
    """
    return Formula(sinkhorn=SinkhornSpec(iterations=sinkhorn_iters))


DEEPSEEK_V4_FORMULA: Final = deepseek_v4_formula()
"""DeepSeek-V4's step at its published settings (``hc_eps = 1e-6``, 20 iterations)."""

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
