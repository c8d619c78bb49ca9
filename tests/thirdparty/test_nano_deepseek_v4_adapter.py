"""The nano-deepseek-v4 adapter: reading ``pre`` and the orientation of ``comb`` on a stand-in
(always runs), and the package's own module (skipped where nano-deepseek-v4 is absent)."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch import nn

from hcspec.conformance.adapters import nano_deepseek_v4 as adapter
from hcspec.conformance.adapters._capture import PackageChanged

HAVE_PACKAGE = importlib.util.find_spec("nano_deepseek_v4") is not None
needs_package = pytest.mark.skipif(not HAVE_PACKAGE, reason="nano-deepseek-v4 is not installed")


class StandInHC(nn.Module):
    """Returns ``(post, comb, collapsed)`` as nano's HyperConnection does, with fixed weights
    written for this test: ``pre`` from one ``unsqueeze`` call, an asymmetric ``comb``."""

    def __init__(self, n: int, unsqueezes: int = 1) -> None:
        super().__init__()
        self.pre = nn.Parameter(torch.linspace(0.1, 0.9, n, dtype=torch.float64))
        self.post = nn.Parameter(torch.linspace(1.0, 0.5, n, dtype=torch.float64))
        comb = torch.arange(n * n, dtype=torch.float64).reshape(n, n) + 1
        self.comb = nn.Parameter(comb / comb.sum(-1, keepdim=True))
        self.unsqueezes = unsqueezes

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        shape = x.shape[:3]
        pre = self.pre.expand(shape) * 1.0
        weighted = pre.unsqueeze(-1)
        for _ in range(self.unsqueezes - 1):
            pre.unsqueeze(-1)
        collapsed = (weighted * x).sum(2)
        return self.post.expand(shape), self.comb.expand(*shape, x.shape[2]), collapsed


class StandInLayer(nn.Module):
    def __init__(self, n: int, unsqueezes: int = 1) -> None:
        super().__init__()
        self.hc = StandInHC(n, unsqueezes)


def test_decompose_reads_pre_and_forward_uses_comb_as_h_res() -> None:
    n, d = 3, 5
    module = StandInLayer(n)
    x = torch.randn(2, 4, n, d, dtype=torch.float64)
    pre = adapter.read_pre(module, x)  # type: ignore[arg-type]
    assert torch.equal(pre[0, 0], module.hc.pre.detach())
    factory = adapter.make_factory(8, build=lambda n_, d_, i: StandInLayer(n_))
    impl = factory(n, d)
    impl.module.hc.load_state_dict(module.hc.state_dict())
    h_pre, h_post, H_res = impl.weights(x)
    assert torch.equal(H_res[1, 2], module.hc.comb.detach())  # X' = comb @ X, not combᵀ
    branch = nn.Linear(d, d).double()
    want = module.hc.comb @ x + h_post.unsqueeze(-1) * branch(
        (h_pre.unsqueeze(-1) * x).sum(2)).unsqueeze(2)
    assert torch.allclose(impl.forward(x, branch), want, atol=1e-12)
    with pytest.raises(PackageChanged, match=r"pre\.unsqueeze"):
        adapter.read_pre(StandInLayer(n, unsqueezes=2), x)  # type: ignore[arg-type]


def test_conventions_declare_the_deviations() -> None:
    c = adapter.conventions(8)
    assert (c.formula.h_post.multiplier, c.formula.sinkhorn.start,
            c.formula.sinkhorn.exact_axis) == (1.0, "sigmoid", "columns")
    assert (c.formula.h_pre.eps, c.formula.h_post.eps, c.formula.sinkhorn.additive_eps,
            c.formula.sinkhorn.denominator_eps) == (1e-6,) * 4
    assert c.reduce == "learned" and c.compute_dtype == torch.float32


@needs_package
def test_forward_is_the_decoder_layers_composition() -> None:
    n, d = 4, 8
    impl = adapter.make(n, d, seed=3, layer_index=2)
    with torch.no_grad():
        for p in impl.parameters():
            p.add_(0.5 * torch.randn_like(p))
    x = torch.randn(2, 3, n, d, dtype=torch.float64)
    branch = nn.Linear(d, d).double()
    post, comb, collapsed = impl.module.hc(x)  # the package's own tensors
    # DeepSeekV4DecoderLayer.forward: post.unsqueeze(-1) * F(...).unsqueeze(-2) + comb @ streams
    want = post.unsqueeze(-1) * branch(collapsed).unsqueeze(-2) + torch.matmul(comb, x)
    assert torch.allclose(impl.forward(x, branch), want, atol=1e-12)
    h_pre, h_post, H_res = impl.weights(x)
    assert torch.allclose((h_pre.unsqueeze(-1) * x).sum(2), collapsed, atol=1e-12)
    assert torch.equal(H_res, comb) and torch.equal(h_post, post)
    assert float(h_post.detach().max()) < 1.0 + 1e-5  # multiplier 1: σ + eps
    assert torch.equal(impl.reduce(x), impl.module.head(x))


@needs_package
def test_seed_is_reproducible_and_fn_is_initialised_as_the_package_does() -> None:
    a, b = adapter.make(4, 8, seed=5), adapter.make(4, 8, seed=5)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    std = float(a.module.hc.fn.detach().std())
    assert 0.015 < std < 0.025  # initializer_range 0.02
    assert torch.equal(a.module.hc.base, torch.zeros_like(a.module.hc.base))


@needs_package
def test_forward_traces_with_fullgraph() -> None:
    impl = adapter.make(4, 8)
    branch = nn.Linear(8, 8).double()
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64)
    compiled = torch.compile(lambda x: impl.forward(x, branch), fullgraph=True,
                             backend="aot_eager")
    assert torch.equal(compiled(x), impl.forward(x, branch))
