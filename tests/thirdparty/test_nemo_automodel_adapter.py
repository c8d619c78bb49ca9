"""The NeMo Automodel adapters: the single-pass chaining of the DeepSeek-V4.1 stack on stand-in
modules (always runs), and the package's own modules and decoder blocks (skipped where
nemo-automodel is absent).

The block tests run the package's own ``DeepseekV4Block.forward`` / ``DeepseekV41Block.forward``
(a block whose attention, feed-forward and norms are replaced by stand-in branches; its
hyper-connection modules are the adapter's) and compare with the adapter's impls and stack.
"""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest
import torch
from torch import nn

from hcspec.conformance.adapters import nemo_automodel as adapter
from hcspec.conformance.adapters._capture import PackageChanged

HAVE_PACKAGE = (importlib.util.find_spec("nemo_automodel") is not None
                and importlib.util.find_spec("transformers") is not None)
needs_package = pytest.mark.skipif(not HAVE_PACKAGE,
                                   reason="nemo-automodel (and transformers) not installed")


# --- stand-ins: the DeepseekV41HyperConnection interface with fixed, written-here weights ---------
class Mix(NamedTuple):
    pre: torch.Tensor
    post: torch.Tensor
    comb: torch.Tensor


class StandInV41(nn.Module):
    """``pre`` depends on the input (so a carried pre differs from a recomputed one), ``post``
    and ``comb`` are fixed; ``comb`` is asymmetric (``comb[i, j]``: input i to output j)."""

    def __init__(self, n: int, offset: float) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-1.0, 1.0, n, dtype=torch.float32) + offset)
        self.post = nn.Parameter(torch.linspace(0.5, 1.5, n, dtype=torch.float32))
        comb = torch.arange(n * n, dtype=torch.float32).reshape(n, n) + 1 + offset
        self.comb = nn.Parameter(comb / comb.sum(-1, keepdim=True))

    def forward(self, x: torch.Tensor) -> Mix:
        pre = torch.sigmoid(self.w * x.float().mean(-1))
        shape = x.shape[:3]
        return Mix(pre, self.post.expand(shape), self.comb.expand(*shape, x.shape[2]))

    @staticmethod
    def collapse(x: torch.Tensor, pre_mix: torch.Tensor) -> torch.Tensor:
        return (pre_mix.unsqueeze(-1) * x.float()).sum(2).to(x.dtype)

    @staticmethod
    def expand(output: torch.Tensor, residual: torch.Tensor, mix: Mix) -> torch.Tensor:
        update = mix.post.unsqueeze(-1) * output.unsqueeze(-2)
        mixed = (mix.comb.unsqueeze(-1) * residual.unsqueeze(-2)).sum(2)
        return (update + mixed).to(output.dtype)


def _stand_in_stack(n: int, d: int, layers: int) -> adapter.V41Stack:
    modules = [StandInV41(n, 0.3 * k) for k in range(layers)]
    return adapter.V41Stack(modules, n, d, seed=0, device="cpu", layer_index=0)


def _branches(d: int, layers: int, seen: list[torch.Tensor] | None = None) -> list[Any]:
    torch.manual_seed(7)
    linears = [nn.Linear(d, d).double() for _ in range(layers)]

    def make(k: int) -> Any:
        def branch(h: torch.Tensor) -> torch.Tensor:
            if seen is not None:
                seen.append(h)
            return torch.tanh(linears[k](h))
        return branch
    return [make(k) for k in range(layers)]


