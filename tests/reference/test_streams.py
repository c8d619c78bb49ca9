"""expand_streams / reduce_streams and the modules' expand / reduce methods."""

from __future__ import annotations

import pytest
import torch

from hcspec.reference import (
    DynamicHyperConnection,
    ManifoldHyperConnection,
    StaticHyperConnection,
    expand_streams,
    reduce_streams,
)


def test_expand_replicates_every_stream() -> None:
    h = torch.randn(2, 3, 5, dtype=torch.float64)
    x = expand_streams(h, 4)
    assert x.shape == (2, 3, 4, 5)
    for i in range(4):
        assert torch.equal(x[:, :, i], h)


def test_expand_returns_a_fresh_tensor() -> None:
    h = torch.randn(2, 3, 5)
    x = expand_streams(h, 4)
    assert x.is_contiguous()
    x[0, 0, 0, 0] = 123.0
    assert h[0, 0, 0] != 123.0
    assert x[0, 0, 1, 0] != 123.0


def test_reduce_sums_streams() -> None:
    x = torch.arange(2 * 1 * 3 * 2, dtype=torch.float64).reshape(2, 1, 3, 2)
    expected = torch.tensor([[[6.0, 9.0]], [[24.0, 27.0]]], dtype=torch.float64)
    assert torch.equal(reduce_streams(x), expected)


def test_reduce_of_expand_is_n_times() -> None:
    h = torch.randn(2, 3, 5, dtype=torch.float64)
    torch.testing.assert_close(reduce_streams(expand_streams(h, 3)), 3 * h, rtol=0, atol=1e-15)


def test_expand_gradient_is_the_stream_sum() -> None:
    h = torch.randn(1, 2, 3, dtype=torch.float64, requires_grad=True)
    g = torch.randn(1, 2, 4, 3, dtype=torch.float64)
    expand_streams(h, 4).backward(g)
    assert h.grad is not None
    torch.testing.assert_close(h.grad, g.sum(dim=-2), rtol=0, atol=1e-15)


@pytest.mark.parametrize("n", [0, -2, 1.0, True])
def test_expand_rejects_bad_n(n: object) -> None:
    with pytest.raises(ValueError, match="n must be a positive integer"):
        expand_streams(torch.zeros(1, 2, 3), n)  # type: ignore[arg-type]


def test_rank_errors_name_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"\[B, T, d\], got \(2, 3\)"):
        expand_streams(torch.zeros(2, 3), 2)
    with pytest.raises(ValueError, match=r"\[B, T, n, d\], got \(2, 3, 4\)"):
        reduce_streams(torch.zeros(2, 3, 4))


@pytest.mark.parametrize(
    "module",
    [
        StaticHyperConnection(3, 5, 0),
        DynamicHyperConnection(3, 5, 1),
        ManifoldHyperConnection(3, 5),
    ],
    ids=lambda m: m.kind,
)
def test_module_expand_and_reduce(module: StaticHyperConnection) -> None:
    h = torch.randn(2, 4, 5)
    x = module.expand(h)
    assert torch.equal(x, expand_streams(h, 3))
    assert torch.equal(module.reduce(x), reduce_streams(x))
    with pytest.raises(ValueError, match=r"expected h of shape \[B, T, d=5\], got \(2, 4, 6\)"):
        module.expand(torch.zeros(2, 4, 6))
    with pytest.raises(ValueError, match=r"\[B, T, n=3, d=5\], got \(2, 4, 2, 5\)"):
        module.reduce(torch.zeros(2, 4, 2, 5))
