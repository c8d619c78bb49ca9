"""Declarations of SGLang's Qwen4-exp gated target
(:mod:`hcspec.conformance.adapters.sglang_gated`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Lane

WRITTEN_FOR: Final = "0.5.23"
"""The release the adapter was read against."""

INSTALL: Final = (f"pip install --no-deps sglang=={WRITTEN_FOR} "
                  "triton==3.9.0 (and the modules the lane names)")
"""The install line of CI's sglang lane (.ci/lanes/sglang)."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "sglang:gated", "hcspec.conformance.adapters.sglang_gated:make",
        "SGLang's Qwen4-exp GatedResidual (srt/layers/hyperconnection.py, grouped RMSNorm, "
        "hc_per_branch_norm) called as GatedResidualState does (mix, branch, combine) on its "
        "torch.compile'd torch routes; hyper_connection_mixer as reduce",
        requires="sglang.srt.layers.hyperconnection", distribution="sglang",
        written_for=WRITTEN_FOR,
        lane=Lane(".ci/lanes/sglang", INSTALL),
    ),
)
"""The module's built-in targets."""
