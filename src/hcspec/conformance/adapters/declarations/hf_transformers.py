"""Declarations of the transformers targets (:mod:`hcspec.conformance.adapters.hf_transformers`):
DeepSeek-V4 (current and first release), GLM-5-Next and HY-V4."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

WRITTEN_FOR: Final = "5.23.0"
"""The transformers release the DeepSeek-V4, GLM-5-Next and HY-V4 adapters were read against."""

FIRST_RELEASE: Final = "5.8.0"
"""The first transformers release with DeepSeek-V4 (its own target)."""

_ADAPTER: Final = "hcspec.conformance.adapters.hf_transformers"
_MODELS: Final = "transformers.models"


_PAGE: Final = "docs/findings/transformers.md"
_REPRO: Final = "docs/findings/repro"

STATE_RANK: Final = Finding(
    "decoder-layer-state-rank-unchecked", "bug",
    "the decoder layer does not check that its state is [B, S, hc_mult, D]; at hc_mult = 1 a "
    "state with no sequence axis [B, 1, D] is returned as [B, B, 1, D] (sample i's weights on "
    "sample j's state) without an error",
    ("shape.other_sequence_axes",), _PAGE, f"{_REPRO}/transformers_decoder_layer_state_rank.py")

VIEW_NON_CONTIGUOUS: Final = Finding(
    "view-non-contiguous", "bug",
    "the hyper-connection flattens the streams with hidden_streams.view(batch_size, seq_len, "
    "-1), which raises on a non-contiguous [B, S, n, D] state (5.8.0 accepts it)",
    ("strides.non_contiguous",), _PAGE,
    f"{_REPRO}/transformers_deepseek_v4_view_non_contiguous.py")

POST_SIGMA: Final = Finding(
    "post-sigma-first-release", "convention",
    "(declared h_post_multiplier=1) post = σ(·) + 1e-6, where 5.23.0 and DeepSeek-V4 have 2σ "
    "(mHC Eq. 8): a difference from DeepSeek-V4 and the paper",
    ("constraints.h_post_span",), _PAGE, f"{_REPRO}/kit_declared_deviations.py")

PUBLISHED_STEP: Final = Finding(
    "published-step-other-network", "bug",
    "(fixed in 5.23.0) from a DeepSeek-V4 checkpoint's hc_fn/hc_scale/hc_base it computes "
    "another network: X' = comb X (not combᵀ X), post = σ(·) + eps (not 2σ), Sinkhorn–Knopp from "
    "σ(·) + eps (not softmax + eps); the failure names the three",
    ("published.step",), "docs/findings/published.md",
    f"{_REPRO}/transformers_deepseek_v4_releases.py")

IDENTITY_MIXING: Final = Finding(
    "identity-mixing", "convention",
    "(declared residual_mixing=identity, by design) HY-V4 has no mixing matrix: H_res = I has "
    "no parameters", ("gradients.mixing_trainable",), _PAGE)


def _lane(release: str, note: str = "") -> Lane:
    venv = "".join(release.split(".")[:2])
    return Lane(".ci/thirdparty", f"pip install transformers=={release}",
                note=f"In .venv-tf{venv}, the venv of the release the adapter was written for."
                     f"{' ' + note if note else ''}")


def _target(name: str, factory: str, what: str, written_for: str, model: str,
            findings: tuple[Finding, ...] = (), note: str = "") -> BuiltinTarget:
    # requires the model's module, so a release without the model lists the target as not
    # importable (GLM-5-Next and HY-V4 are not in 5.8.0)
    return BuiltinTarget(f"transformers:{name}", f"{_ADAPTER}:{factory}",
                         f"transformers: {what}",
                         requires=f"{_MODELS}.{model}.modeling_{model}",
                         distribution="transformers", written_for=written_for,
                         lane=_lane(written_for, note), findings=findings)


TARGETS: Final[tuple[BuiltinTarget, ...]] = (
    _target("deepseek-v4", "make_deepseek_v4",
            "DeepseekV4HyperConnection (mHC, DeepSeek-V4 style) composed as "
            "DeepseekV4DecoderLayer does, HyperHead reduction", WRITTEN_FOR, "deepseek_v4",
            (VIEW_NON_CONTIGUOUS, STATE_RANK)),
    _target(f"deepseek-v4-{FIRST_RELEASE}", "make_deepseek_v4_first_release",
            f"DeepseekV4HyperConnection of the first release ({FIRST_RELEASE}: sigmoid "
            "Sinkhorn, post = σ + eps, X' = post·F + comb X)", FIRST_RELEASE, "deepseek_v4",
            (POST_SIGMA, PUBLISHED_STEP, STATE_RANK)),
    _target("glm5-next", "make_glm5_next",
            "Glm5NextTextHyperConnection (DeepSeek-V4 formulas) composed as its decoder "
            "layer does, mean reduction", WRITTEN_FOR, "glm5_next",
            (VIEW_NON_CONTIGUOUS, STATE_RANK)),
    _target("hy-v4", "make_hy_v4",
            "HYV4HyperConnection (no mixing matrix: H_res = I) composed as HYV4DecoderLayer "
            "does, HyperHead reduction", WRITTEN_FOR, "hy_v4", (IDENTITY_MIXING,)),
    _target("qwen4-exp", "make_qwen4_exp",
            "Qwen4ExpTextGatedResidual (gated element-wise read, H_res = I) composed as "
            "Qwen4ExpTextDecoderLayer does, hyper_connection_mixer reduction", WRITTEN_FOR,
            "qwen4_exp", note="The per-stream properties are not applicable to its element-wise "
                              "gated read."),
)
"""The built-in transformers targets (discovered by :mod:`hcspec.conformance.subjects.targets`)."""
