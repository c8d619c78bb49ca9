"""Declarations of the transformers targets (:mod:`hcspec.conformance.adapters.hf_transformers`):
DeepSeek-V4 (current and first release), GLM-5-Next and HY-V4."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "5.23.0"
"""The transformers release the DeepSeek-V4, GLM-5-Next and HY-V4 adapters were read against."""

FIRST_RELEASE: Final = "5.8.0"
"""The first transformers release with DeepSeek-V4 (its own target)."""

_ADAPTER: Final = "hcspec.conformance.adapters.hf_transformers"
_MODELS: Final = "transformers.models"


def _target(name: str, factory: str, what: str, written_for: str, model: str) -> BuiltinTarget:
    # requires the model's module, so a release without the model lists the target as not
    # importable (GLM-5-Next and HY-V4 are not in 5.8.0)
    return BuiltinTarget(f"transformers:{name}", f"{_ADAPTER}:{factory}",
                         f"transformers: {what}",
                         requires=f"{_MODELS}.{model}.modeling_{model}",
                         distribution="transformers", written_for=written_for)


TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    _target("deepseek-v4", "make_deepseek_v4",
            "DeepseekV4HyperConnection (mHC, DeepSeek-V4 style) composed as "
            "DeepseekV4DecoderLayer does, HyperHead reduction", WRITTEN_FOR, "deepseek_v4"),
    _target(f"deepseek-v4-{FIRST_RELEASE}", "make_deepseek_v4_first_release",
            f"DeepseekV4HyperConnection of the first release ({FIRST_RELEASE}: sigmoid "
            "Sinkhorn, post = σ + eps, X' = post·F + comb X)", FIRST_RELEASE, "deepseek_v4"),
    _target("glm5-next", "make_glm5_next",
            "Glm5NextTextHyperConnection (DeepSeek-V4 formulas) composed as its decoder "
            "layer does, mean reduction", WRITTEN_FOR, "glm5_next"),
    _target("hy-v4", "make_hy_v4",
            "HYV4HyperConnection (no mixing matrix: H_res = I) composed as HYV4DecoderLayer "
            "does, HyperHead reduction", WRITTEN_FOR, "hy_v4"),
    _target("qwen4-exp", "make_qwen4_exp",
            "Qwen4ExpTextGatedResidual (gated element-wise read, H_res = I) composed as "
            "Qwen4ExpTextDecoderLayer does, hyper_connection_mixer reduction", WRITTEN_FOR,
            "qwen4_exp"),
)
"""The built-in transformers targets (discovered by :mod:`hcspec.conformance.targets`)."""
