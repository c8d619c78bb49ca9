"""Constructions of ``H_res`` other than Sinkhorn–Knopp (the record's
:data:`hcspec.spec.record.Construction`), and what each guarantees.

Theorems: ``constructions.birkhoff_exact`` (mHC-lite, arXiv 2601.05732: a convex combination
of permutation matrices is doubly stochastic exactly, for any permutation set),
``constructions.orthostochastic_exact`` (the squared entries of an orthogonal matrix) and
``constructions.orthostochastic_inexact`` (what is left of it for an inexact orthogonal factor,
such as a finite number of Newton–Schulz iterations: ``|row sum − 1| ≤ ‖QQᵀ − I‖₂``).
Source: mHC arXiv:2512.24880 §4.1 (the Birkhoff polytope), mHC-lite arXiv 2601.05732.

The conformance constraints read them: an exact construction's sums are checked against the
rounding of its summation alone (``rules.constraints.BIRKHOFF_SUMS``), the orthostochastic one's
against its factor's orthogonality defect.
"""

from __future__ import annotations

import itertools

import sympy

from hcspec.spec import doubly_stochastic as ds
from hcspec.spec.checks import chain, require_equal, require_nonnegative, symbol_matrix
from hcspec.spec.registry import Step, theorem
from hcspec.spec.steps import assume, prose

SIZES = (1, 2, 3, 4)
"""The sizes the explicit proofs run at (all n! permutations: 1, 2, 6 and 24 terms)."""


def permutation_matrix(p: tuple[int, ...]) -> sympy.Matrix:
    """``P`` with ``P[i, p[i]] = 1`` and zeros elsewhere (the record's convention)."""
    n = len(p)
    return sympy.Matrix(n, n, lambda i, j: 1 if p[i] == j else 0)


def birkhoff_combination(perms: tuple[tuple[int, ...], ...], weights: list[sympy.Expr]
                         ) -> sympy.Matrix:
    """``Σ_k weights[k] · P_k`` over ``perms`` (mHC-lite's ``H_res``)."""
    n = len(perms[0])
    H = sympy.zeros(n, n)
    for a, p in zip(weights, perms, strict=True):
        H += a * permutation_matrix(p)
    return H


def _birkhoff_proof(sets: dict[int, tuple[tuple[int, ...], ...]]) -> list[Step]:
    """At each n of ``sets``: nonnegative weights ``a_k`` with the last one ``1 − Σ_{k<K} a_k``
    (the softmax's unit sum); ``H = Σ a_k P_k`` is ≥ 0 and its row and column sums are 1 exactly.

    Raises:
        ProofFailure: an entry not provably ≥ 0, or a sum that is not 1 (a set that is not of
            permutations: tests pass one).
    """
    steps: list[Step] = [prose(
        "every n: each P_k is doubly stochastic (ds.permutation_vertices) and the doubly "
        "stochastic set is convex (ds.convex_closure), so Σ_k a_k P_k with a_k ≥ 0, Σ a_k = 1 "
        "is doubly stochastic for any set of permutations, repeated or not (a weight may be 0); "
        "checked exactly below at every listed n over all n! permutations")]
    for n, perms in sets.items():
        K = len(perms)
        a = list(sympy.symbols(f"a_0:{K}", nonnegative=True))
        H = birkhoff_combination(perms, a)
        require_nonnegative(f"birkhoff n={n}: the entries of Σ a_k P_k", list(H))
        total = sum(a, sympy.Integer(0))
        sums = sympy.Matrix.hstack(ds.row_sums(H), ds.col_sums(H).T)
        steps.append(require_equal(
            f"n = {n}, K = {K}: every row and column of Σ a_k P_k holds each a_k once (H ≥ 0: "
            "sums of a_k ≥ 0)", sums, total * sympy.ones(n, 2)))
        unit = assume("Σ_k a_k = 1 (softmax weights)", replace={a[-1]: 1 - (total - a[-1])})
        steps.append((f"n = {n}: [H 1 | (1ᵀ H)ᵀ] = 1", chain(sums, sympy.ones(n, 2),
                                                          using=[unit])))
    return steps


theorem(
    "constructions.birkhoff_exact",
    "mHC-lite: H_res = Σ_k a_k P_k with a = softmax(·) (a_k ≥ 0, Σ a_k = 1) over any set of "
    "permutation matrices P_k is doubly stochastic exactly: H ≥ 0, H 1 = 1, 1ᵀ H = 1ᵀ; no "
    "iteration count bounds its sums, only the rounding of the K-term sum.",
    assumptions=("a_k ≥ 0, Σ_k a_k = 1 (softmax weights).",),
    cases="every n by ds.permutation_vertices and ds.convex_closure; checked exactly at "
          "n ∈ {1, 2, 3, 4} over all n! permutations with symbolic weights",
    generality="explicit sizes",
    source="mHC-lite arXiv 2601.05732 (H_res as a convex combination of permutations); mHC "
           "arXiv:2512.24880 §4.1 (Birkhoff polytope)",
)(lambda: _birkhoff_proof({n: tuple(itertools.permutations(range(n))) for n in SIZES}))


