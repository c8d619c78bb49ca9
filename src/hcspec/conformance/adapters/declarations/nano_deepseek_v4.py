"""Declaration of the nano-deepseek-v4 target
(:mod:`hcspec.conformance.adapters.nano_deepseek_v4`)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "0.2.0"
"""The nano-deepseek-v4 version this adapter was written and checked against."""

PUBLISHED_STEP: Final = Finding(
    "published-step-other-network", "bug",
    "from a DeepSeek-V4 checkpoint's hc_fn/hc_scale/hc_base it computes another network: "
    "X' = comb X (not combᵀ X), post = σ(·) + eps (not 2σ), Sinkhorn–Knopp from σ(·) + eps (not "
    "softmax + eps); the failure names the three",
    ("published.step",), "docs/findings/published.md", None)

POST_SIGMA: Final = Finding(
    "post-sigma-not-2sigma", "bug",
    "(declared h_post_multiplier=1) post = σ(·) + 1e-6, not the paper's and DeepSeek-V4's 2σ "
    "(mHC Eq. 8); the module is loaded with DeepSeek-V4 weights",
    ("constraints.h_post_span",), "docs/findings/nano_deepseek_v4.md")

TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    BuiltinTarget(
        "nano_deepseek_v4:mhc", "hcspec.conformance.adapters.nano_deepseek_v4:make",
        "nano-deepseek-v4: modeling.HyperConnection composed as DeepSeekV4DecoderLayer does "
        "(DeepSeek-V4 style, comb @ streams, config defaults: 8 Sinkhorn rounds)",
        requires="nano_deepseek_v4", distribution="nano-deepseek-v4", written_for=WRITTEN_FOR,
        lane=Lane(".ci/thirdparty", f"pip install nano-deepseek-v4=={WRITTEN_FOR}"),
        findings=(POST_SIGMA, PUBLISHED_STEP),
    ),
)
"""The built-in target of nano-deepseek-v4 (discovered by
:mod:`hcspec.conformance.subjects.targets`)."""
