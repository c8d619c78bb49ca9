"""Adapters for Hugging Face transformers (DeepSeek-V4, GLM-5-Next, HY-V4): each target's
forward equals the package's own decoder layer (its attention and MLP replaced by the kit's
branches), and the weights it reports are the ones that layer used."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

if importlib.util.find_spec("transformers") is None:
    pytest.skip("transformers is not installed", allow_module_level=True)

import transformers

from hcspec.conformance.adapters import hf_transformers as hf
from hcspec.conformance.adapters._capture import PackageChanged
from hcspec.conformance.protocol import capabilities, check_required, conventions_of
from hcspec.conformance.subjects import targets

VERSION = transformers.__version__
FIRST = VERSION == hf.FIRST_RELEASE
# target -> (model folder, decoder layer class); the targets of the installed release
CASES = ({"transformers:deepseek-v4-5.8.0": ("deepseek_v4", "DeepseekV4DecoderLayer")} if FIRST
         else {"transformers:deepseek-v4": ("deepseek_v4", "DeepseekV4DecoderLayer"),
               "transformers:glm5-next": ("glm5_next", "Glm5NextTextDecoderLayer"),
               "transformers:hy-v4": ("hy_v4", "HYV4DecoderLayer")})


def _make(name: str, **kw: Any) -> Any:
    return targets.resolve(name).factory(4, 8, **kw)


class _Attention(nn.Module):
    """Stands in for the layer's attention: the kit's branch, in each model's return form."""

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], tuple_size: int) -> None:
        super().__init__()
        self.fn, self.tuple_size = fn, tuple_size
        self.block_type = "attention"

    def forward(self, hidden_states: torch.Tensor | None = None, *args: Any,
                **kwargs: Any) -> Any:
        assert hidden_states is not None
        out = self.fn(hidden_states)
        return (out, None) if self.tuple_size == 2 else (out, None, None)


class _Mlp(nn.Module):
    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.fn(hidden_states)


def _decoder_layer(model: str, cls_name: str, attn_hc: nn.Module, ffn_hc: nn.Module,
                   attn: Callable[[torch.Tensor], torch.Tensor],
                   mlp: Callable[[torch.Tensor], torch.Tensor]) -> nn.Module:
    """The package's decoder layer class, with its two hyper-connections and the branches."""
    modeling = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    cls = getattr(modeling, cls_name)
    layer = cls.__new__(cls)
    nn.Module.__init__(layer)
    layer.attn_hc, layer.ffn_hc = attn_hc, ffn_hc
    layer.self_attn = _Attention(attn, 2 if model == "deepseek_v4" else 3)
    layer.mlp = _Mlp(mlp)
    layer.input_layernorm = nn.Identity()
    layer.post_attention_layernorm = nn.Identity()
    layer.block_type = "attention"
    layer.layer_idx = 0
    return layer


def _connection(impl: Any) -> nn.Module:
    module = impl.module
    return module.connection if hasattr(module, "connection") else module


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_two_steps_equal_the_packages_decoder_layer(name: str, dtype: torch.dtype) -> None:
    model, cls_name = CASES[name]
    first, second = _make(name, seed=1, dtype=dtype), _make(name, seed=2, dtype=dtype)
    with torch.no_grad():  # away from the init, so the weights are not near-uniform
        for p in [*first.parameters(), *second.parameters()]:
            p.add_(torch.randn_like(p) * 0.5)
    lin = torch.randn(8, 8, dtype=torch.float64)

    def attn(h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(h.double() @ lin).to(h.dtype)

    def mlp(h: torch.Tensor) -> torch.Tensor:
        return torch.sin(h.double() * 1.7).to(h.dtype)

    layer = _decoder_layer(model, cls_name, _connection(first), _connection(second), attn, mlp)
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64).to(dtype)
    out = layer(x)
    theirs = out[0] if isinstance(out, tuple) else out
    ours = second.forward(first.forward(x, attn), mlp)
    assert ours.dtype == theirs.dtype == dtype
    assert torch.equal(ours, theirs)  # the same operations in the same order


