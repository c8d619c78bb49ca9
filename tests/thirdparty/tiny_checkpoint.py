"""A tiny DeepSeek-V4-format checkpoint written by transformers' own ``save_pretrained`` (random
weights, safetensors, in a folder the caller gives): shared by the real-checkpoint tests
(tests/thirdparty/test_published_checkpoint.py, test_nemo_published_checkpoint.py).

Needs a transformers release with DeepSeek-V4 (5.8.0 onwards); imported by those tests only
after they checked it is there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import torch

N: Final = 4
"""``hc_mult``: the expansion rate n of the tiny model."""

D: Final = 16
"""``hidden_size``: the width d."""

TINY: Final[dict[str, Any]] = dict(
    vocab_size=64, hidden_size=D, moe_intermediate_size=8, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=1, head_dim=8, q_lora_rank=8, n_routed_experts=2,
    num_experts_per_tok=1, n_shared_experts=1, hc_mult=N, hc_sinkhorn_iters=20, o_groups=1,
    o_lora_rank=8, index_n_heads=1, index_head_dim=8, index_topk=2, num_nextn_predict_layers=0,
    max_position_embeddings=64)
"""The tiny ``DeepseekV4Config`` (the hc settings are the published defaults: ``hc_eps =
rms_norm_eps = 1e-6``, 20 Sinkhorn–Knopp iterations)."""

SETTINGS: Final[dict[str, float]] = {"hc_eps": 1e-6, "norm_eps": 1e-6, "sinkhorn_iters": 20}
"""The published layout's settings of :data:`TINY`."""

LAYER: Final = 1
"""The layer whose attention hc tensors the tests read."""


def write_deepseek_v4(folder: Path, seed: int = 0) -> dict[str, torch.Tensor]:
    """Write a tiny ``DeepseekV4ForCausalLM`` (config :data:`TINY`, seed ``seed``, the hc
    tensors moved away from the init: at ``hc_scale = 1``, ``hc_base = 0`` a scale on the wrong
    block is invisible) with ``save_pretrained`` into ``folder`` and return the file's tensors
    (transformers writes the official DeepSeek-V4 names with a ``model.`` prefix:
    ``model.layers.{i}.hc_attn_fn``...).

    Raises:
        ImportError: transformers has no DeepSeek-V4.
    """
    from safetensors.torch import load_file
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as modeling
    from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config

    torch.manual_seed(seed)
    model = modeling.DeepseekV4ForCausalLM(DeepseekV4Config(**TINY))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "_hc." in name:
                p.add_(0.5 * torch.randn_like(p))
    model.save_pretrained(folder)
    stored: dict[str, torch.Tensor] = load_file(str(folder / "model.safetensors"))
    return stored


def published_of(stored: dict[str, torch.Tensor], layer: int = LAYER,
                 site: str = "attn") -> dict[str, Any]:
    """Layer ``layer``'s ``site`` (``attn``/``ffn``) hc tensors of a file written by
    :func:`write_deepseek_v4`, as the ``deepseek-v4`` layout (``hc_fn``, ``hc_scale``,
    ``hc_base`` and :data:`SETTINGS`)."""
    params: dict[str, Any] = {f"hc_{k}": stored[f"model.layers.{layer}.hc_{site}_{k}"]
                              for k in ("fn", "scale", "base")}
    return {**params, **SETTINGS}


def official_names(stored: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The file's tensors under the official release's names (without transformers' ``model.``
    prefix), as DeepSeek's own loaders read them."""
    return {k.removeprefix("model."): v for k, v in stored.items()}
