"""Lemmas: small facts other proofs use as rewrites, each proven here once and cited where it is
used (:func:`hcspec.spec.steps.cite`, :func:`hcspec.spec.steps.lemma_rewrite`).

Theorems: ``lemma.unit_vectors``.
"""

from __future__ import annotations

import sympy

from hcspec.spec import formulas
from hcspec.spec.checks import require_link
from hcspec.spec.registry import Step, theorem
from hcspec.spec.steps import assume

N = formulas.n
R, J, M, I = sympy.symbols("r j m i", integer=True)  # noqa: E741 (the paper's index names)
T = sympy.IndexedBase("t")

UNIT_SUM = sympy.Eq(sympy.Sum(sympy.KroneckerDelta(R, J), (R, 1, N)), 1, evaluate=False)
"""1ᵀ e_j = 1 in index form: Σ_{r=1}^{n} δ_rj = 1 for 1 ≤ j ≤ n."""

ORTHOGONAL = sympy.Eq(sympy.Sum(sympy.KroneckerDelta(R, J) * sympy.KroneckerDelta(R, M),
                                (R, 1, N)), sympy.KroneckerDelta(J, M), evaluate=False)
"""e_jᵀ e_m = δ_jm in index form, for 1 ≤ j, m ≤ n."""

ONES = sympy.Eq(sympy.Sum(1, (R, 1, N)), N, evaluate=False)
"""1ᵀ 1 = n in index form: Σ_{r=1}^{n} 1 = n."""

EARLIER_STREAMS = sympy.Eq(sympy.Sum(sympy.KroneckerDelta(J, I + 1) * T[J], (J, 1, I)), 0,
                           evaluate=False)
"""P_iᵀ e_{i+1} = Σ_{j≤i} t_j e_jᵀ e_{i+1} = Σ_{j=1}^{i} δ_{j,i+1} t_j = 0: the streams written
before stream i + 1 are orthogonal to e_{i+1}."""


@theorem(
    "lemma.unit_vectors",
    "For every n and 1 ≤ j, m ≤ n, the unit vectors (e_j)_r = δ_rj satisfy 1ᵀ e_j = 1 and "
    "e_jᵀ e_m = δ_jm (and 1ᵀ 1 = n); hence P_iᵀ e_{i+1} = 0 for P_i = Σ_{j≤i} e_j t_jᵀ.",
    assumptions=("1 ≤ j ≤ n and 1 ≤ m ≤ n (1-based stream indices); i ≥ 0.",),
    cases="symbolic n, j, m, i (index form: finite sums of Kronecker deltas)",
    generality="all sizes",
    source="HC arXiv:2409.19606 App. H (the unit vectors e_i of Eq. 54–55)",
)
def _unit_vectors() -> list[Step]:
    in_range = assume("1 ≤ j ≤ n", replace={sympy.Ge(J, 1): True, sympy.Le(J, N): True,
                                            sympy.Ge(M, 1): True, sympy.Le(M, N): True})
    return [
        require_link("every n: 1ᵀ 1: n terms equal to 1", ONES.lhs, ONES.rhs),
        require_link("every n: 1ᵀ e_j: the single term r = j", UNIT_SUM.lhs, UNIT_SUM.rhs,
                     using=[in_range]),
        require_link("every n: e_jᵀ e_m: the terms r = j = m only", ORTHOGONAL.lhs, ORTHOGONAL.rhs,
                     using=[in_range]),
        require_link("every n: P_iᵀ e_{i+1}: no j ≤ i equals i + 1", EARLIER_STREAMS.lhs,
                     EARLIER_STREAMS.rhs),
    ]
