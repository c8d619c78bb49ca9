"""Declarations of vLLM's Qwen4-exp gated target (:mod:`hcspec.conformance.adapters.vllm_gated`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Lane

WRITTEN_FOR: Final = "0.33.0"
"""The release the adapter was read against."""

INSTALL: Final = (f"pip install --no-deps vllm=={WRITTEN_FOR} "
                  "triton==3.9.0; pip install transformers==5.20.0")
"""The install line of CI's vllm lane (.ci/lanes/vllm)."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "vllm:qwen4-exp", "hcspec.conformance.adapters.vllm_gated:make",
        "vLLM's Qwen4-exp GatedResidual (models/qwen4_exp/common/hyperconnection.py, the torch "
        "one, grouped RMSNorm, hc_per_branch_norm): mix, branch, combine; "
        "hyper_connection_mixer as reduce",
        requires="vllm.models.qwen4_exp.common.hyperconnection", distribution="vllm",
        written_for=WRITTEN_FOR,
        lane=Lane(".ci/lanes/vllm", INSTALL),
    ),
)
"""The module's built-in targets."""
