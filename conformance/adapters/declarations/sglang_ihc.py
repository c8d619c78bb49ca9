"""Declarations of SGLang's HY-V4 iHC target (:mod:`hcspec.conformance.adapters.sglang_ihc`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "0.5.23"
"""The release the adapter was read against."""

_TRITON_NOTE: Final = "hcspec.conformance.adapters._triton:environment_note"

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "sglang:ihc", "hcspec.conformance.adapters.sglang_ihc:make",
        "SGLang's HY-V4 iHC Triton kernels (hy4_ihc.py: fused_hy4_ihc_pre, fused_hy4_ihc_post "
        "as HYV4HCLayer calls them; no mixing matrix), fused_hy4_ihc_head as reduce; float32 "
        "parameters", requires="sglang.kernels.ops.layernorm.hy4_ihc", distribution="sglang",
        written_for=WRITTEN_FOR, detail=_TRITON_NOTE,
    ),
)
"""The module's built-in targets."""
