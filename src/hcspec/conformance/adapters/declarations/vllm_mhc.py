"""Declaration of the vLLM torch mHC target (:mod:`hcspec.conformance.adapters.vllm_mhc`): the
file ``vllm/model_executor/kernels/mhc/torch.py`` of a vLLM checkout, loaded by path."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Lane
from hcspec.conformance.adapters._by_path import unavailable_reason

WRITTEN_FOR: Final = "c0089373bbe08c607cf9d3d757d76f739ac578ac"
"""The vLLM commit whose ``torch.py`` this adapter was read against (no PyPI release is
checked: the file is loaded from the user's checkout)."""

CHECKOUT_ENV: Final = "HC_VLLM_CHECKOUT"
"""Environment variable naming the root of the vLLM checkout to load the file from."""

REFERENCE_FILE: Final = "vllm/model_executor/kernels/mhc/torch.py"
"""The file's path inside a checkout (``mhc_pre_torch``, ``mhc_post_torch``)."""


def unavailable() -> str | None:
    """Why the file cannot be found here, or None: the target's ``available`` check (the
    installed vLLM wheel's copy, else the checkout's)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        return None
    return unavailable_reason(CHECKOUT_ENV, REFERENCE_FILE, "vLLM")


TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "vllm:mhc-torch", "hcspec.conformance.adapters.vllm_mhc:make_wheel_first",
        f"vLLM's torch mHC path ({REFERENCE_FILE} of the installed wheel, else of "
        f"${CHECKOUT_ENV}, loaded by path) "
        "composed as mhc_pre_torch / mhc_post_torch with DeepSeek-V4's arguments "
        "(post multiplier 2, 20 Sinkhorn rounds); bfloat16 state",
        requires=None, distribution="vllm", written_for=WRITTEN_FOR,
        available=f"{__name__}:unavailable",
        lane=Lane(".ci/lanes/vllm", "pip install --no-deps vllm==0.33.0 triton==3.9.0; pip "
                  "install transformers==5.20.0",
                  note="The lane loads torch.py from the installed wheel."),
    ),
)
"""The built-in vLLM torch target; listed as not usable until vLLM is installed or
``$HC_VLLM_CHECKOUT`` names a checkout with the file (the wheel wins when both are there)."""
