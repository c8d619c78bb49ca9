"""Declarations of the vLLM wheel's Triton and CPU mHC targets
(:mod:`hcspec.conformance.adapters.vllm_wheel`); ``vllm:mhc-torch`` is declared in
:mod:`.vllm_mhc` (the wheel first, the checkout as fallback)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "0.33.0"
"""The vLLM release the adapters were read against."""

INSTALL: Final = (f"pip install --no-deps vllm=={WRITTEN_FOR} "
                  "triton==3.9.0; pip install transformers==5.20.0")
"""The install line of CI's vllm lane (.ci/lanes/vllm)."""

KERNEL_NOTE: Final = ("Run on the CPU through Triton's interpreter (TRITON_INTERPRET=1), "
                      "on the lane's --only subset of the properties; the findings are "
                      "those of the whole kernel profile.")
"""The generated file's note for a Triton target of the lane."""


def cpu_unavailable() -> str | None:
    """Why the compiled CPU ops cannot run here, or None (imports the adapter, and vLLM, only
    when vLLM is installed)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed"
    from hcspec.conformance.adapters.vllm_wheel import cpu_unavailable as check

    return check()


FORWARD_ONLY: Final = Finding(
    "triton-pre-forward-only", "convention",
    "the Triton pre gate and collapse are forward-only: no autograd through pre",
    ("gradients.*", "published.gradients"), "docs/findings/vllm.md", profiles=("kernel",))
"""Seen by the whole kernel profile; the lane's --only subset has none of them."""

TRITON_INTERPRETER_COMPILE: Final = Finding(
    "triton-interpreter-compile", "limitation",
    "Triton's interpreter is not traceable by TorchDynamo", ("compile.fullgraph",),
    "docs/findings/vllm.md", "docs/findings/repro/triton_interpreter_compile.py",
    profiles=("kernel",))

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "vllm:mhc-triton", "hcspec.conformance.adapters.vllm_wheel:make_triton",
        "vLLM's Triton mHC kernels (split-K pre gate, collapse, HC head) with its torch "
        "Sinkhorn (it has no Triton one) and post, DeepSeek-V4's settings; bfloat16 state",
        requires="vllm", distribution="vllm",
        written_for=WRITTEN_FOR, detail="hcspec.conformance.adapters._triton:environment_note",
        lane=Lane(".ci/lanes/vllm", INSTALL, profile="kernel",
                  note=KERNEL_NOTE),
        findings=(FORWARD_ONLY, TRITON_INTERPRETER_COMPILE),
    ),
    BuiltinTarget(
        "vllm:mhc-tilelang", "hcspec.conformance.adapters.vllm_wheel:make_tilelang",
        "vLLM's TileLang mHC kernels (mhc_pre_tilelang, mhc_post_tilelang: MHCPreOp / "
        "MHCPostOp.forward_cuda), DeepSeek-V4's settings; a CUDA device only",
        requires="tilelang", distribution="vllm", written_for=WRITTEN_FOR,
        lane=Lane(".ci/lanes/vllm", INSTALL, profile=None,
                  note="TileLang kernels need a CUDA device; tools/gpu_check.sh runs it."),
    ),
    BuiltinTarget(
        "vllm:mhc-cpu", "hcspec.conformance.adapters.vllm_wheel:make_cpu",
        "vLLM's compiled CPU mHC ops (mhc_pre_cpu, mhc_post_cpu over vllm._C), DeepSeek-V4's "
        "settings; bfloat16 state",
        requires="vllm.model_executor.kernels.mhc.cpu", distribution="vllm",
        written_for=WRITTEN_FOR,
        available="hcspec.conformance.adapters.declarations.vllm_wheel:cpu_unavailable",
        lane=Lane(".ci/lanes/vllm", INSTALL, profile=None,
                  note="The PyPI wheel is the CUDA build (no vllm._C, so no hc_pre_fused_cpu / "
                       "hc_post_fused_cpu / hc_head_fused_cpu); vLLM's CPU build "
                       "(VLLM_TARGET_DEVICE=cpu) would run it."),
    ),
)
"""The vLLM wheel's Triton and CPU targets."""
