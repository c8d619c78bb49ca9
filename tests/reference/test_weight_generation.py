"""How each connection produces its weights, recomputed token by token from the papers' equations.

The spec tests take the reported weights as given; these pin down the weights themselves:
HC Eq. 10–13 with the row-form mapping (h_pre = A_m, h_post = Bᵀ, H_res = A_rᵀ) and
mHC Eq. 7–8, written here with explicit loops in numpy rather than the module's tensor code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hcspec.reference import DynamicHyperConnection, ManifoldHyperConnection, StaticHyperConnection
from hcspec.reference.sinkhorn import sinkhorn_knopp

B, T, D = 2, 3, 5


def _x(n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(11)
    return 2.0 * torch.randn(B, T, n, D, generator=g, dtype=torch.float64)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


@pytest.mark.parametrize(("n", "layer_index"), [(1, 0), (3, 0), (3, 4), (4, 7)])
def test_static_init_is_hc_eq14(n: int, layer_index: int) -> None:
    module = StaticHyperConnection(n, D, layer_index, dtype=torch.float64)
    h_pre, h_post, H_res = module.weights(_x(n))
    e_k = torch.zeros(n, dtype=torch.float64)
    e_k[layer_index % n] = 1.0
    assert torch.equal(h_pre, e_k.expand(B, T, n))
    assert torch.equal(h_post, torch.ones(B, T, n, dtype=torch.float64))
    assert torch.equal(H_res, torch.eye(n, dtype=torch.float64).expand(B, T, n, n))


def test_static_at_init_reads_stream_k_and_adds_to_all(perturb) -> None:
    n = 3
    module = StaticHyperConnection(n, D, layer_index=4)
    x = _x(n).float()
    out = module(x, lambda x_in: 2.0 * x_in)
    expected = x + 2.0 * x[:, :, 1:2, :]  # 4 mod 3 = 1
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("n", [1, 3])
def test_dynamic_weights_follow_hc_eq10_to_13(n: int, perturb) -> None:
    module = DynamicHyperConnection(n, D, layer_index=2, dtype=torch.float64)
    perturb(module, 0.7, seed=5)
    x = _x(n)
    h_pre, h_post, H_res = (_np(w) for w in module.weights(x))
    W_m, W_beta, W_r = _np(module.W_pre), _np(module.W_post), _np(module.W_res)
    s_a, s_b = module.s_alpha.item(), module.s_beta.item()
    A_m, B_static, A_r = _np(module.h_pre), _np(module.h_post), _np(module.H_res).T
    for b in range(B):
        for t in range(T):
            H = _np(x)[b, t]
            mean = H.mean(axis=1, keepdims=True)
            var = H.var(axis=1, keepdims=True)
            H_bar = (H - mean) / np.sqrt(var + module.norm_eps)  # per-stream LayerNorm
            A_m_dyn = s_a * np.tanh(H_bar @ W_m) + A_m  # n
            B_dyn = s_b * np.tanh(H_bar @ W_beta) + B_static  # n  (Bᵀ as a vector)
            A_r_dyn = s_a * np.tanh(H_bar @ W_r) + A_r  # n×n, row i from stream i
            np.testing.assert_allclose(h_pre[b, t], A_m_dyn, rtol=0, atol=1e-12)
            np.testing.assert_allclose(h_post[b, t], B_dyn, rtol=0, atol=1e-12)
            np.testing.assert_allclose(H_res[b, t], A_r_dyn.T, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("n", "layer_index"), [(1, 0), (4, 0), (4, 3)])
def test_dynamic_at_init_equals_static(n: int, layer_index: int) -> None:
    static = StaticHyperConnection(n, D, layer_index, dtype=torch.float64)
    dynamic = DynamicHyperConnection(n, D, layer_index, dtype=torch.float64)
    assert dynamic.s_alpha.item() == 0.01 and dynamic.s_beta.item() == 0.01
    for w in (dynamic.W_pre, dynamic.W_post, dynamic.W_res):
        assert not w.any()
    x = _x(n)
    for got, expected in zip(dynamic.weights(x), static.weights(x), strict=True):
        assert torch.equal(got, expected)
    branch = torch.sin
    assert torch.equal(dynamic(x, branch), static(x, branch))


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-v)))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_manifold_weights_follow_mhc_eq7_eq8(n: int, perturb) -> None:
    module = ManifoldHyperConnection(n, D, sinkhorn_iterations=7, dtype=torch.float64)
    perturb(module, 0.5, seed=9)
    x = _x(n)
    h_pre, h_post, H_res = (_np(w) for w in module.weights(x))
    p = {name: _np(value) for name, value in module.named_parameters()}
    for b in range(B):
        for t in range(T):
            vec = _np(x)[b, t].reshape(-1)  # row-major: stream 0's d entries first
            x_prime = vec / np.sqrt(np.mean(vec**2) + module.norm_eps)
            pre = p["alpha_pre"] * (x_prime @ p["phi_pre"]) + p["b_pre"]
            post = p["alpha_post"] * (x_prime @ p["phi_post"]) + p["b_post"]
            res = p["alpha_res"] * (x_prime @ p["phi_res"]).reshape(n, n) + p["b_res"]
            np.testing.assert_allclose(h_pre[b, t], _sigmoid(pre), rtol=0, atol=1e-12)
            np.testing.assert_allclose(h_post[b, t], 2 * _sigmoid(post), rtol=0, atol=1e-12)
            expected_res = _np(sinkhorn_knopp(torch.from_numpy(res), 7))
            np.testing.assert_allclose(H_res[b, t], expected_res, rtol=0, atol=1e-12)


def test_manifold_init(as_numpy) -> None:
    n, d = 4, 64
    torch.manual_seed(0)
    module = ManifoldHyperConnection(n, d, dtype=torch.float64)
    for alpha in (module.alpha_pre, module.alpha_post, module.alpha_res):
        assert alpha.item() == 0.01
    assert not module.b_pre.any() and not module.b_post.any()
    assert module.sinkhorn_iterations == 20
    # b_res = c·I with H_res's diagonal 0.7 at init (without the dynamic term).
    diag_only = sinkhorn_knopp(module.b_res.detach())
    expected_diagonal = torch.full((n,), 0.7, dtype=torch.float64)
    torch.testing.assert_close(torch.diagonal(diag_only), expected_diagonal)
    torch.testing.assert_close(diag_only[0, 1], torch.tensor(0.1, dtype=torch.float64))
    # φ ~ N(0, 1/(n d)): the sample std of 4096·24 entries is within 2% of 1/16.
    phis = torch.cat([p.flatten() for p in (module.phi_pre, module.phi_post, module.phi_res)])
    assert abs(phis.std().item() * math.sqrt(n * d) - 1.0) < 0.02
    # At init the weights are within O(α) of (1/2, 1, SK(b_res)).
    h_pre, h_post, H_res = module.weights(_x_d(n, d))
    assert (h_pre - 0.5).abs().max() < 0.02
    assert (h_post - 1.0).abs().max() < 0.04
    assert (H_res - diag_only).abs().max() < 0.02


def _x_d(n: int, d: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(12)
    return torch.randn(B, T, n, d, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_manifold_constraints_hold_for_any_weights(dtype: torch.dtype, perturb) -> None:
    n = 4
    module = ManifoldHyperConnection(n, D, dtype=dtype)
    perturb(module, 3.0, seed=1)  # large α, b, φ: logits of order 10
    h_pre, h_post, H_res = module.weights(_x(n).to(dtype))
    assert (h_pre >= 0).all() and (h_pre <= 1).all()
    assert (h_post >= 0).all() and (h_post <= 2).all()
    assert (H_res >= 0).all()
    eps = torch.finfo(dtype).eps
    assert (H_res.sum(-1) - 1).abs().max() <= 3 * eps  # rows: the last normalisation
    assert (H_res.sum(-2) - 1).abs().max() <= n - 1  # columns: only the trivial bound here


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_manifold_columns_at_init_scale(dtype: torch.dtype) -> None:
    torch.manual_seed(1)
    module = ManifoldHyperConnection(4, 32, dtype=dtype)
    x = torch.randn(8, 64, 4, 32, dtype=dtype)
    H_res = module.weights(x)[2]
    col = (H_res.sum(-2) - 1).abs().max().item()
    assert col < (1e-6 if dtype == torch.float32 else 1e-9)
    long = ManifoldHyperConnection(4, 32, sinkhorn_iterations=200, dtype=dtype)
    long.load_state_dict(module.state_dict())
    if dtype == torch.float64:
        assert (long.weights(x)[2].sum(-2) - 1).abs().max() < 1e-12
