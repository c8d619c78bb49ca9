"""A real DeepSeek-V4-format checkpoint, without a download: a tiny model with random weights
written by transformers' own ``save_pretrained`` (safetensors, in a temporary folder), loaded
through each implementation's own loader (transformers ``from_pretrained``; nano-deepseek-v4's
``load_deepseek_official_checkpoint``). One layer's hc tensors (``hc_attn_fn``,
``hc_attn_scale``, ``hc_attn_base``) are the published parameters: transformers 5.23.0
computes DeepSeek-V4's step from them (its decoder layer's own composition, the attention
replaced), nano-deepseek-v4 0.2.0 another network (the divergence named). The same for a tiny
GLM-5-Next text model (``Glm5NextTextModel``: the DeepSeek-V4 layout under the same official
names, ``layers.{i}.hc_attn_fn``...). HY-V4 is not here: its layout is none of the published
parameterizations (no mixing matrix, ``post = hc_magnitude·σ + eps``).

Runs where transformers (a release with DeepSeek-V4) is installed; the nano-deepseek-v4 part
also needs that package (.ci/thirdparty installs it beside transformers 5.23.0).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch

if importlib.util.find_spec("transformers") is None:
    pytest.skip("transformers is not installed", allow_module_level=True)
try:
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as modeling
    from transformers.models.deepseek_v4.configuration_deepseek_v4 import (  # noqa: F401
        DeepseekV4Config,
    )
except ImportError:
    pytest.skip("this transformers release has no DeepSeek-V4", allow_module_level=True)

import transformers

from hcspec.conformance.adapters import hf_transformers as hf
from hcspec.conformance.adapters.declarations.hf_transformers import WRITTEN_FOR
from hcspec.conformance.machinery import divergence, published_divergence
from hcspec.reference import published as pub
from hcspec.spec.record import Gate
from tests.thirdparty import tiny_checkpoint as tiny

if transformers.__version__ != WRITTEN_FOR:
    pytest.skip(f"written for transformers {WRITTEN_FOR} (its save_pretrained writes the "
                f"official hc_attn_* names); found {transformers.__version__}",
                allow_module_level=True)

N, D, TINY = tiny.N, tiny.D, tiny.TINY


def _branch(z: torch.Tensor) -> torch.Tensor:
    return torch.tanh(z) * 1.5 + 0.1


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The folder transformers' ``save_pretrained`` wrote, and layer 1's attention hc tensors
    read from its safetensors file (the published parameters)."""
    folder = tmp_path_factory.mktemp("deepseek_v4_tiny")
    stored = tiny.write_deepseek_v4(folder)
    return folder, tiny.published_of(stored)


def _state() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(2, 3, N, D, dtype=torch.float32)


