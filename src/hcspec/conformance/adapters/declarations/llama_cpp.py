"""Declarations of the llama.cpp targets (:mod:`hcspec.conformance.adapters.llama_cpp`): ggml's
fused hyper-connection ops, native code built from the llama-cpp-python sdist
(:mod:`hcspec.conformance.native.build`) and run in a worker process. No torch imported here."""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Lane

WRITTEN_FOR: Final = "0.3.36"
"""The llama-cpp-python sdist (llama.cpp 0c1e5709) whose ggml the adapter was written against."""

LANE: Final = Lane(
    ".ci/lanes/llama_cpp", "python -m hcspec.conformance.native.build --jobs 2",
    note=f"ggml's CPU backend built from the llama-cpp-python {WRITTEN_FOR} sdist (cmake, g++), "
         "cached by the sdist's hash. The gradient properties are not applicable: ggml's "
         "inference ops have no backward.")
"""CI's llama.cpp lane: no pip install, a native build."""

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "llama_cpp:deepseek-v4", "hcspec.conformance.adapters.llama_cpp:make_deepseek_v4",
        "llama.cpp's ggml (C, CPU backend, through ctypes in a worker process): the DeepSeek-V4 "
        "step as src/models/deepseek4.cpp composes it (ggml_dsv4_hc_comb, hc_pre, hc_post; "
        "rms_norm, mul_mat, sigmoid, scale_bias for the mixes); n = 4 only, float32, forward "
        "only", requires=None, distribution="llama-cpp-python", written_for=WRITTEN_FOR,
        available="hcspec.conformance.native.build:unavailable",
        detail="hcspec.conformance.native.build:describe",
        lane=replace(LANE, note=f"{LANE.note} n != 4 is a declared limit, so those cases are "
                                "skipped."),
    ),
    BuiltinTarget(
        "llama_cpp:qwen4-exp", "hcspec.conformance.adapters.llama_cpp:make_qwen4_exp",
        "llama.cpp's ggml (C, CPU backend, through ctypes in a worker process): Qwen4-exp's "
        "gated hyper-connection as src/models/qwen4exp.cpp composes it (ggml_dsv4_hc_pre_gated, "
        "ggml_dsv4_hc_post with a NULL comb; rms_norm, mul_mat, silu, sigmoid for the gate and "
        "the inject); any n >= 2, float32, forward only", requires=None,
        distribution="llama-cpp-python", written_for=WRITTEN_FOR,
        available="hcspec.conformance.native.build:unavailable",
        detail="hcspec.conformance.native.build:describe",
        lane=replace(LANE, note=f"{LANE.note} The per-stream properties are not applicable "
                                "(the read is element-wise), nor gated.ranges (ggml reports no "
                                "per-element h_pre, only the read map), nor customop.vmap and "
                                "customop.double_backward (not declared)."),
    ),
)
"""The built-in targets of llama.cpp."""
