"""Declarations of SGLang's mHC targets (:mod:`hcspec.conformance.adapters.sglang_mhc`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "0.5.23"
"""The SGLang release the adapters were read against."""

INSTALL: Final = (f"pip install --no-deps sglang=={WRITTEN_FOR} "
                  "triton==3.9.0 (and the modules the lane names)")
"""The install line of CI's sglang lane (.ci/lanes/sglang)."""

KERNEL_NOTE: Final = ("Run on the CPU through Triton's interpreter (TRITON_INTERPRET=1), "
                      "on the lane's --only subset of the properties; the findings are "
                      "those of the whole kernel profile.")
"""The generated file's note for a Triton target of the lane."""

_TRITON_NOTE: Final = "hcspec.conformance.adapters._triton:environment_note"

LANE: Final = Lane(".ci/lanes/sglang", INSTALL)
"""CI's SGLang lane (.ci-venv-sglang), ci profile."""

KERNEL_LANE: Final = Lane(".ci/lanes/sglang", INSTALL, profile="kernel",
                          note=KERNEL_NOTE)
"""The same lane, for the Triton targets under Triton's CPU interpreter."""

DISPATCH_NOT_TRACEABLE: Final = Finding(
    "dispatch-not-traceable", "convention",
    "hc_pre calls _mhc_pre_dispatch, which SGLang wraps in torch._dynamo.disable (so does "
    "hc_post's _mhc_post_dispatch): the engine opts its mHC dispatch out of graph capture",
    ("compile.fullgraph",), "docs/findings/sglang.md",
    "docs/findings/repro/sglang_dispatch_not_traceable.py")

TRITON_FORWARD_ONLY: Final = Finding(
    "triton-forward-only", "convention",
    "the Triton kernels are forward-only (no autograd through them)",
    ("gradients.fd_parameters", "gradients.closed_form", "gradients.mixing_trainable",
     "published.gradients"), "docs/findings/sglang.md", profiles=("kernel",))
"""Seen by the whole kernel profile; the lane's --only subset has none of them."""

TRITON_INTERPRETER_COMPILE: Final = Finding(
    "triton-interpreter-compile", "limitation",
    "Triton's interpreter is not traceable by TorchDynamo", ("compile.fullgraph",),
    "docs/findings/sglang.md", "docs/findings/repro/triton_interpreter_compile.py",
    profiles=("kernel",))

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "sglang:mhc", "hcspec.conformance.adapters.sglang_mhc:make",
        "SGLang's MHCState residual (layer_boundary/residual/mhc.py) with hc_pre / hc_post on "
        "their torch route (TileLang switched off), DeepSeek-V4's settings; bfloat16 state",
        requires="sglang.kernels.ops.layernorm.mhc", distribution="sglang",
        written_for=WRITTEN_FOR, lane=LANE, findings=(DISPATCH_NOT_TRACEABLE,),
    ),
    BuiltinTarget(
        "sglang:mhc-tilelang", "hcspec.conformance.adapters.sglang_mhc:make",
        "SGLang's default mHC route: MHCState with hc_pre / hc_post on the TileLang kernels; a "
        "CUDA device only", requires="tilelang", distribution="sglang",
        options={"tilelang": True}, written_for=WRITTEN_FOR,
        lane=Lane(".ci/lanes/sglang", INSTALL, profile=None,
                  note="TileLang kernels need a CUDA device; tools/gpu_check.sh runs it."),
    ),
    BuiltinTarget(
        "sglang:mhc-triton", "hcspec.conformance.adapters.sglang_mhc:make_triton",
        "SGLang's Triton mHC path of the DeepSeek-V4 layer: hc_mix_stats_sinkhorn (split-K "
        "projection, fused Sinkhorn), mhc_combine, torch post; n·d a multiple of 64 and n a "
        "power of two only (the kit's canonical n=4, d=8 is refused); bfloat16 state",
        requires="sglang.kernels.ops.layernorm.mhc", distribution="sglang",
        written_for=WRITTEN_FOR, detail=_TRITON_NOTE,
        lane=Lane(".ci/lanes/sglang", INSTALL, profile=None,
                  note="The fused kernel refuses the kit's canonical case (n=4, d=8: n·d = 32 is "
                       "not a multiple of the split-K projection's 64-wide block), so every "
                       "property fails at the canonical case; the fused kernel and its mutants "
                       "are checked by tests/thirdparty/test_sglang_adapter.py at n=4, d=16."),
    ),
    BuiltinTarget(
        "sglang:mhc-triton-split", "hcspec.conformance.adapters.sglang_mhc:make_triton",
        "SGLang's unfused route: the layer's torch projection, the Triton Sinkhorn "
        "_hc_split_sinkhorn_triton (the gfx1250 port), mhc_combine, torch post; bfloat16 state",
        requires="sglang.kernels.ops.layernorm.mhc", distribution="sglang",
        options={"route": "split"}, written_for=WRITTEN_FOR, detail=_TRITON_NOTE,
        lane=KERNEL_LANE, findings=(TRITON_FORWARD_ONLY, TRITON_INTERPRETER_COMPILE),
    ),
    BuiltinTarget(
        "sglang:mhc-head", "hcspec.conformance.adapters.sglang_mhc:make_triton",
        "sglang:mhc-triton-split with SGLang's fused Triton HC head (mhc_head.py, "
        "fused_hc_head) as reduce; bfloat16 state",
        requires="sglang.kernels.ops.layernorm.mhc_head", distribution="sglang",
        options={"route": "split", "head": True}, written_for=WRITTEN_FOR, detail=_TRITON_NOTE,
        lane=Lane(".ci/lanes/sglang", INSTALL, profile="kernel",
                  note="The head's bug at hc_mult not a power of two (fused_hc_head masks with "
                       "the padded count) is not seen by the kit, which checks a learned head's "
                       "shape only: tests/thirdparty/test_sglang_adapter.py::"
                       "test_head_is_the_reference_head[3] (strict xfail) and "
                       "docs/findings/repro/sglang_hc_head_padded_mask.py."),
    ),
)
"""SGLang's built-in targets."""