def _oracle(params: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
    p64 = {k: (v.double() if isinstance(v, torch.Tensor) else v) for k, v in params.items()}
    return pub.step("deepseek-v4", p64, x.double(), _branch)


def test_the_checkpoint_holds_the_published_layout(checkpoint: tuple[Path, dict[str, Any]]
                                                   ) -> None:
    _, params = checkpoint
    pub.check_parameters("deepseek-v4", params, N, D)


def test_transformers_from_pretrained_computes_the_published_step(
        checkpoint: tuple[Path, dict[str, Any]]) -> None:
    folder, params = checkpoint
    model = modeling.DeepseekV4ForCausalLM.from_pretrained(folder)
    layer = model.model.layers[1]
    for key, own in (("fn", layer.attn_hc.fn), ("scale", layer.attn_hc.scale),
                     ("base", layer.attn_hc.base)):
        assert torch.equal(own.detach(), params[f"hc_{key}"]), key
    x = _state()
    with torch.no_grad():  # the decoder layer's own composition, attention replaced
        post, comb, collapsed = layer.attn_hc(x)
        got = (post.unsqueeze(-1) * _branch(collapsed).unsqueeze(-2)
               + torch.matmul(comb.transpose(-1, -2), x))
    want = _oracle(params, x)
    assert float((got.double() - want).abs().max()) < 1e-5 * float(want.abs().max())
    with torch.no_grad():  # through the package's decoder layer class, as the target composes
        step = hf.decoder_layer_of("deepseek_v4", "DeepseekV4DecoderLayer", 2)(layer.attn_hc)
        through = step(x, _branch)
    assert torch.equal(through, got)


def test_nano_deepseek_v4_loads_the_checkpoint_and_computes_another_network(
        checkpoint: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    if importlib.util.find_spec("nano_deepseek_v4") is None:
        pytest.skip("nano-deepseek-v4 is not installed")
    from nano_deepseek_v4.checkpoint import load_deepseek_official_checkpoint
    from nano_deepseek_v4.config import DeepSeekV4Config
    from nano_deepseek_v4.modeling import DeepSeekV4ForCausalLM
    from safetensors.torch import load_file, save_file

    folder, params = checkpoint
    # transformers' save_pretrained prefixes the official names with "model."; the official
    # release (and nano's loader) does not
    official = {k.removeprefix("model."): v for k, v in
                load_file(str(folder / "model.safetensors")).items()}
    save_file(official, str(tmp_path / "model.safetensors"))
    nano = DeepSeekV4ForCausalLM(DeepSeekV4Config(
        **{k: v for k, v in TINY.items() if k != "num_nextn_predict_layers"},
        num_nextn_predict_layers=0))
    load_deepseek_official_checkpoint(nano, tmp_path)
    hc = nano.model.layers[1].attn_hc
    for key in ("fn", "scale", "base"):
        assert torch.equal(getattr(hc, key).detach(), params[f"hc_{key}"]), key
    x = _state()
    with torch.no_grad():  # nano's decoder layer composition: comb @ streams
        post, comb, collapsed = hc(x)
        got = post.unsqueeze(-1) * _branch(collapsed).unsqueeze(-2) + torch.matmul(comb, x)
    want = _oracle(params, x)
    scale = float(want.abs().max())
    assert float((got.double() - want).abs().max()) > 0.05 * scale

    def error_of(formula: pub.Formula) -> float:
        p64 = {k: (v.double() if isinstance(v, torch.Tensor) else v) for k, v in params.items()}
        return divergence.output_error(got.double(), pub.step("deepseek-v4", p64, x.double(),
                                                              _branch, formula), scale)

    published = pub.layout("deepseek-v4").formula(params)
    match = published_divergence.search(error_of, 1e-5, published)
    assert match.exact, published_divergence.message(match, published)
    assert match.formula == dataclasses.replace(
        published, transposed=False, h_post=Gate(1.0, published.h_pre.eps),
        sinkhorn=dataclasses.replace(published.sinkhorn, start="sigmoid", count="rounds"))


# --- GLM-5-Next: the DeepSeek-V4 layout under the official names --------------------------------
GLM_TINY = dict(vocab_size=64, hidden_size=D, intermediate_size=16, moe_intermediate_size=8,
                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                n_routed_experts=2, num_experts_per_tok=1, kv_lora_rank=8, q_lora_rank=8,
                v_head_dim=8, qk_nope_head_dim=8, head_dim=8, index_topk=2, index_kpool=1,
                index_head_dim=8, index_n_heads=1, linear_head_dim=8, linear_num_heads=2,
                hc_mult=N, hc_eps=1e-6, hc_sinkhorn_iters=20, rms_norm_eps=1e-6,
                max_position_embeddings=64, pad_token_id=0)


@pytest.fixture(scope="module")
def glm_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A tiny ``Glm5NextTextModel`` written by ``save_pretrained`` (hc tensors away from the
    init), and layer 1's attention hc tensors read from the file."""
    from safetensors.torch import load_file
    from transformers.models.glm5_next import modeling_glm5_next as glm
    from transformers.models.glm5_next.configuration_glm5_next import Glm5NextTextConfig

    folder = tmp_path_factory.mktemp("glm5_next_tiny")
    torch.manual_seed(3)
    model = glm.Glm5NextTextModel(Glm5NextTextConfig(**GLM_TINY))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "_hc." in name:
                p.add_(0.5 * torch.randn_like(p))
    model.save_pretrained(folder)
    stored = load_file(str(folder / "model.safetensors"))
    params = {f"hc_{k}": stored[f"layers.1.hc_attn_{k}"] for k in ("fn", "scale", "base")}
    return folder, {**params, "hc_eps": 1e-6, "norm_eps": 1e-6, "sinkhorn_iters": 20}


def test_glm5_next_checkpoint_holds_the_published_layout(
        glm_checkpoint: tuple[Path, dict[str, Any]]) -> None:
    _, params = glm_checkpoint
    pub.check_parameters("deepseek-v4", params, N, D)


def test_glm5_next_from_pretrained_computes_the_published_step(
        glm_checkpoint: tuple[Path, dict[str, Any]]) -> None:
    from transformers.models.glm5_next import modeling_glm5_next as glm

    folder, params = glm_checkpoint
    model = glm.Glm5NextTextModel.from_pretrained(folder)
    connection = model.layers[1].attn_hc
    for key in ("fn", "scale", "base"):
        assert torch.equal(getattr(connection, key).detach(), params[f"hc_{key}"]), key
    x = _state()
    with torch.no_grad():  # Glm5NextTextDecoderLayer's own composition, attention replaced
        step = hf.decoder_layer_of("glm5_next", "Glm5NextTextDecoderLayer", 3)(connection)
        got = step(x, _branch)
    want = _oracle(params, x)
    scale = float(want.abs().max())
    assert float((got.double() - want).abs().max()) < 1e-5 * scale
    wrong = pub.step("deepseek-v4", {k: (v.double() if isinstance(v, torch.Tensor) else v)
                                     for k, v in params.items()}, x.double(), _branch,
                     dataclasses.replace(pub.layout("deepseek-v4").formula(params),
                                         transposed=False))
    assert float((wrong - want).abs().max()) > 0.01 * scale  # the check can see orientation
