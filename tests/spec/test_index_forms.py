"""The index-form and general-n proofs: their helpers agree with the explicit-size code at small
sizes, wrong claims fail, and the theorems that use them prove with their generality."""

from __future__ import annotations

import pytest
import sympy

from hcspec.spec import doubly_stochastic as ds
from hcspec.spec import network
from hcspec.spec import sinkhorn_index as si
from hcspec.spec.checks import symbol_matrix, symbol_vector
from hcspec.spec.registry import ProofFailure, get
from hcspec.spec.theorems.duality import HC_PARALLEL_EVEN, HC_PARALLEL_ODD, parallel_matrix
from hcspec.spec.theorems.init import dynamic_weights, index_dynamic_weights, index_instance


def explicit(entry: si.Entry, n: int) -> sympy.Matrix:
    """An index-form matrix at an explicit n (its sums evaluated)."""
    return sympy.Matrix(n, n, lambda i, j: entry(i, j).subs(si.N, n).doit())


def test_parallel_matrices_are_eq_18_19_at_n_2_and_the_literal_eq_55_is_not() -> None:
    assert parallel_matrix(2, 1) == HC_PARALLEL_ODD
    assert parallel_matrix(2, 2) == HC_PARALLEL_EVEN
    assert parallel_matrix(2, 2, literal=True) == sympy.Matrix([[0, 1, 0], [1, 1, 0], [0, 0, 1]])
    # n = 3: layer 5 is the second of group 2, so it reads and writes stream 2 only
    weights = network.from_paper(parallel_matrix(3, 5))
    assert weights.h_pre == sympy.Matrix([0, 1, 0]) == weights.h_post
    assert weights.H_res == sympy.eye(3)
    with pytest.raises(ValueError, match="n must be an integer >= 2"):
        parallel_matrix(1, 1)


def test_index_form_sinkhorn_steps_are_the_explicit_ones() -> None:
    A = si.positive_entries("A")
    M = sympy.Matrix(3, 3, lambda i, j: A(i, j))
    assert sympy.simplify(explicit(si.row_step(A), 3) - ds.normalise_rows(M)) == sympy.zeros(3, 3)
    assert sympy.simplify(explicit(si.column_step(A), 3) - ds.normalise_columns(M)) == \
        sympy.zeros(3, 3)
    assert explicit(si.transpose(A), 3) == M.T


def test_index_form_lemmas_reject_a_wrong_value() -> None:
    _, _, value = si.rows_exact()
    assert value == 1
    with pytest.raises(ProofFailure, match="expected 2"):
        si.require_reduces("row sums", value, 2)
    with pytest.raises(ProofFailure, match="not provably positive"):
        si.require_positive("an entry", si.positive_entries("A")(si.I, si.J) - 1)


def test_index_form_dynamic_weights_are_the_explicit_ones_and_w_zero_is_static() -> None:
    s_alpha, s_beta = sympy.symbols("s_alpha s_beta", real=True)
    eps = sympy.Symbol("epsilon", positive=True)
    n, d = 2, 2
    X = symbol_matrix("X", n, d)
    static = network.ConnectionWeights(symbol_vector("p", n), symbol_vector("q", n),
                                       symbol_matrix("H", n, n))
    W_beta, W_m, W_r = symbol_vector("b", d), symbol_vector("m", d), symbol_matrix("r", d, n)
    dyn = dynamic_weights(X, static, W_beta, W_m, W_r, s_alpha, s_beta, eps)
    point = {symbol: sympy.Rational(k % 5 + 1, 3) * (-1) ** k
             for k, symbol in enumerate(sorted(
                 set().union(X.free_symbols, W_beta.free_symbols, W_m.free_symbols,
                             W_r.free_symbols, static.H_res.free_symbols), key=str))}
    point.update({s_alpha: sympy.Rational(1, 2), s_beta: sympy.Rational(1, 4), eps: 1})
    for name, expr in index_dynamic_weights(s_alpha, s_beta, eps).items():
        ours = index_instance(expr, n, d, X, static, W_beta, W_m, W_r)
        gap = (ours - getattr(dyn, name)).xreplace(point).evalf(30)
        assert max(abs(entry) for entry in gap) < 1e-25, name
    zero = index_instance(index_dynamic_weights(s_alpha, s_beta, eps)["H_res"], n, d, X, static,
                          sympy.zeros(d, 1), sympy.zeros(d, 1), sympy.zeros(d, n))
    assert zero == static.H_res


@pytest.mark.slow
@pytest.mark.parametrize("theorem_id", [
    "duality.parallel", "mhc.sinkhorn_rows_exact", "mhc.sinkhorn_variants",
    "mhc.sinkhorn_seed_loop", "dynamic.init_equals_static", "dynamic.weights_bounded",
    "reduction.postnorm_dynamic", "reduction.postnorm_unreachable_static",
    "reduction.n1_expressiveness", "ds.permutation_vertices",
])
def test_theorem_is_proven_beyond_explicit_sizes(theorem_id: str) -> None:
    theorem = get(theorem_id)
    result = theorem.prove()
    assert result.ok, result.error
    assert result.generality in ("all sizes", "induction")
    assert result.sizes
