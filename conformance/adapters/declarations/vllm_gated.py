"""Declarations of vLLM's Qwen4-exp gated target (:mod:`hcspec.conformance.adapters.vllm_gated`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "0.33.0"
"""The release the adapter was read against."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "vllm:qwen4-exp", "hcspec.conformance.adapters.vllm_gated:make",
        "vLLM's Qwen4-exp GatedResidual (models/qwen4_exp/common/hyperconnection.py, the torch "
        "one, grouped RMSNorm, hc_per_branch_norm): mix, branch, combine; "
        "hyper_connection_mixer as reduce",
        requires="vllm.models.qwen4_exp.common.hyperconnection", distribution="vllm",
        written_for=WRITTEN_FOR,
    ),
)
"""The module's built-in targets."""
