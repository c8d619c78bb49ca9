"""Declarations of SGLang's HY-V4 iHC target (:mod:`hcspec.conformance.adapters.sglang_ihc`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "0.5.23"
"""The release the adapter was read against."""

INSTALL: Final = (f"pip install --no-deps sglang=={WRITTEN_FOR} "
                  "triton==3.9.0 (and the modules the lane names)")
"""The install line of CI's sglang lane (.ci/lanes/sglang)."""

KERNEL_NOTE: Final = ("Run on the CPU through Triton's interpreter (TRITON_INTERPRET=1), "
                      "on the lane's --only subset of the properties; the findings are "
                      "those of the whole kernel profile.")
"""The generated file's note for a Triton target of the lane."""

_TRITON_NOTE: Final = "hcspec.conformance.adapters._triton:environment_note"

FORWARD_ONLY: Final = Finding(
    "ihc-forward-only", "convention",
    "the iHC Triton kernels are forward-only (no autograd), and the wrapper's `import hpc` probe "
    "and Triton's interpreter are not traceable (measured under ci: 6 min 46 s)",
    ("gradients.fd_input", "gradients.fd_parameters", "gradients.closed_form",
     "gradients.mixing_trainable", "gradients.finite_extreme", "dtype.float32_gradients",
     "compile.fullgraph"),
    "docs/findings/sglang.md", "docs/findings/repro/sglang_ihc_forward_only.py",
    profiles=("ci",))
"""Under the ci profile; the lane runs the kernel profile's --only subset, which has none."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "sglang:ihc", "hcspec.conformance.adapters.sglang_ihc:make",
        "SGLang's HY-V4 iHC Triton kernels (hy4_ihc.py: fused_hy4_ihc_pre, fused_hy4_ihc_post "
        "as HYV4HCLayer calls them; no mixing matrix), fused_hy4_ihc_head as reduce; float32 "
        "parameters", requires="sglang.kernels.ops.layernorm.hy4_ihc", distribution="sglang",
        written_for=WRITTEN_FOR, detail=_TRITON_NOTE,
        lane=Lane(".ci/lanes/sglang", INSTALL, profile="kernel",
                  note=KERNEL_NOTE),
        findings=(FORWARD_ONLY,),
    ),
)
"""The module's built-in targets."""
