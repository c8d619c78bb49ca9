"""A real DeepSeek-V4-format checkpoint through NeMo Automodel's own Hugging Face checkpoint
conversion: a tiny model written by transformers' ``save_pretrained``
(:mod:`tests.thirdparty.tiny_checkpoint`), its tensors renamed by nemo-automodel's
``DeepSeekV4StateDictAdapter.from_hf`` (the adapter its ``DeepseekV4ForCausalLM`` carries as
``state_dict_adapter``) and loaded into that model with ``load_state_dict``. One layer's
``attn_hc`` then holds the file's ``hc_attn_fn``/``hc_attn_scale``/``hc_attn_base``, and the
kit's ``published`` family, run on the ``nemo_automodel:deepseek-v4`` target built around that
loaded module, finds DeepSeek-V4's step of those tensors.

Runs where nemo-automodel is installed (with the transformers it pins, which has DeepSeek-V4:
.ci/lanes/nemo_automodel); skipped otherwise.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
from typing import Any

import pytest
import torch
from torch import nn

if (importlib.util.find_spec("nemo_automodel") is None
        or importlib.util.find_spec("transformers") is None):
    pytest.skip("nemo-automodel (and transformers) not installed", allow_module_level=True)
try:
    from nemo_automodel.components.models.common import BackendConfig
    from nemo_automodel.components.models.deepseek_v4.config import DeepseekV4Config
    from nemo_automodel.components.models.deepseek_v4.model import DeepseekV4ForCausalLM
    from transformers.models.deepseek_v4 import modeling_deepseek_v4  # noqa: F401
except ImportError as exc:
    pytest.skip(f"nemo-automodel's DeepSeek-V4 or transformers' is missing: {exc}",
                allow_module_level=True)

from hcspec.conformance.adapters import nemo_automodel as adapter
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.strategies import Case
from hcspec.reference import published as pub
from tests.thirdparty import tiny_checkpoint as tiny

SITES = ("attn", "ffn")


class Loaded(nn.Module):
    """A ``DeepseekV4HyperConnection`` NeMo's loader filled, beside the model's head (the
    module form :func:`adapter.deepseek_v4_factory` builds around: ``.hc`` and ``.head``)."""

    def __init__(self, hc: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.hc, self.head = hc, head


@pytest.fixture(scope="module")
def nemo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, torch.Tensor]]:
    """NeMo's ``DeepseekV4ForCausalLM`` (CPU backends) with the tiny checkpoint loaded through
    its own ``state_dict_adapter.from_hf``, and the file's tensors."""
    stored = tiny.write_deepseek_v4(tmp_path_factory.mktemp("deepseek_v4_tiny"))
    backend = BackendConfig(attn="sdpa", linear="torch", rms_norm="torch", experts="torch",
                            dispatcher="torch", rope_fusion=False,
                            enable_hf_state_dict_adapter=True)
    torch.manual_seed(1)
    model = DeepseekV4ForCausalLM(DeepseekV4Config(**tiny.TINY, torch_dtype="float32"),
                                  backend=backend)
    # the official release's names (transformers adds a "model." prefix the release lacks)
    converted = model.state_dict_adapter.from_hf(tiny.official_names(stored))
    result = model.load_state_dict(converted, strict=False)
    hc_keys = {k for k in converted if "_hc." in k}
    assert hc_keys and not hc_keys & set(result.unexpected_keys)
    return model, stored


def test_nemos_checkpoint_conversion_puts_the_file_in_attn_hc_and_ffn_hc(
        nemo: tuple[Any, dict[str, torch.Tensor]]) -> None:
    model, stored = nemo
    for layer in range(tiny.TINY["num_hidden_layers"]):
        block = model.model.layers[str(layer)]
        for site in SITES:
            module = getattr(block, f"{site}_hc")
            for key in ("fn", "scale", "base"):
                own = getattr(module, key).detach()
                assert torch.equal(own, stored[f"model.layers.{layer}.hc_{site}_{key}"]), \
                    (layer, site, key)


