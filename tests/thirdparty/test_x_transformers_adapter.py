"""The x-transformers adapter: the layout/orientation mapping on a stand-in (always runs), and the
composition against the package's own ``Decoder`` (skipped where x-transformers is absent)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch
from torch import nn

from hcspec.conformance.adapters.x_transformers import XTransformersHyperConnection

HAVE_PACKAGE = importlib.util.find_spec("x_transformers") is not None
needs_package = pytest.mark.skipif(not HAVE_PACKAGE, reason="x-transformers is not installed")


class StandIn(nn.Module):
    """A module with HyperConnection's interface, written for this test: ``prepare`` takes the
    folded ``[(B·n), T, d]`` state and mixes ``out[t] = Σ_s alpha[s, t] X[s]`` with a fixed,
    asymmetric ``alpha [n, 1 + n]`` through ``torch.einsum``; ``forward`` adds ``beta ⊗ out``."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.sinkhorn_iters = 3
        self.alpha = nn.Parameter(torch.arange(n * (n + 1), dtype=torch.float64).reshape(n, n + 1))
        self.beta = nn.Parameter(torch.linspace(0.5, 1.5, n, dtype=torch.float64))

    def prepare(self, folded: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        b = folded.shape[0] // self.n
        streams = folded.reshape(b, self.n, *folded.shape[1:]).permute(0, 2, 1, 3)  # b t s d
        alpha = self.alpha.expand(*streams.shape[:2], self.n, self.n + 1)
        mix = torch.einsum("btsu,btsd->btud", alpha, streams)
        beta = self.beta.expand(*streams.shape[:3])
        return mix[..., 0, :], mix[..., 1:, :], {"beta": beta}

    def forward(self, out: torch.Tensor, residuals: torch.Tensor, *,
                beta: torch.Tensor) -> torch.Tensor:
        new = residuals + beta.unsqueeze(-1) * out.unsqueeze(-2)  # [b, t, s, d]
        b, t, s, d = new.shape
        return new.permute(0, 2, 1, 3).reshape(b * s, t, d)


def test_weights_transpose_the_stored_mixing_and_forward_unfolds_batch_outer() -> None:
    n, d = 3, 4
    module = StandIn(n)
    impl = XTransformersHyperConnection(module, n, d)
    x = torch.randn(2, 5, n, d, dtype=torch.float64)
    h_pre, h_post, H_res = impl.weights(x)
    alpha = module.alpha.detach()
    assert torch.equal(h_pre[1, 4], alpha[:, 0])
    assert torch.equal(H_res[0, 0], alpha[:, 1:].T)  # H_res[j, s] = alpha[s, 1 + j]
    assert torch.equal(h_post[0, 2], module.beta.detach())
    branch = nn.Linear(d, d).double()
    got = impl.forward(x, branch)
    want = H_res @ x + h_post.unsqueeze(-1) * branch((h_pre.unsqueeze(-1) * x).sum(2)).unsqueeze(2)
    assert torch.allclose(got, want, atol=1e-12)
    assert impl.conventions.formula.sinkhorn.iterations == 3
    assert torch.equal(impl.reduce(x), x.sum(2))
    h = torch.randn(2, 5, d, dtype=torch.float64)
    assert torch.equal(impl.expand(h), h.unsqueeze(2).expand(2, 5, n, d))


@needs_package
@pytest.mark.parametrize("layer_index", [0, 1, 2, 5])
def test_factory_builds_the_decoders_module(layer_index: int) -> None:
    from x_transformers import Decoder

    from hcspec.conformance.adapters import x_transformers as adapter

    n, d = 3, 8
    decoder = Decoder(dim=d, depth=3, num_residual_streams=n)
    theirs = decoder.layers[layer_index][2]
    ours = adapter.make(n, d, layer_index=layer_index, dtype=torch.float32).module
    assert type(ours) is type(theirs)
    mine, want = ours.state_dict(), theirs.state_dict()
    assert mine.keys() == want.keys()
    assert all(torch.equal(mine[k], want[k]) for k in want)
    assert ours.sinkhorn_iters == theirs.sinkhorn_iters == adapter.DECODER_SINKHORN_ITERS


@needs_package
def test_forward_composes_as_the_decoder_does() -> None:
    from x_transformers import Decoder

    n, d = 4, 8
    torch.manual_seed(0)
    decoder = Decoder(dim=d, depth=2, num_residual_streams=n,
                      custom_layers=("f", "f", "f", "f")).double()
    with torch.no_grad():
        for name, p in decoder.named_parameters():
            if name != "stream_emb":  # the adapter's expand is the decoder's at init
                p.add_(0.3 * torch.randn_like(p))
    h = torch.randn(2, 5, d, dtype=torch.float64)
    want = decoder(h)
    x = None
    for norms, block, residual_fn in decoder.layers:
        impl = XTransformersHyperConnection(residual_fn, n, d)
        x = impl.expand(h) if x is None else x
        pre_norm = norms[0]
        x = impl.forward(x, lambda u, block=block, pre_norm=pre_norm: block(pre_norm(u)))
    assert x is not None
    got = decoder.final_norm(impl.reduce(x))
    assert torch.allclose(got, want, atol=1e-12)


@needs_package
def test_residual_mixing_is_all_ones() -> None:
    """The finding of docs/findings/x_transformers.md, through the adapter."""
    from hcspec.conformance.adapters import x_transformers as adapter

    impl = adapter.make(4, 8, seed=1)
    with torch.no_grad():
        for p in impl.parameters():
            p.add_(torch.randn_like(p))
    _, _, H_res = impl.weights(torch.randn(2, 3, 4, 8, dtype=torch.float64))
    assert torch.equal(H_res, torch.ones_like(H_res))
