"""Declarations of SGLang's mHC targets (:mod:`hcspec.conformance.adapters.sglang_mhc`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "0.5.23"
"""The SGLang release the adapters were read against."""

_TRITON_NOTE: Final = "hcspec.conformance.adapters._triton:environment_note"

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "sglang:mhc", "hcspec.conformance.adapters.sglang_mhc:make",
        "SGLang's MHCState residual (layer_boundary/residual/mhc.py) with hc_pre / hc_post on "
        "their torch route (TileLang switched off), DeepSeek-V4's settings; bfloat16 state",
        requires="sglang.kernels.ops.layernorm.mhc", distribution="sglang",
        written_for=WRITTEN_FOR,
    ),
    BuiltinTarget(
        "sglang:mhc-tilelang", "hcspec.conformance.adapters.sglang_mhc:make",
        "SGLang's default mHC route: MHCState with hc_pre / hc_post on the TileLang kernels; a "
        "CUDA device only", requires="tilelang", distribution="sglang",
        options={"tilelang": True}, written_for=WRITTEN_FOR,
    ),
    BuiltinTarget(
        "sglang:mhc-triton", "hcspec.conformance.adapters.sglang_mhc:make_triton",
        "SGLang's Triton mHC path of the DeepSeek-V4 layer: hc_mix_stats_sinkhorn (split-K "
        "projection, fused Sinkhorn), mhc_combine, torch post; n·d a multiple of 64 and n a "
        "power of two only (the kit's canonical n=4, d=8 is refused); bfloat16 state",
        requires="sglang.kernels.ops.layernorm.mhc", distribution="sglang",
        written_for=WRITTEN_FOR, detail=_TRITON_NOTE,
    ),
    BuiltinTarget(
        "sglang:mhc-triton-split", "hcspec.conformance.adapters.sglang_mhc:make_triton",
        "SGLang's unfused route: the layer's torch projection, the Triton Sinkhorn "
        "_hc_split_sinkhorn_triton (the gfx1250 port), mhc_combine, torch post; bfloat16 state",
        requires="sglang.kernels.ops.layernorm.mhc", distribution="sglang",
        options={"route": "split"}, written_for=WRITTEN_FOR, detail=_TRITON_NOTE,
    ),
    BuiltinTarget(
        "sglang:mhc-head", "hcspec.conformance.adapters.sglang_mhc:make_triton",
        "sglang:mhc-triton-split with SGLang's fused Triton HC head (mhc_head.py, "
        "fused_hc_head) as reduce; bfloat16 state",
        requires="sglang.kernels.ops.layernorm.mhc_head", distribution="sglang",
        options={"route": "split", "head": True}, written_for=WRITTEN_FOR, detail=_TRITON_NOTE,
    ),
)
"""SGLang's built-in targets."""
