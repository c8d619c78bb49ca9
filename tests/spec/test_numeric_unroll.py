"""spec.numeric.connection_weights: the unrolled cross-layer weights per token, against a stack
run with the spec's numeric forward (the read of every node is the unrolled combination)."""

from __future__ import annotations

import numpy as np
import pytest

from hcspec.spec import numeric


def test_every_nodes_read_is_the_unrolled_combination_of_h0_and_the_branch_outputs() -> None:
    rng = np.random.default_rng(0)
    batch, layers, n, d = 3, 4, 3, 5
    h_pre, h_post = rng.normal(size=(batch, layers, n)), rng.normal(size=(batch, layers, n))
    H_res = rng.normal(size=(batch, layers, n, n))
    h0, z = rng.normal(size=(batch, d)), rng.normal(size=(batch, layers, d))
    C = numeric.connection_weights(h_pre, h_post, H_res)
    assert C.shape == (batch, layers + 2, layers + 2)
    assert np.all(np.triu(C) == 0)  # strictly lower triangular
    X = np.repeat(h0[:, None, :], n, axis=1)  # X₀ = 1_n h₀ᵀ
    reads = []
    for k in range(layers):
        reads.append(numeric.aggregate(X, h_pre[:, k]))
        X = numeric.forward(X, h_post[:, k], H_res[:, k], z[:, k])
    reads.append(X.sum(axis=1))  # the output node reads the stream sum
    nodes = [h0] + [z[:, j] for j in range(layers)]
    for k in range(1, layers + 2):
        want = sum(C[:, k, j, None] * nodes[j] for j in range(k))
        np.testing.assert_allclose(reads[k - 1], want, rtol=0, atol=1e-12)


def test_n1_weights_are_products_of_the_scalars() -> None:
    p, q, a = np.array([[2.0], [3.0], [5.0]]), np.array([[7.0], [11.0], [13.0]]), \
        np.array([[[0.5]], [[0.25]], [[4.0]]])
    C = numeric.connection_weights(p, q, a)
    assert C[3, 1] == 5.0 * 0.25 * 7.0  # w_{1,3} = p_3 a_2 q_1
    assert C[4, 0] == 4.0 * 0.25 * 0.5  # the output reads h₀ through every a
    assert C[2, 0] == 3.0 * 0.5


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match=r"h_post: expected trailing shape \(2, 3\)"):
        numeric.connection_weights(np.zeros((2, 3)), np.zeros((2, 2)), np.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match=r"at least one sublayer"):
        numeric.connection_weights(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3, 3)))
