"""Declarations of the NeMo Automodel targets (:mod:`hcspec.conformance.adapters.nemo_automodel`):
DeepSeek-V4 and DeepSeek-V4.1 (single-pass mHC, with the ``stack`` capability)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "0.7.0"
"""The nemo-automodel version these adapters were read and checked against."""

TRANSFORMERS_PIN: Final = "5.18.0"
"""The transformers release nemo-automodel 0.7.0 pins (``transformers==5.18.0``), which its
model packages import (configs, ``PreTrainedModel``); installed beside it, the adapters run on
the CPU (nemo-automodel itself goes in with ``--no-deps``)."""

_ADAPTER: Final = "hcspec.conformance.adapters.nemo_automodel"
_MODELS: Final = "nemo_automodel.components.models"

LANE: Final = Lane(".ci/lanes/nemo_automodel",
                   f"pip install --no-deps nemo-automodel=={WRITTEN_FOR}; "
                   f"pip install transformers=={TRANSFORMERS_PIN} pillow==13.0.0",
                   note=f"With transformers {TRANSFORMERS_PIN}, in .ci-venv-nemo.")
"""CI's NeMo Automodel lane."""

STATE_RANK: Final = Finding(
    "block-state-rank-unchecked", "bug",
    "DeepseekV4Block does not check that its state is [B, S, hc_mult, D]; at hc_mult = 1 a "
    "state with no sequence axis [B, 1, D] is returned as [B, B, 1, D] (sample i's weights on "
    "sample j's state) without an error",
    ("shape.other_sequence_axes",), "docs/findings/nemo_automodel.md",
    "docs/findings/repro/nemo_automodel_block_state_rank.py")

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "nemo_automodel:deepseek-v4", f"{_ADAPTER}:make_deepseek_v4",
        "nemo-automodel: DeepseekV4HyperConnection composed as DeepseekV4Block does "
        "(X' = post·F + combᵀ X, softmax Sinkhorn, post = 2σ), DeepseekV4HyperHead reduction",
        requires=f"{_MODELS}.deepseek_v4.model", distribution="nemo-automodel",
        written_for=WRITTEN_FOR, lane=LANE, findings=(STATE_RANK,),
    ),
    BuiltinTarget(
        "nemo_automodel:deepseek-v41", f"{_ADAPTER}:make_deepseek_v41",
        "nemo-automodel: DeepseekV41HyperConnection with its own collapse/expand as "
        "DeepseekV41Block composes them; one sublayer reads with its own pre-mix, the stack "
        "capability carries each sublayer's pre-mix to the next (single-pass mHC)",
        requires=f"{_MODELS}.deepseek_v41.model", distribution="nemo-automodel",
        written_for=WRITTEN_FOR, lane=LANE,
    ),
)
"""The built-in NeMo Automodel targets (discovered by
:mod:`hcspec.conformance.subjects.targets`)."""
