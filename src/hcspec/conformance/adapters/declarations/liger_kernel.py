"""Declaration of the Liger-Kernel target (:mod:`hcspec.conformance.adapters.liger_kernel`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "0.8.5"
"""The liger-kernel version this adapter was written and checked against."""

TRITON_INTERPRETER_COMPILE: Final = Finding(
    "triton-interpreter-compile", "limitation",
    "under Triton's interpreter TorchDynamo cannot trace any Triton kernel launch (Unsupported "
    "method call); on CUDA tools/gpu_check.sh shows whether LigerMHC compiles",
    ("compile.fullgraph",), "docs/findings/liger_kernel.md",
    "docs/findings/repro/triton_interpreter_compile.py")

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "liger_kernel:mhc", "hcspec.conformance.adapters.liger_kernel:make",
        "liger-kernel: LigerMHC (mHC in Triton forward and backward kernels; float64 is the "
        "float32 path between casts, n a power of two)",
        requires="liger_kernel", distribution="liger_kernel", written_for=WRITTEN_FOR,
        detail="hcspec.conformance.adapters._triton:environment_note",
        lane=Lane(".ci/thirdparty", f"pip install triton==3.9.0 liger-kernel=={WRITTEN_FOR} "
                  "packaging hyper-connections==0.4.11", profile="kernel",
                  note="Run on the CPU through Triton's interpreter (TRITON_INTERPRET=1) in "
                       ".ci-venv-kernels, on a subset of the properties (.ci/thirdparty's "
                       "KERNEL_ONLY); the findings are those of the whole kernel profile."),
        findings=(TRITON_INTERPRETER_COMPILE,),
    ),
    BuiltinTarget(
        "liger_kernel:mhc-customop", "hcspec.conformance.adapters.liger_kernel:make_customop",
        "liger-kernel: LigerMHC's three autograd Functions registered by the adapter as "
        "torch.library custom ops (hcspec_liger::*, fake kernels, autograd, vmap), for the "
        "custom-op family",
        requires="liger_kernel", distribution="liger_kernel", written_for=WRITTEN_FOR,
        detail="hcspec.conformance.adapters._triton:environment_note",
        lane=Lane(".ci/thirdparty", f"pip install triton==3.9.0 liger-kernel=={WRITTEN_FOR} "
                  "packaging hyper-connections==0.4.11", profile=None,
                  note="Not run through the CLI: the kernels job runs its custom-op family "
                       "(opcheck, export, vmap) in tests/thirdparty/test_liger_customop.py "
                       "under Triton's interpreter in .ci-venv-kernels."),
    ),
)
"""The built-in targets of Liger-Kernel (discovered by :mod:`hcspec.conformance.subjects.targets`);
its ``detail`` says where the Triton kernels will run in this process, and why."""
