"""hcspec.spec.numeric agrees with a direct numpy einsum on random batched input."""

from __future__ import annotations

import numpy as np
import pytest

from hcspec.spec import numeric

B, T, N, D = 2, 3, 4, 5  # n != d so a transposition slip changes shapes or values


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240928)


def test_aggregate_forward_and_cotangent_match_einsum(rng: np.random.Generator) -> None:
    X = rng.normal(size=(B, T, N, D))
    h_pre, h_post = rng.normal(size=(B, T, N)), rng.normal(size=(B, T, N))
    H_res, z, G = rng.normal(size=(B, T, N, N)), rng.normal(size=(B, T, D)), rng.normal(
        size=(B, T, N, D))
    np.testing.assert_allclose(numeric.aggregate(X, h_pre), np.einsum("btnd,btn->btd", X, h_pre),
                               rtol=1e-12, atol=1e-12)
    expected = np.einsum("btmn,btnd->btmd", H_res, X) + np.einsum("btn,btd->btnd", h_post, z)
    np.testing.assert_allclose(numeric.forward(X, h_post, H_res, z), expected,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(numeric.branch_cotangent(G, h_post),
                               np.einsum("btnd,btn->btd", G, h_post), rtol=1e-12, atol=1e-12)


def test_backward_matches_einsum(rng: np.random.Generator) -> None:
    G, X = rng.normal(size=(B, T, N, D)), rng.normal(size=(B, T, N, D))
    h_pre, h_post = rng.normal(size=(B, T, N)), rng.normal(size=(B, T, N))
    H_res, z, g_in = rng.normal(size=(B, T, N, N)), rng.normal(size=(B, T, D)), rng.normal(
        size=(B, T, D))
    grads = numeric.backward(G, X, h_pre, h_post, H_res, z, g_in)
    np.testing.assert_allclose(
        grads.X, np.einsum("btmn,btmd->btnd", H_res, G) + np.einsum("btn,btd->btnd", h_pre, g_in),
        rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads.H_res, np.einsum("btmd,btnd->btmn", G, X),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads.h_post, np.einsum("btnd,btd->btn", G, z),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads.h_pre, np.einsum("btnd,btd->btn", X, g_in),
                               rtol=1e-12, atol=1e-12)


def test_backward_agrees_with_finite_differences_for_a_tanh_branch(
        rng: np.random.Generator) -> None:
    X, G = rng.normal(size=(N, D)), rng.normal(size=(N, D))
    h_pre, h_post, H_res = rng.normal(size=N), rng.normal(size=N), rng.normal(size=(N, N))

    def loss(X_: np.ndarray, h_pre_: np.ndarray) -> float:
        z_ = np.tanh(numeric.aggregate(X_, h_pre_))
        return float(np.sum(G * numeric.forward(X_, h_post, H_res, z_)))

    x_in = numeric.aggregate(X, h_pre)
    g_in = (1 - np.tanh(x_in) ** 2) * numeric.branch_cotangent(G, h_post)
    grads = numeric.backward(G, X, h_pre, h_post, H_res, np.tanh(x_in), g_in)
    step = 1e-6
    fd_X = np.zeros_like(X)
    for index in np.ndindex(X.shape):
        bump = np.zeros_like(X)
        bump[index] = step
        fd_X[index] = (loss(X + bump, h_pre) - loss(X - bump, h_pre)) / (2 * step)
    np.testing.assert_allclose(grads.X, fd_X, rtol=1e-6, atol=1e-8)


def test_shared_weights_broadcast_over_the_batch(rng: np.random.Generator) -> None:
    X = rng.normal(size=(B, T, N, D))
    h_pre = rng.normal(size=N)
    np.testing.assert_allclose(numeric.aggregate(X, h_pre), np.einsum("btnd,n->btd", X, h_pre),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("eps", [0.0, 1e-3])
def test_norms_match_the_sympy_norms(rng: np.random.Generator, eps: float) -> None:
    import sympy

    from hcspec.spec import norms

    x = rng.normal(size=(2, 3, D))
    for numeric_norm, sympy_norm in ((numeric.rms_norm, norms.rms_norm),
                                     (numeric.layer_norm, norms.layer_norm)):
        expected = np.array([[np.array(sympy_norm(sympy.Matrix(row), eps).evalf(), dtype=float)
                              [:, 0] for row in batch] for batch in x])
        np.testing.assert_allclose(numeric_norm(x, eps), expected, rtol=1e-12, atol=1e-12)


def test_norms_reject_bad_input() -> None:
    with pytest.raises(ValueError, match=r"eps must be >= 0, got -1"):
        numeric.rms_norm(np.ones(3), -1.0)
    with pytest.raises(ValueError, match=r"expected d >= 1 features on axis -1, got d = 0"):
        numeric.layer_norm(np.ones((2, 0)))
