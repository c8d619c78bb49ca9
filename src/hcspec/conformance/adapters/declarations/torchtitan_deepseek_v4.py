"""Declaration of the torchtitan DeepSeek-V4 target
(:mod:`hcspec.conformance.adapters.torchtitan_deepseek_v4`): the file
``torchtitan/models/deepseek_v4/mhc.py`` of a torchtitan checkout (pytorch/torchtitan PR #3634),
loaded by path."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget
from hcspec.conformance.adapters._by_path import unavailable_reason

WRITTEN_FOR: Final = "99222f6454227a4913502b42474fa92939941db8"
"""The head commit of pytorch/torchtitan PR #3634 ("Address DeepSeek V4 review feedback",
2026-08-20) whose ``mhc.py`` this adapter was read against."""

CHECKOUT_ENV: Final = "HC_TORCHTITAN_CHECKOUT"
"""Environment variable naming the root of the torchtitan checkout to load the file from."""

REFERENCE_FILE: Final = "torchtitan/models/deepseek_v4/mhc.py"
"""The file's path inside a checkout (``HcPre``, ``HcPost``, ``HcHead``)."""


def unavailable() -> str | None:
    """Why the file cannot be found here, or None: the target's ``available`` check."""
    return unavailable_reason(CHECKOUT_ENV, REFERENCE_FILE, "torchtitan")


TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "torchtitan:deepseek-v4", "hcspec.conformance.adapters.torchtitan_deepseek_v4:make",
        f"torchtitan's DeepSeek-V4 port ({REFERENCE_FILE} from ${CHECKOUT_ENV}, loaded by "
        "path; PR #3634) composed as DeepSeekV4TransformerBlock does: HcPre, branch, HcPost; "
        "HcHead reduction",
        requires=None, distribution="torchtitan", written_for=WRITTEN_FOR,
        available=f"{__name__}:unavailable",
    ),
)
"""The built-in torchtitan target; listed as not usable until ``$HC_TORCHTITAN_CHECKOUT`` names
a checkout with the file (whose own imports, ``torchtitan.protocols.module``, must resolve)."""
