"""Declarations of the vLLM wheel's Triton and CPU mHC targets
(:mod:`hcspec.conformance.adapters.vllm_wheel`); ``vllm:mhc-torch`` is declared in
:mod:`.vllm_mhc` (the wheel first, the checkout as fallback)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

WRITTEN_FOR: Final = "0.33.0"
"""The vLLM release the adapters were read against."""


def cpu_unavailable() -> str | None:
    """Why the compiled CPU ops cannot run here, or None (imports the adapter, and vLLM, only
    when vLLM is installed)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed"
    from hcspec.conformance.adapters.vllm_wheel import cpu_unavailable as check

    return check()


TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "vllm:mhc-triton", "hcspec.conformance.adapters.vllm_wheel:make_triton",
        "vLLM's Triton mHC kernels (split-K pre gate, collapse, HC head) with its torch "
        "Sinkhorn (it has no Triton one) and post, DeepSeek-V4's settings; bfloat16 state",
        requires="vllm", distribution="vllm",
        written_for=WRITTEN_FOR, detail="hcspec.conformance.adapters._triton:environment_note",
    ),
    BuiltinTarget(
        "vllm:mhc-tilelang", "hcspec.conformance.adapters.vllm_wheel:make_tilelang",
        "vLLM's TileLang mHC kernels (mhc_pre_tilelang, mhc_post_tilelang: MHCPreOp / "
        "MHCPostOp.forward_cuda), DeepSeek-V4's settings; a CUDA device only",
        requires="tilelang", distribution="vllm", written_for=WRITTEN_FOR,
    ),
    BuiltinTarget(
        "vllm:mhc-cpu", "hcspec.conformance.adapters.vllm_wheel:make_cpu",
        "vLLM's compiled CPU mHC ops (mhc_pre_cpu, mhc_post_cpu over vllm._C), DeepSeek-V4's "
        "settings; bfloat16 state",
        requires="vllm.model_executor.kernels.mhc.cpu", distribution="vllm",
        written_for=WRITTEN_FOR,
        available="hcspec.conformance.adapters.declarations.vllm_wheel:cpu_unavailable",
    ),
)
"""The vLLM wheel's Triton and CPU targets."""
