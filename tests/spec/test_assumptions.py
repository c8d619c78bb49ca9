"""Assumptions are exactly what the proof needs (issue 26, item 4): dropping any declared
assumption of any theorem makes ``prove`` fail, either because the proof uses it by name
(:func:`hcspec.spec.steps.assume`) or because a symbol's sympy assumption is tied to it
(:func:`hcspec.spec.steps.hypothesis`) and a step needs it. Definitions and notation live in a
theorem's ``setting`` instead.

``NOT_YET_TIED`` lists the genuine hypotheses whose use the proof does not yet expose (the symbol
carries the assumption, but not through :func:`hypothesis`); each is a strict xfail, so tying one
turns its case into a failure that asks for its removal from the list.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from hcspec.spec.registry import all_theorems, get

NOT_YET_TIED: dict[tuple[str, int], str] = {
    ("counts.flops", 0): "the degree bound is an unproven premise (issue 26 item 5)",
    ("ds.n1_unique", 0): "h ≥ 0 and the unit sums: the symbol's assumptions, not yet tied",
    ("ds.permutation_vertices", 0): "the H, K block is not used by this proof; not yet reviewed",
    ("ds.permutation_vertices", 1): "0 < λ < 1: the symbol's assumption, not yet tied",
    ("ds.two_by_two_family", 0): "a real: the symbol's assumption, not yet tied",
    ("mhc.h_post_range", 0): "real pre-activation: the symbol's assumption, not yet tied",
    ("mhc.h_pre_range", 0): "real pre-activation: the symbol's assumption, not yet tied",
    ("mhc.n1_residual", 0): "c > 0: the symbol's assumption, not yet tied",
    ("mhc.sinkhorn_rows_exact", 0): "M⁰ > 0: the entries' assumption, not yet tied",
    ("mhc.sinkhorn_seed_loop", 0): "A > 0, ε > 0, τ > 0: the symbols' assumptions, not yet tied",
    ("mhc.sinkhorn_variants", 0): "A > 0: the entries' assumption, not yet tied",
    ("published.deepseek_v4_step", 0): "ε ≥ 0: the symbol's assumption, not yet tied",
    ("published.deepseek_v4_step", 1): "M > 0: the entries' assumption, not yet tied",
    ("published.mhc_paper_step", 0): "M > 0: the entries' assumption, not yet tied",
    ("reduction.postnorm_dynamic", 0): "zero mean and ε ≥ 0: not yet tied",
    ("reduction.postnorm_unreachable_static", 1): "ε ≥ 0: the symbol's assumption, not yet tied",
    ("residual.gradient_norm_not_preserved", 0): "x, g_y real: not yet tied",
    ("sinkhorn.implicit_gradient", 0): "Sinkhorn 1967 (existence and uniqueness) is cited, "
                                       "not proven here",
}
"""(theorem id, index into its assumptions) → why dropping it does not yet fail ``prove``."""

CASES = [(theorem.id, index) for theorem in all_theorems()
         for index in range(len(theorem.assumptions))]


def _case(theorem_id: str, index: int) -> object:
    reason = NOT_YET_TIED.get((theorem_id, index))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(theorem_id, index, marks=marks, id=f"{theorem_id}[{index}]")


def test_the_gap_list_names_declared_assumptions() -> None:
    assert set(NOT_YET_TIED) <= set(CASES)


@pytest.mark.slow
@pytest.mark.parametrize(("theorem_id", "index"), [_case(*case) for case in CASES])
def test_dropping_a_declared_assumption_fails_the_proof(theorem_id: str, index: int) -> None:
    theorem = get(theorem_id)
    kept = theorem.assumptions[:index] + theorem.assumptions[index + 1:]
    result = replace(theorem, assumptions=kept).prove()
    assert not result.ok, (f"{theorem_id}: prove passes without "
                           f"{theorem.assumptions[index]!r}: use it or move it to the setting")
