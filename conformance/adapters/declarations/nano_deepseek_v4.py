"""Declaration of the nano-deepseek-v4 target
(:mod:`hcspec.conformance.adapters.nano_deepseek_v4`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "0.2.0"
"""The nano-deepseek-v4 version this adapter was written and checked against."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "nano_deepseek_v4:mhc", "hcspec.conformance.adapters.nano_deepseek_v4:make",
        "nano-deepseek-v4: modeling.HyperConnection composed as DeepSeekV4DecoderLayer does "
        "(DeepSeek-V4 style, comb @ streams, config defaults: 8 Sinkhorn rounds)",
        requires="nano_deepseek_v4", distribution="nano-deepseek-v4", written_for=WRITTEN_FOR,
    ),
)
"""The built-in target of nano-deepseek-v4 (discovered by :mod:`hcspec.conformance.targets`)."""