@pytest.mark.parametrize("name", sorted(CASES))
def test_weights_are_the_ones_the_layer_used_and_the_target_is_complete(name: str) -> None:
    impl = _make(name, seed=0)
    check_required(impl)
    published = set() if name.endswith("hy-v4") else {"published_parameters", "load_published"}
    assert capabilities(impl) == {"weights", "expand", "reduce", "parameters", "train_eval",
                                  "stack", *published}
    assert all(p.dtype == torch.float32 for p in impl.parameters())  # _keep_in_fp32_modules
    if published:  # the checkpoint's hc_fn/hc_scale/hc_base are the module's own parameters
        own = {id(p) for p in impl.parameters()}
        params = impl.published_parameters()
        assert {id(params[k]) for k in ("hc_fn", "hc_scale", "hc_base")} <= own
        assert conventions_of(impl).published == "deepseek-v4"
    x = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    h_pre, h_post, H_res = impl.weights(x)
    z = torch.cos(torch.einsum("btn,btnd->btd", h_pre, x))
    law = H_res @ x + h_post.unsqueeze(-1) * z.unsqueeze(-2)
    torch.testing.assert_close(impl.forward(x, torch.cos), law, rtol=0, atol=1e-6)
    conventions = conventions_of(impl)
    if name.endswith("hy-v4"):
        assert conventions.residual_mixing == "identity"
        assert torch.equal(H_res, torch.eye(4, dtype=H_res.dtype).expand_as(H_res))
    else:
        assert conventions.formula.sinkhorn.start == ("sigmoid" if FIRST else "softmax")
        rows = conventions.formula.sinkhorn.exact_axis == "rows"
        exact = H_res.sum(-1) if rows else H_res.sum(-2)
        torch.testing.assert_close(exact, torch.ones_like(exact), rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_init_is_the_models_own_and_depends_only_on_the_seed(name: str) -> None:
    state = torch.random.get_rng_state()
    a, b, c = _make(name, seed=3), _make(name, seed=3), _make(name, seed=4)
    assert torch.equal(torch.random.get_rng_state(), state)
    pa, pb, pc = (list(i.parameters()) for i in (a, b, c))
    assert all(torch.equal(u, v) for u, v in zip(pa, pb, strict=True))
    assert not all(torch.equal(u, v) for u, v in zip(pa, pc, strict=True))
    connection = _connection(a)
    assert not torch.isnan(connection.fn).any() and 0.0 < connection.fn.std() < 0.05
    if name.endswith("hy-v4"):  # HYV4PreTrainedModel._init_weights: scale 0.01, base -log(n-1)
        assert torch.allclose(connection.scale, torch.full((2,), 0.01))
        torch.testing.assert_close(connection.base[:4], torch.full((4,), -torch.log(
            torch.tensor(3.0)).item()))
    else:  # base 0, scale 1
        assert torch.equal(connection.base, torch.zeros_like(connection.base))
        assert torch.equal(connection.scale, torch.ones(3))


def test_the_other_releases_target_refuses_this_release() -> None:
    other = "transformers:deepseek-v4" if FIRST else "transformers:deepseek-v4-5.8.0"
    with pytest.raises(PackageChanged, match="does not compose as in transformers"):
        _make(other)


def test_targets_are_listed_with_the_installed_version() -> None:
    rows = {r.target.name: r for r in targets.builtin_status()}
    for name in CASES:
        assert rows[name].importable and rows[name].version == VERSION


@pytest.mark.parametrize("name", sorted(n for n in CASES if not n.endswith("hy-v4")))
def test_forward_runs_the_installed_decoder_layer_so_its_orientation_is_seen(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``forward`` composes through the package's decoder layer class: a layer that mixed
    ``comb`` the other way round than the target declares (patched in after the factory's
    source check) makes the output leave the law of the reported weights."""
    model, cls_name = CASES[name]
    impl = _make(name, seed=3)
    with torch.no_grad():
        for p in impl.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    cls = getattr(importlib.import_module(f"transformers.models.{model}.modeling_{model}"),
                  cls_name)
    calls: list[type] = []
    original = cls.forward

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(type(self))
        return original(self, *args, **kwargs)

    x = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    h_pre, h_post, H_res = (w.detach() for w in impl.weights(x))
    law = H_res @ x + h_post.unsqueeze(-1) * torch.tanh(
        torch.einsum("btn,btnd->btd", h_pre, x)).unsqueeze(-2)
    monkeypatch.setattr(cls, "forward", spy)
    with torch.no_grad():
        torch.testing.assert_close(impl.forward(x, torch.tanh), law, rtol=0, atol=1e-6)
    assert calls == [cls]
    # 5.23.0's layers
    declared_transposed = conventions_of(impl).formula.sinkhorn.start == "softmax"

    def misoriented(self: Any, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        dtype = hidden_states.dtype
        post, comb, collapsed = self.attn_hc(hidden_states)
        out = self.self_attn(collapsed, **kwargs)[0]
        mix = comb.to(dtype) if declared_transposed else comb.to(dtype).transpose(-1, -2)
        return post.to(dtype).unsqueeze(-1) * out.unsqueeze(-2) + torch.matmul(mix, hidden_states)

    monkeypatch.setattr(cls, "forward", misoriented)
    with torch.no_grad():
        assert float((impl.forward(x, torch.tanh) - law).abs().max()) > 1e-3