def _orthostochastic_rows(n: int, orthogonal: bool) -> list[Step]:
    """For a generic ``Q [n, n]``: the row sums of ``Q ∘ Q`` are ``diag(QQᵀ)`` and the column
    sums ``diag(QᵀQ)`` exactly; with ``orthogonal`` both are then 1 (``QQᵀ = QᵀQ = I``)."""
    Q = symbol_matrix("q", n, n)
    S = Q.multiply_elementwise(Q)
    E = Q * Q.T - sympy.eye(n)
    F = Q.T * Q - sympy.eye(n)
    rows = ds.row_sums(S) - sympy.ones(n, 1)
    cols = ds.col_sums(S).T - sympy.ones(n, 1)
    diag_e = sympy.Matrix([E[i, i] for i in range(n)])
    diag_f = sympy.Matrix([F[i, i] for i in range(n)])
    steps = [require_equal(f"n = {n}: (Q∘Q) 1 − 1 = diag(QQᵀ − I)", rows, diag_e),
             require_equal(f"n = {n}: (1ᵀ(Q∘Q))ᵀ − 1 = diag(QᵀQ − I)", cols, diag_f)]
    if orthogonal:
        g = sympy.Matrix(sympy.symbols(f"g_0:{n}"))  # g_i = (QQᵀ)_ii
        gram = sympy.Matrix([(Q * Q.T)[i, i] for i in range(n)])
        steps.append(require_equal(f"n = {n}: (Q∘Q) 1 = diag(QQᵀ) =: g", ds.row_sums(S), gram))
        unit = assume("QQᵀ = I", replace={gi: 1 for gi in g})
        steps.append((f"n = {n}: under QQᵀ = I, g = diag(I) = 1: the rows of Q∘Q sum to 1",
                      chain(g, sympy.ones(n, 1), using=[unit])))
        steps.append(prose(
            f"n = {n}: Q square with QQᵀ = I has QᵀQ = I too, so diag(QᵀQ − I) = 0: the "
            "columns sum to 1; Q∘Q ≥ 0 (squares): doubly stochastic"))
    return steps


theorem(
    "constructions.orthostochastic_exact",
    "For an orthogonal Q (QQᵀ = I), Q∘Q (the squared entries) is doubly stochastic.",
    assumptions=("Q ∈ R^{n×n} with QQᵀ = I.",),
    cases="the identities (Q∘Q)1 − 1 = diag(QQᵀ − I), (1ᵀ(Q∘Q))ᵀ − 1 = diag(QᵀQ − I) "
          "exactly at n ∈ {1, 2, 3, 4} with generic entries",
    generality="explicit sizes",
    source="orthostochastic matrices (Q∘Q, Q orthogonal) in the Birkhoff polytope; mHC "
           "arXiv:2512.24880 §4.1",
)(lambda: [s for n in SIZES for s in _orthostochastic_rows(n, True)])


theorem(
    "constructions.orthostochastic_inexact",
    "For any square Q (an inexact orthogonal factor, e.g. after finitely many Newton–Schulz "
    "iterations), the rows of Q∘Q miss 1 by the diagonal of QQᵀ − I and the columns by that of "
    "QᵀQ − I, so |row sum − 1| ≤ ‖QQᵀ − I‖₂ and |column sum − 1| ≤ ‖QᵀQ − I‖₂ = ‖QQᵀ − I‖₂.",
    setting=("Q ∈ R^{n×n}, any square matrix (no orthogonality assumed).",),
    cases="the two diagonal identities exactly at n ∈ {1, 2, 3, 4}; the norm bounds by "
          "|E_ii| = |e_iᵀ E e_i| ≤ ‖E‖₂ and the equal spectra of QQᵀ and QᵀQ",
    generality="explicit sizes",
    source="Newton–Schulz orthogonalisation followed by squared entries (an orthostochastic "
           "H_res); mHC arXiv:2512.24880 §4.1",
)(lambda: [*(s for n in SIZES for s in _orthostochastic_rows(n, False)), prose(
    "every n: |E_ii| = |e_iᵀ E e_i| ≤ ‖E‖₂ for the unit vector e_i; QQᵀ and QᵀQ are symmetric "
    "with the same eigenvalues (the squared singular values of Q), so ‖QᵀQ − I‖₂ = ‖QQᵀ − I‖₂")])