def _factory(model: Any, site: str = "attn") -> Any:
    block = model.model.layers[str(tiny.LAYER)]

    def build(n: int, d: int, layer_index: int) -> nn.Module:
        if (n, d) != (tiny.N, tiny.D):  # the kit's sample impl (n = 4, d = 8), read for the
            return adapter.V4Connection(n, d)  # target's kind and declarations only
        return Loaded(copy.deepcopy(getattr(block, f"{site}_hc")),
                      copy.deepcopy(model.model.hc_head))

    return adapter.deepseek_v4_factory(build)


def test_the_loaded_module_offers_the_files_tensors_as_the_published_layout(
        nemo: tuple[Any, dict[str, torch.Tensor]]) -> None:
    model, stored = nemo
    impl = _factory(model)(tiny.N, tiny.D)
    params = impl.published_parameters()
    want = tiny.published_of(stored)
    pub.check_parameters("deepseek-v4", params, tiny.N, tiny.D)
    for key in ("hc_fn", "hc_scale", "hc_base"):
        assert torch.equal(params[key].detach(), want[key]), key
    assert {k: params[k] for k in tiny.SETTINGS} == tiny.SETTINGS


@pytest.mark.parametrize("site", SITES)
def test_the_loaded_module_computes_the_published_step(
        nemo: tuple[Any, dict[str, torch.Tensor]], site: str) -> None:
    """The kit's ``published`` family on the loaded layer, at the checkpoint's own values
    (``perturb = 0``: the parameters are the file's): ``published.step`` and
    ``published.gradients`` pass."""
    model, _ = nemo
    case = Case(batch=2, tokens=3, n=tiny.N, d=tiny.D, seed=0, perturb=0.0)
    report = check_implementation(_factory(model, site), profile="ci", device="cpu",
                                  only=["published"], case=case)
    statuses = {r.id: r.status for r in report.results if r.id.startswith("published.")}
    assert set(statuses) == {"published.step", "published.gradients",
                             "published.load_roundtrip", "published.stack_checkpoint"}, statuses
    bad = [(r.id, r.status, r.message) for r in report.results if r.status != "passed"]
    assert statuses["published.step"] == statuses["published.gradients"] == "passed", bad
    # every impl of this factory holds the checkpoint (no other seed to load over): the
    # round trip has nothing to show; NeMo's own loading is what the fixture checked
    assert statuses["published.load_roundtrip"] == "not_applicable", bad
    # one loaded layer, no stack(L): the checkpoint-stack property has nothing to load into
    assert statuses["published.stack_checkpoint"] == "not_applicable", bad


def test_the_loaded_step_is_the_oracles_of_the_file(
        nemo: tuple[Any, dict[str, torch.Tensor]]) -> None:
    """Without the kit's harness: the target's step on the loaded module against the float64
    published step of the file's tensors."""
    model, stored = nemo
    impl = _factory(model)(tiny.N, tiny.D, dtype=torch.float32)
    torch.manual_seed(2)
    x = torch.randn(2, 3, tiny.N, tiny.D)

    def branch(z: torch.Tensor) -> torch.Tensor:
        return torch.tanh(z) * 1.5 + 0.1

    with torch.no_grad():
        got = impl.forward(x, branch)
    p64 = {k: (v.double() if isinstance(v, torch.Tensor) else v)
           for k, v in tiny.published_of(stored).items()}
    want = pub.step("deepseek-v4", p64, x.double(), branch)
    assert float((got.double() - want).abs().max()) < 1e-5 * float(want.abs().max())
    # the file's parameters are away from the init: a comb X instead of combᵀ X is visible
    wrong = pub.step("deepseek-v4", p64, x.double(), branch,
                     dataclasses.replace(pub.layout("deepseek-v4").formula(p64), transposed=False))
    assert float((wrong - want).abs().max()) > 0.01 * float(want.abs().max())

