"""What the serving engines' DeepSeek-V4 mHC targets share (:mod:`.vllm_wheel`,
:mod:`.sglang_mhc`): the parameters a DeepSeek-V4 checkpoint gives one sublayer, the settings
the engines read from the model config, and the published layout.

Both engines (vLLM 0.33.0, SGLang 0.5.23) load a checkpoint's ``hc_attn_fn`` /
``hc_attn_scale`` / ``hc_attn_base`` (and ``hc_ffn_*``) into float32 tensors and pass them,
with the config's ``hc_eps``, ``rms_norm_eps``, ``hc_sinkhorn_iters`` and a post multiplier
of 2, to their pre/post functions; neither ships an initialiser (they load checkpoints), so
:class:`EngineMhcParameters` initialises as DeepSeek-V4's training code does (``fn ~ N(0,
0.02)``, ``scale = 1``, ``base = 0``). The residual stream is bfloat16 in both engines (the
model's dtype); the mixes, the coefficients and the compositions' sums are float32.
"""

from __future__ import annotations

from typing import Any, Final

import torch
from torch import nn

from hcspec.conformance.adapters.deepseek_v4_style import PublishedTensors

HC_EPS: Final = 1e-6
"""The config's ``hc_eps`` (``hc_pre_eps`` and ``hc_sinkhorn_eps`` in the engines' calls)."""

RMS_EPS: Final = 1e-6
"""The config's ``rms_norm_eps`` (the weight-free RMS norm of ``vec(X)`` before the mixes)."""

SINKHORN_ITERS: Final = 20
"""The config's ``hc_sinkhorn_iters`` (``sinkhorn_repeat``)."""

POST_MULT: Final = 2.0
"""``hc_post_mult_value``: DeepSeek-V4's ``post = 2σ`` (SGLang's ``MHC_POST_MULT_VALUE``; its
Triton Sinkhorn hard-codes it)."""

INIT_STD: Final = 0.02
"""DeepSeek-V4's ``initializer_range``."""

STATE_DTYPE: Final = torch.bfloat16
"""The residual stream's dtype in both engines (vLLM's ``mhc_pre_torch`` asserts it)."""


class EngineMhcParameters(nn.Module):
    """One sublayer's mHC parameters as the engines hold them (float32).

    Attributes:
        fn: ``[n(n+2), n·d]`` the mixes' projection (checkpoint ``hc_*_fn``).
        scale: ``[3]`` the three gains (``hc_*_scale``).
        base: ``[n(n+2)]`` the biases (``hc_*_base``).
        head_fn, head_scale, head_base: ``[n, n·d]``, ``[1]``, ``[n]``: the model's HC head
            (``hc_head_fn`` / ``hc_head_scale`` / ``hc_head_base``), for the targets whose
            ``reduce`` is the engine's head kernel.
        hc_eps, norm_eps, sinkhorn_iters, post_mult: the settings the engines read from the
            config (:data:`HC_EPS`, :data:`RMS_EPS`, :data:`SINKHORN_ITERS`,
            :data:`POST_MULT`).
    """

    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        mix = n * (n + 2)
        self.fn = nn.Parameter(torch.empty(mix, n * d).normal_(0.0, INIT_STD))
        self.scale = nn.Parameter(torch.ones(3))
        self.base = nn.Parameter(torch.zeros(mix))
        self.head_fn = nn.Parameter(torch.empty(n, n * d).normal_(0.0, INIT_STD))
        self.head_scale = nn.Parameter(torch.ones(1))
        self.head_base = nn.Parameter(torch.zeros(n))
        self.hc_eps, self.norm_eps = HC_EPS, RMS_EPS
        self.sinkhorn_iters, self.post_mult = SINKHORN_ITERS, POST_MULT


def build_parameters(n: int, d: int, layer_index: int) -> nn.Module:
    """:class:`EngineMhcParameters` (the ``build`` of
    :func:`~hcspec.conformance.adapters.deepseek_v4_style.v4_style_target`; no layer-dependent
    init)."""
    del layer_index
    return EngineMhcParameters(n, d)


def _settings(module: Any) -> dict[str, float]:
    return {"hc_eps": float(module.hc_eps), "norm_eps": float(module.norm_eps),
            "sinkhorn_iters": int(module.sinkhorn_iters)}


PUBLISHED: Final = PublishedTensors(
    "deepseek-v4", {"hc_fn": "fn", "hc_scale": "scale", "hc_base": "base"}, _settings)
"""DeepSeek-V4's published layout: the checkpoint's ``hc_*_fn`` / ``hc_*_scale`` /
``hc_*_base`` are the tensors the engines pass as ``fn`` / ``hc_scale`` / ``hc_base``."""


def flat_tokens(x: torch.Tensor) -> torch.Tensor:
    """``x [B, T, n, d]`` as the engines' ``[B·T, n, d]`` bfloat16 contiguous residual."""
    b, t, n, d = x.shape
    return x.to(STATE_DTYPE).reshape(b * t, n, d).contiguous()
