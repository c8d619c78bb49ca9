"""The proof kernel cannot say yes by mistake: every checking predicate rejects planted false
inputs of each expression class it accepts (and accepts true ones), no theorem may display a step
that no check produced (dropping assumptions: test_assumptions.py)."""

from __future__ import annotations

import pytest
import sympy

from hcspec.spec import checks
from hcspec.spec.registry import ProofResult, Theorem
from hcspec.spec.steps import PROSE, cite, prose
from hcspec.spec.theorems import kernel, lemmas


@pytest.mark.parametrize(("predicate", "case", "check", "fragment"), kernel.FALSE_INPUTS,
                         ids=[f"{p}: {c}" for p, c, _, _ in kernel.FALSE_INPUTS])
def test_kernel_rejects_a_planted_false_input_by_its_own_branch(
        predicate: str, case: str, check: object, fragment: str) -> None:
    why = kernel._verdict(check)  # type: ignore[arg-type]
    assert why is not None, f"{predicate} accepted {case}"
    assert fragment in why, f"{predicate}: {case} rejected by another branch: {why}"


@pytest.mark.parametrize(("predicate", "case", "check"), kernel.TRUE_INPUTS,
                         ids=[f"{p}: {c}" for p, c, _ in kernel.TRUE_INPUTS])
def test_kernel_accepts_a_true_input(predicate: str, case: str, check: object) -> None:
    assert kernel._accepts(check), f"{predicate} rejected {case}"  # type: ignore[arg-type]


def test_exact_zero_never_answers_true_for_a_non_zero_symbolic_matrix() -> None:
    n = sympy.Symbol("n", integer=True, positive=True)
    A = sympy.MatrixSymbol("A", n, n)
    assert checks.exact_zero(A - A) is True
    assert checks.exact_zero(2 * A - A) is False
    assert checks.exact_zero(A * A.T - A.T * A) is False


def throwaway(proof: object) -> Theorem:
    return Theorem("test.display", "s", (), "c", "arXiv", proof, "instance")  # type: ignore[arg-type]


def test_a_display_no_check_produced_fails_the_proof() -> None:
    a, b = sympy.symbols("a b")
    result = throwaway(lambda: [("shown, never checked", sympy.Eq(a, b, evaluate=False))]).prove()
    assert not result.ok and "unchecked step" in (result.error or "")
    assert "shown, never checked" in (result.error or "")


def test_checked_cited_and_prose_steps_are_displayable() -> None:
    a = sympy.Symbol("a")
    result = throwaway(lambda: [
        checks.require_equal("(a + 1)² expanded", (a + 1) ** 2, a**2 + 2 * a + 1),
        ("twice", checks.chain(r"\text{twice}", a + a, 2 * a)),
        cite("1ᵀ e_j = 1", "lemma.unit_vectors", lemmas.UNIT_SUM),
        prose("text only"),
    ]).prove()
    assert result.ok, result.error
    assert [expr == PROSE for _, expr in result.steps] == [False, False, False, True]
    assert "(lemma `lemma.unit_vectors`)" in result.steps[2][0]


def test_relabelling_a_checked_step_keeps_it_checked_but_changing_it_does_not() -> None:
    a = sympy.Symbol("a")

    def changed() -> list[tuple[str, sympy.Basic]]:
        _label, expr = checks.require_equal("(a + 1)² expanded", (a + 1) ** 2, a**2 + 2 * a + 1)
        assert isinstance(expr, sympy.Eq)
        return [("relabelled", expr), ("changed", sympy.Eq(expr.lhs, a**2 + 1, evaluate=False))]

    result = throwaway(changed).prove()
    assert not result.ok and "['changed']" in (result.error or "")


@pytest.mark.slow
def test_every_theorem_displays_only_checked_steps(proof_results: dict[str, ProofResult]) -> None:
    # prove() fails on an unchecked display, so a proven theorem has none
    failed = {key: result.error for key, result in proof_results.items() if not result.ok}
    assert failed == {}
    assert any(expr == PROSE for result in proof_results.values() for _, expr in result.steps)
