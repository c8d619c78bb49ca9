"""The symbolic-size and induction proofs: their helpers compute the right thing, wrong claims
fail, and the theorems that use them prove (each alone, so the fast loop stays fast)."""

from __future__ import annotations

import pytest
import sympy

from hcspec.spec.checks import require_equal, symbol_matrix, symbol_vector
from hcspec.spec.registry import ProofFailure, get
from hcspec.spec.sums import split_sums, swap_sum
from hcspec.spec.theorems.duality import backward_stack, symbolic_weights, unrolled_gradient
from hcspec.spec.theorems.remarks import seed_sinkhorn

n = sympy.Symbol("n", integer=True, positive=True)
i, j = sympy.symbols("i j", integer=True, nonnegative=True)
w, x = sympy.IndexedBase("w"), sympy.IndexedBase("x")


def test_split_sums_is_linearity_with_the_constants_pulled_out() -> None:
    c = sympy.Symbol("c")
    total = sympy.Sum(c * w[j] * (x[j] + 1), (j, 0, n - 1))
    expected = c * sympy.Sum(w[j] * x[j], (j, 0, n - 1)) + c * sympy.Sum(w[j], (j, 0, n - 1))
    assert sympy.expand(split_sums(total) - expected) == 0
    assert sympy.expand(split_sums(total).subs(n, 3).doit() - total.subs(n, 3).doit()) == 0


def test_swap_sum_exchanges_the_order_and_rejects_dependent_limits() -> None:
    double = sympy.Sum(w[i] * x[j], (j, 0, n - 1), (i, 0, n - 1))
    swapped = swap_sum(double)
    assert swapped.limits == ((i, 0, n - 1), (j, 0, n - 1))
    assert sympy.expand(swapped.subs(n, 3).doit() - double.subs(n, 3).doit()) == 0
    with pytest.raises(ValueError, match="depend on each other"):
        swap_sum(sympy.Sum(w[i] * x[j], (j, 0, i), (i, 0, n - 1)))
    with pytest.raises(ValueError, match="double sum"):
        swap_sum(sympy.Sum(x[j], (j, 0, n - 1)))


def test_unrolled_gradient_matches_the_layer_by_layer_backward_and_a_wrong_form_fails() -> None:
    weights = [symbolic_weights(2, k) for k in (1, 2)]
    G, g_ins = symbol_matrix("G", 2, 3), [symbol_vector(f"g^{k}", 3) for k in (1, 2)]
    require_equal("closed form", backward_stack(weights, G, g_ins),
                  unrolled_gradient(weights, G, g_ins))
    product = weights[1].H_res * weights[0].H_res
    wrong = unrolled_gradient(weights, G, g_ins) - product.T * G + product * G
    with pytest.raises(ProofFailure, match="numeric gate"):
        require_equal("bypass without the transpose", backward_stack(weights, G, g_ins), wrong)


def test_seed_sinkhorn_columns_end_below_one_and_rounds_are_checked() -> None:
    logits = sympy.Matrix([[0, 1], [2, 0]]).applyfunc(lambda v: sympy.Float(v, 30))
    eps = sympy.Rational(1, 1000)
    M = seed_sinkhorn(logits, 3, sympy.Integer(1), eps)
    for column_sum in (M.T * sympy.ones(2, 1)):  # c/(c + ε), c ≈ 1 the sum before the step
        assert 0 < 1 - column_sum < 2 * eps
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        seed_sinkhorn(logits, 0, sympy.Integer(1))


@pytest.mark.parametrize("theorem_id", [
    "ds.nonexpansive", "ds.gradient_stream_sum_preserved", "ds.permutation_isometry",
    "duality.sequential", "linear.backward", "mhc.tensor_parallel_locality",
    "reduction.n1_expressiveness",
])
def test_generalised_theorem_proves_with_its_generality(theorem_id: str) -> None:
    theorem = get(theorem_id)
    result = theorem.prove()
    assert result.ok, result.error
    # the label is derived from the proof (symbolic sizes, a recorded induction), not its words
    assert result.generality in ("all sizes", "induction")
    assert result.sizes
