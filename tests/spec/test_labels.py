"""A theorem's generality label is derived from how its proof was done (the symbolic sizes its
checked steps hold for, a checked induction recorded by :func:`hcspec.spec.steps.induction`),
never from the words of its statement, cases or step labels."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sympy

from hcspec.spec import checks
from hcspec.spec.docs import page_generality, render_page
from hcspec.spec.registry import ProofResult, Step, Theorem, get
from hcspec.spec.steps import induction

n = sympy.Symbol("n", integer=True, positive=True)
a = sympy.Symbol("a", real=True)

WORDY = "By induction on L, for every n: the base case and the induction step hold for all sizes."


def planted(proof: Callable[[], list[Step]], generality: str | None = None) -> ProofResult:
    return Theorem("test.planted", WORDY, (), "every L by induction, symbolic n, d", "arXiv",
                   proof, generality).prove()


def at_one_value() -> list[Step]:
    """A proof at one value whose every label says induction."""
    return [
        checks.require_equal("by induction, base case, every n", (a + 1) ** 2, a**2 + 2 * a + 1),
        checks.require_equal("induction step, for every n and every L", (a - 1) ** 2,
                             a**2 - 2 * a + 1),
    ]


def recorded_induction() -> list[Step]:
    """A checked induction whose labels name no induction (a base at one value, a step for a
    symbolic n)."""
    return induction(
        checks.require_equal("first", (a + 1) ** 2, a**2 + 2 * a + 1),
        checks.require_equal("next", (n + 1) ** 2, n**2 + 2 * n + 1))


def test_words_of_induction_on_an_instance_earn_instance() -> None:
    result = planted(at_one_value)
    assert result.ok, result.error
    assert result.generality == "instance"
    assert result.sizes == ()


def test_claiming_induction_for_an_instance_fails_prove() -> None:
    result = planted(at_one_value, "induction")
    assert not result.ok
    assert "labelled 'induction' but the proof earns only 'instance'" in (result.error or "")


def test_a_recorded_induction_without_words_earns_induction() -> None:
    result = planted(recorded_induction)
    assert result.ok, result.error
    assert result.generality == "induction"
    assert result.sizes == ("n",)
    assert not any("induction" in label or "base" in label for label, _ in result.steps)


def test_symbolic_steps_without_an_induction_earn_all_sizes_not_induction() -> None:
    def proof() -> list[Step]:
        return [checks.require_equal("by induction: base case and induction step", (n + 1) ** 2,
                                     n**2 + 2 * n + 1)]

    assert planted(proof).generality == "all sizes"
    failed = planted(proof, "induction")
    assert not failed.ok
    assert "earns only 'all sizes'" in (failed.error or "")


def test_an_induction_whose_base_is_not_displayed_does_not_count() -> None:
    result = planted(lambda: recorded_induction()[1:])
    assert result.ok, result.error
    assert result.generality == "all sizes"


def test_a_claim_may_understate_what_the_proof_earns() -> None:
    result = planted(recorded_induction, "explicit sizes")
    assert result.ok, result.error
    assert result.generality == "explicit sizes"


@pytest.mark.parametrize(("base", "step", "message"), [
    (lambda: ("base", sympy.Eq(a, 2, evaluate=False)),
     lambda: checks.require_equal("step", (n + 1) ** 2, n**2 + 2 * n + 1), "not a checked step"),
    (lambda: checks.require_equal("base", (a + 1) ** 2, a**2 + 2 * a + 1),
     lambda: checks.require_equal("step", (a - 1) ** 2, a**2 - 2 * a + 1), "no symbolic size"),
    (lambda: checks.require_equal("base", (n + 1) ** 2, n**2 + 2 * n + 1),
     lambda: checks.require_equal("step", (n + 1) ** 2, n**2 + 2 * n + 1), "are one step"),
])
def test_induction_rejects_what_is_not_a_checked_induction(
        base: Callable[[], Step], step: Callable[[], Step], message: str) -> None:
    result = planted(lambda: induction(base(), step()))
    assert not result.ok
    assert message in (result.error or "")


def test_the_page_shows_the_derived_label() -> None:
    theorem = Theorem("test.planted", WORDY, (), "every L by induction", "arXiv", at_one_value)
    result = theorem.prove()
    page = render_page(theorem, result)
    assert page_generality(page) == "instance"
    assert "for the specific case named" in page


def test_n1_expressiveness_is_a_checked_induction_over_the_layers() -> None:
    result = get("reduction.n1_expressiveness").prove()
    assert result.ok, result.error
    assert result.generality == "induction"
    assert "k" in result.sizes
    labels = [label for label, _ in result.steps]
    assert any(label.startswith("base case k = j") for label in labels)


def test_a_wrong_product_step_fails() -> None:
    """The n1 step with the factor of the wrong layer (a_k for a_{k+1}) is rejected."""
    t = sympy.Symbol("t", integer=True)
    j, k = sympy.symbols("j k", integer=True)
    x = sympy.IndexedBase("a", real=True)
    upto = sympy.Product(x[t], (t, j + 1, k))
    with pytest.raises(Exception, match="does not hold"):
        checks.chain(x[k] * upto, sympy.Product(x[t], (t, j + 1, k + 1)))