def test_stack_carries_the_previous_sublayers_pre_mix() -> None:
    n, d = 3, 4
    stack = _stand_in_stack(n, d, 3)
    x0 = torch.randn(2, 5, n, d, dtype=torch.float64)
    seen: list[torch.Tensor] = []
    out = stack.forward(x0, _branches(d, 3, seen))
    # written out here: X_{k+1}[j] = post_k[j] F_k(Σ_i p_k[i] X_k[i]) + Σ_i comb_k[i, j] X_k[i],
    # p_0 = e_0 (the model's one-hot), p_k = pre_{k-1}(X_{k-1})
    fs = _branches(d, 3)
    x, carried = x0, torch.tensor([1.0, 0.0, 0.0]).expand(2, 5, n)
    for k, module in enumerate(stack.modules):
        read = (carried.double().unsqueeze(-1) * x).sum(2)
        assert torch.allclose(seen[k], read, atol=1e-6)
        mixed = torch.einsum("ij,btid->btjd", module.comb.detach().double(), x)
        x_next = module.post.detach().double()[:, None] * fs[k](read).unsqueeze(2) + mixed
        carried = module(x).pre.detach()
        x = x_next
    assert torch.allclose(out, x, atol=1e-6)
    assert torch.equal(seen[0], x0[:, :, 0].float().double())  # stream 0 only, via float32


def test_stack_weights_report_the_carried_h_pre_and_comb_transposed() -> None:
    n, d = 3, 4
    stack = _stand_in_stack(n, d, 3)
    x0 = torch.randn(2, 5, n, d, dtype=torch.float64)
    used = stack.weights(x0, _branches(d, 3))
    assert torch.equal(used[0][0], torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
                       .expand(2, 5, n))
    assert torch.equal(used[1][0], stack.modules[0](x0).pre.double())  # from X_0, not X_1
    x1 = stack.sublayer(0).forward(x0, _branches(d, 3)[0])
    own = stack.sublayer(1).weights(x1)[0]
    assert not torch.allclose(used[1][0], own, atol=1e-3)  # carried ≠ recomputed
    assert torch.equal(used[2][2][0, 0], stack.modules[2].comb.detach().double().T)
    assert len(list(stack.parameters())) == 3 * 3


def test_stack_rejects_bad_input() -> None:
    stack = _stand_in_stack(2, 4, 2)
    x = torch.randn(1, 1, 2, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="expected 2 branches"):
        stack.forward(x, _branches(4, 1))
    with pytest.raises(ValueError, match="stream state"):
        stack.forward(x[..., :3], _branches(4, 2))
    with pytest.raises(IndexError):
        stack.sublayer(2)


def test_check_source_raises_package_changed_on_another_composition() -> None:
    class Block:
        def forward(self, x: torch.Tensor, comb: torch.Tensor) -> torch.Tensor:
            return torch.matmul(comb, x)  # not combᵀ
    with pytest.raises(PackageChanged, match=r"comb\.transpose"):
        adapter._check_source(Block, adapter.V4_BLOCK_NEEDLES)


# --- the package ------------------------------------------------------------------------------
def _shell(cls: Any, **attributes: Any) -> Any:
    """An instance of the package's block class with only the attributes its forward reads."""
    block = nn.Module.__new__(cls)
    nn.Module.__init__(block)
    for name, value in attributes.items():
        setattr(block, name, value)
    return block


class StandInAttention(nn.Module):
    def __init__(self, d: int, v41: bool) -> None:
        super().__init__()
        self.linear, self.v41 = nn.Linear(d, d).double(), v41

    def forward(self, hidden_states: torch.Tensor, **_: Any) -> Any:
        out = torch.tanh(self.linear(hidden_states))
        return SimpleNamespace(hidden_states=out, state=None) if self.v41 else (out, None)


