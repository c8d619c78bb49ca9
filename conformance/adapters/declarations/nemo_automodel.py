"""Declarations of the NeMo Automodel targets (:mod:`hcspec.conformance.adapters.nemo_automodel`):
DeepSeek-V4 and DeepSeek-V4.1 (single-pass mHC, with the ``stack`` capability)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "0.7.0"
"""The nemo-automodel version these adapters were read and checked against."""

TRANSFORMERS_PIN: Final = "5.18.0"
"""The transformers release nemo-automodel 0.7.0 pins (``transformers==5.18.0``), which its
model packages import (configs, ``PreTrainedModel``); installed beside it, the adapters run on
the CPU (nemo-automodel itself goes in with ``--no-deps``)."""

_ADAPTER: Final = "hcspec.conformance.adapters.nemo_automodel"
_MODELS: Final = "nemo_automodel.components.models"

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "nemo_automodel:deepseek-v4", f"{_ADAPTER}:make_deepseek_v4",
        "nemo-automodel: DeepseekV4HyperConnection composed as DeepseekV4Block does "
        "(X' = post·F + combᵀ X, softmax Sinkhorn, post = 2σ), DeepseekV4HyperHead reduction",
        requires=f"{_MODELS}.deepseek_v4.model", distribution="nemo-automodel",
        written_for=WRITTEN_FOR,
    ),
    BuiltinTarget(
        "nemo_automodel:deepseek-v41", f"{_ADAPTER}:make_deepseek_v41",
        "nemo-automodel: DeepseekV41HyperConnection with its own collapse/expand as "
        "DeepseekV41Block composes them; one sublayer reads with its own pre-mix, the stack "
        "capability carries each sublayer's pre-mix to the next (single-pass mHC)",
        requires=f"{_MODELS}.deepseek_v41.model", distribution="nemo-automodel",
        written_for=WRITTEN_FOR,
    ),
)
"""The built-in NeMo Automodel targets (discovered by :mod:`hcspec.conformance.targets`)."""
