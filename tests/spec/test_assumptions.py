"""Assumptions are exactly what the proof needs: dropping any declared
assumption of any theorem makes ``prove`` fail, either because the proof uses it by name
(:func:`hcspec.spec.steps.assume`) or because a symbol's sympy assumption is tied to it
(:func:`hcspec.spec.steps.hypothesis`) and a step needs it. Definitions and notation live in a
theorem's ``setting`` instead.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import sympy

from hcspec.spec.registry import Theorem, all_theorems, get
from hcspec.spec.steps import granted, hypothesis

CASES = [(theorem.id, index) for theorem in all_theorems()
         for index in range(len(theorem.assumptions))]


@pytest.mark.parametrize(("theorem_id", "index"), CASES, ids=[f"{t}[{i}]" for t, i in CASES])
def test_dropping_a_declared_assumption_fails_the_proof(theorem_id: str, index: int) -> None:
    theorem = get(theorem_id)
    kept = theorem.assumptions[:index] + theorem.assumptions[index + 1:]
    result = replace(theorem, assumptions=kept).prove()
    assert not result.ok, (f"{theorem_id}: prove passes without "
                           f"{theorem.assumptions[index]!r}: use it or move it to the setting")


def test_a_hypothesis_holds_only_where_it_is_declared() -> None:
    seen: dict[str, object] = {}

    def proof() -> list[tuple[str, object]]:
        seen["eps"] = hypothesis("ε > 0", "epsilon", weaker={"real": True}, positive=True)
        seen["entries"] = granted("A > 0", positive=True)
        return []

    declared = ("ε > 0.", "A > 0.")
    Theorem("test.hypothesis", "s", declared, "c", "arXiv", proof).prove()  # type: ignore[arg-type]
    assert seen == {"eps": sympy.Symbol("epsilon", positive=True),
                    "entries": {"positive": True}}
    Theorem("test.hypothesis", "s", (), "c", "arXiv", proof).prove()  # type: ignore[arg-type]
    eps = seen["eps"]
    assert isinstance(eps, sympy.Symbol)
    assert eps.is_real is True and eps.is_positive is None
    assert seen["entries"] == {}


@pytest.mark.parametrize("theorem_id", ["ds.transpose_closure", "ds.nonexpansive"])
def test_an_assumption_no_step_uses_fails_the_proof(theorem_id: str) -> None:
    # the fourth edition's audit: both declared a second matrix K that no step uses
    from hcspec.spec.theorems.doubly_stochastic import DS_K

    theorem = get(theorem_id)
    assert theorem.prove().ok
    result = replace(theorem, assumptions=(*theorem.assumptions, DS_K)).prove()
    assert not result.ok and "no step uses" in (result.error or ""), result.error
