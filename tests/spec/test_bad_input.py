"""Bad input to spec functions raises ValueError naming what was expected."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from hcspec.spec import checks, counts, formulas, network, norms, numeric
from hcspec.spec import doubly_stochastic as ds


@pytest.mark.parametrize(("rows", "cols", "message"), [
    (0, 3, r"n must be a positive integer, got 0"),
    (2, 0, r"d must be a positive integer, got 0"),
    (-1, 2, r"n must be a positive integer, got -1"),
])
def test_connection_symbols_rejects_empty_sizes(rows: int, cols: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        formulas.connection_symbols(rows, cols)


def test_numeric_rejects_zero_streams_and_zero_features() -> None:
    with pytest.raises(ValueError, match=r"expected n >= 1 streams on axis -2, got n = 0"):
        numeric.aggregate(np.zeros((0, 3)), np.zeros(0))
    with pytest.raises(ValueError, match=r"expected d >= 1 features on axis -1, got d = 0"):
        numeric.forward(np.zeros((2, 0)), np.ones(2), np.eye(2), np.zeros(0))
    with pytest.raises(ValueError, match=r"expected n >= 1"):
        numeric.branch_cotangent(np.zeros((0, 2)), np.zeros(0))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: numeric.aggregate(np.zeros((2, 3)), np.zeros(3)),
     r"h_pre: expected trailing shape \(2,\), got \(3,\)"),
    (lambda: numeric.forward(np.zeros((2, 3)), np.ones(2), np.eye(3), np.zeros(3)),
     r"H_res: expected trailing shape \(2, 2\), got \(3, 3\)"),
    (lambda: numeric.forward(np.zeros((2, 3)), np.ones(2), np.eye(2), np.zeros(2)),
     r"z: expected trailing shape \(3,\), got \(2,\)"),
    (lambda: numeric.backward(np.zeros((2, 3)), np.zeros((2, 3)), np.ones(2), np.ones(2),
                              np.eye(2), np.zeros(3), np.zeros(4)),
     r"g_in: expected trailing shape \(3,\), got \(4,\)"),
    (lambda: numeric.backward(np.zeros((2, 2)), np.zeros((2, 3)), np.ones(2), np.ones(2),
                              np.eye(2), np.zeros(3), np.zeros(3)),
     r"G: expected trailing shape \(2, 3\), got \(2, 2\)"),
    (lambda: numeric.aggregate(np.zeros((4, 2, 3)), np.zeros((5, 2))),
     r"leading batch axes must broadcast together, got X \(4,\), h_pre \(5,\)"),
    (lambda: numeric.aggregate(np.zeros(3), np.zeros(3)),
     r"X: expected at least 2 axes, got shape \(3,\)"),
])
def test_numeric_rejects_mismatched_shapes(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(("call", "message"), [
    (lambda: counts.extra_params("shc", 4, 2048, 16),
     r"kind must be one of \('hc-static', 'hc-dynamic', 'mhc'\), got 'shc'"),
    (lambda: counts.extra_params("hc-dynamic", 0, 2048, 16), r"n must be an integer >= 1, got 0"),
    (lambda: counts.extra_params("hc-dynamic", 4, 0, 16), r"d must be an integer >= 1, got 0"),
    (lambda: counts.extra_params("hc-dynamic", 4, 2048, 0),
     r"layers must be an integer >= 1, got 0"),
    (lambda: counts.params_per_module("hc-dynamic", 4, 8, norm_params=-1),
     r"norm_params must be an integer >= 0, got -1"),
    (lambda: counts.flops_per_module("mhc", 4, 8, rounds=0),
     r"rounds must be an integer >= 1, got 0"),
    (lambda: counts.params_per_module("hc-static", 2.5, 8), r"n must be an integer >= 1, got 2.5"),
])
def test_counts_reject_bad_sizes(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(("call", "message"), [
    (lambda: checks.symbol_matrix("X", 0, 2), r"rows must be an integer >= 1, got 0"),
    (lambda: checks.symbol_vector("x", 0), r"size must be an integer >= 1, got 0"),
    (lambda: network.static_init(0, 1), r"n must be an integer >= 1, got 0"),
    (lambda: network.static_init(2, -1), r"k must be an integer >= 0, got -1"),
    (lambda: network.ConnectionWeights(sympy.ones(3, 1), sympy.ones(2, 1), sympy.eye(2)),
     r"h_pre: expected shape \(2, 1\) \(n = 2\), got \(3, 1\)"),
    (lambda: network.from_paper(sympy.ones(2, 3)),
     r"HC matrix must be \(n\+1\)×\(n\+1\) with n >= 1, got shape \(2, 3\)"),
    (lambda: network.from_paper(sympy.ones(3, 3)), r"HC matrix top-left entry must be 0, got 1"),
    (lambda: network.connection_weights([]), r"expected at least one sublayer, got none"),
    (lambda: network.run_stack(sympy.zeros(2, 3), [network.static_init(2, 0)], []),
     r"expected one branch per sublayer: 1 weights, 0 branches"),
    (lambda: network.run_stack(sympy.zeros(3, 3), [network.static_init(2, 0)],
                               [lambda x: x]),
     r"state has 3 streams, sublayer expects n = 2"),
    (lambda: ds.generic("H", 0), r"n must be an integer >= 1, got 0"),
    (lambda: ds.generic("H", 2, rows=False, cols=False), r"at least one of rows=True, cols=True"),
    (lambda: ds.permutation_matrices(0), r"n must be an integer >= 1, got 0"),
    (lambda: ds.sinkhorn_knopp(sympy.zeros(2, 3), 1),
     r"expected square logits, got shape \(2, 3\)"),
    (lambda: ds.sinkhorn_knopp(sympy.zeros(2, 2), 0), r"iterations must be an integer >= 1, got 0"),
    (lambda: norms.layer_norm(sympy.ones(1, 3)), r"expected a d×1 sympy Matrix, got \(1, 3\)"),
])
def test_sympy_helpers_reject_bad_input(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