class StandInFFN(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.linear, self.gate = nn.Linear(d, d).double(), None

    def forward(self, x: torch.Tensor, padding_mask: Any = None) -> torch.Tensor:
        return torch.sin(self.linear(x))


def _perturbed(impl: Any) -> Any:
    with torch.no_grad():
        for p in impl.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return impl


@needs_package
def test_v4_forward_is_deepseek_v4_blocks_composition() -> None:
    from nemo_automodel.components.models.deepseek_v4.model import DeepseekV4Block
    n, d = 4, 8
    torch.manual_seed(0)
    first = _perturbed(adapter.make_deepseek_v4(n, d, seed=1))
    second = _perturbed(adapter.make_deepseek_v4(n, d, seed=2))
    attention, ffn = StandInAttention(d, v41=False), StandInFFN(d)
    block = _shell(DeepseekV4Block, attn_hc=first.module.hc, ffn_hc=second.module.hc,
                   self_attn=attention, mlp=ffn, input_layernorm=nn.Identity(),
                   post_attention_layernorm=nn.Identity(), is_hash_routing_layer=False)
    x = torch.randn(2, 3, n, d, dtype=torch.float64)
    want = block(x, position_embeddings=None)
    got = second.forward(first.forward(x, lambda h: attention(h)[0]), ffn)
    assert torch.allclose(got, want, atol=1e-12, rtol=0)
    comb = first.module.hc(x)[2]
    h_post, H_res = first.weights(x)[1:]
    assert torch.equal(H_res, comb.transpose(-1, -2).double())  # X' = combᵀ X
    assert float(h_post.detach().max()) > 1.0  # post = 2σ
    assert torch.equal(first.reduce(x), first.module.head(x))


@needs_package
def test_v41_stack_is_deepseek_v41_models_chain() -> None:
    from nemo_automodel.components.models.deepseek_v41.model import DeepseekV41Block
    n, d, blocks = 4, 8, 2
    torch.manual_seed(0)
    impl = _perturbed(adapter.make_deepseek_v41(n, d, seed=3))
    stack = impl.stack(2 * blocks)
    with torch.no_grad():
        for module in stack.modules[1:]:
            for p in module.parameters():
                p.add_(0.3 * torch.randn_like(p))
    attentions = [StandInAttention(d, v41=True) for _ in range(blocks)]
    ffns = [StandInFFN(d) for _ in range(blocks)]
    x0 = torch.randn(2, 3, n, d, dtype=torch.float64)
    # DeepseekV41Model.forward: one-hot pre-mix, the blocks, then the final collapse
    x, pre_mix = x0, torch.zeros(2, 3, n, dtype=torch.float32)
    pre_mix[..., 0] = 1
    for b in range(blocks):
        block = _shell(DeepseekV41Block, attn_hc=stack.modules[2 * b],
                       ffn_hc=stack.modules[2 * b + 1], attn=attentions[b], ffn=ffns[b],
                       attn_norm=nn.Identity(), ffn_norm=nn.Identity(), engram=None)
        x, pre_mix, _ = block(x, pre_mix, None, position_ids=None)
    branches: list[Any] = []
    for b in range(blocks):
        branches += [lambda h, a=attentions[b]: a(h).hidden_states, ffns[b]]
    got = stack.forward(x0, branches)
    assert torch.allclose(got, x, atol=1e-12, rtol=0)
    used = stack.weights(x0, branches)
    assert torch.equal(used[1][0], stack.modules[0](x0).pre.double())  # carried from X_0
    assert len(list(stack.parameters())) == 3 * 2 * blocks


@needs_package
def test_v41_single_step_uses_its_own_pre_and_the_package_expand() -> None:
    n, d = 4, 8
    torch.manual_seed(0)
    impl = _perturbed(adapter.make_deepseek_v41(n, d, seed=4))
    x = torch.randn(2, 3, n, d, dtype=torch.float64)
    h_pre, h_post, H_res = impl.weights(x)
    zero = impl.forward(x, torch.zeros_like)
    assert torch.allclose(zero, H_res @ x, atol=1e-6)  # comb[i, j]: input i to output j
    branch = nn.Linear(d, d).double()
    collapsed = (h_pre.unsqueeze(-1) * x).sum(2)
    want = H_res @ x + h_post.unsqueeze(-1) * branch(collapsed).unsqueeze(-2)
    assert torch.allclose(impl.forward(x, branch), want, atol=1e-6)
    assert torch.allclose(H_res.sum(-1), torch.ones_like(H_res.sum(-1)), atol=1e-5)


@needs_package
def test_seed_is_reproducible_and_the_stack_shares_sublayer_zero() -> None:
    a, b = adapter.make_deepseek_v41(4, 8, seed=5), adapter.make_deepseek_v41(4, 8, seed=5)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert 0.015 < float(a.module.fn.detach().std()) < 0.025  # initializer_range 0.02
    stack = a.stack(3)
    assert stack.modules[0] is not a.module and stack.sublayer(0).module is stack.modules[0]
    assert all(torch.equal(p, q) for p, q in zip(stack.modules[0].parameters(),
                                                 a.parameters(), strict=True))
    with torch.no_grad():
        next(iter(stack.parameters())).add_(1.0)  # a fresh stack: the impl is untouched
    assert torch.equal(a.module.fn, b.module.fn)
    assert not torch.equal(stack.modules[1].fn, stack.modules[2].fn)
    assert torch.equal(stack.modules[1].fn, b.stack(2).modules[1].fn)
    with pytest.raises(ValueError, match="layers"):
        a.stack(0)
    v4 = adapter.make_deepseek_v4(4, 8, seed=5)
    assert v4.module.hc.fn.dtype == torch.float32 and not v4.conventions.formula.h_post.eps


@needs_package
def test_v41_stack_declares_the_previous_input_design_and_passes_the_stack_family() -> None:
    from hcspec.conformance.protocol import stack_pre_mix
    from hcspec.conformance.run.session import check_implementation

    design, initial = stack_pre_mix(adapter.make_deepseek_v41(4, 8, seed=0).stack(3))
    assert design == "previous_input" and initial is not None
    assert torch.equal(initial, torch.eye(4, dtype=initial.dtype)[0])  # the model's one-hot
    report = check_implementation(adapter.make_deepseek_v41, profile="quick", device="cpu",
                                  only=["stack"])
    status = {r.id: r.status for r in report.results if r.id.startswith("stack.")}
    assert status == dict.fromkeys(("stack.unrolled_weights", "stack.stream_sum_preserved",
                                    "stack.carried_matches_recomputed", "stack.fd_gradients"),
                                   "passed"), status


@needs_package
def test_v4_declares_the_published_layout_its_own_parameters() -> None:
    impl = adapter.make_deepseek_v4(4, 8, seed=6)
    assert impl.conventions.published == "deepseek-v4"
    params = impl.published_parameters()
    hc = impl.module.hc
    assert params["hc_fn"] is hc.fn and params["hc_scale"] is hc.scale
    assert params["hc_base"] is hc.base
    assert (params["hc_eps"], params["norm_eps"], params["sinkhorn_iters"]) == (1e-6, 1e-6, 20)
    other = adapter.make_deepseek_v4(4, 8, seed=7)
    impl.load_published(other.published_parameters())
    assert torch.equal(hc.fn, other.module.hc.fn) and torch.equal(hc.base, other.module.hc.base)


@needs_package
def test_v4_forward_runs_the_packages_block_so_its_orientation_is_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``forward`` goes through ``DeepseekV4Block.forward``: a block that mixed ``comb X``
    (patched in after the factory's source check) makes the output leave the law of the
    reported weights (``H_res = combᵀ``)."""
    from nemo_automodel.components.models.deepseek_v4.model import DeepseekV4Block
    torch.manual_seed(0)
    impl = _perturbed(adapter.make_deepseek_v4(4, 8, seed=8))
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64)
    with torch.no_grad():
        h_pre, h_post, H_res = impl.weights(x)
        law = H_res @ x + h_post.unsqueeze(-1) * torch.tanh(
            torch.einsum("btn,btnd->btd", h_pre, x)).unsqueeze(-2)
        assert torch.allclose(impl.forward(x, torch.tanh), law, atol=1e-6)

    def misoriented(self: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        pre, post, comb = self.attn_hc(x)
        collapsed = (pre.unsqueeze(-1) * x).sum(dim=2).to(x.dtype)
        out, _ = self.self_attn(hidden_states=collapsed, **kwargs)
        return post.to(x.dtype).unsqueeze(-1) * out.unsqueeze(-2) + torch.matmul(
            comb.to(x.dtype), x)

    monkeypatch.setattr(DeepseekV4Block, "forward", misoriented)
    with torch.no_grad():
        assert float((impl.forward(x, torch.tanh) - law).abs().max()) > 1e-3
