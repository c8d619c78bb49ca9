"""Sinkhorn–Knopp steps in index form, for a symbolic size n: the entrywise arguments behind
``mhc.sinkhorn_rows_exact``, ``mhc.sinkhorn_variants`` and ``mhc.sinkhorn_seed_loop``.

An n×n matrix is an *entry function* ``(i, j) ↦ expression`` (0-based indices, n a sympy
symbol); a step maps entry functions to entry functions with finite ``Sum`` s over ``0..n−1``:

    T_r^ε(A)_ij = A_ij / (Σ_k A_ik + ε),    T_c^ε(A)_ij = A_ij / (Σ_k A_kj + ε)

(ε = 0: the paper's steps, mHC arXiv:2512.24880 §4.2 Eq. 9; ε > 0: the DeepSeek-V4 variant and
the seed notes' loop). Each step takes the name of its summation index, so nested steps never
capture each other's index. The lemmas reduce sums with :func:`hcspec.spec.sums.split_sums`
(linearity) and a rename of the bound index (α-equivalence), nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import sympy

from hcspec.spec.registry import ProofFailure
from hcspec.spec.sums import split_sums

Entry = Callable[[Any, Any], Any]
"""An n×n matrix in index form: ``entry(i, j)`` is its (i, j) entry."""

N = sympy.Symbol("n", integer=True, positive=True)
"""The symbolic size n ≥ 1."""

I, J, K, L = sympy.symbols("i j k l", integer=True, nonnegative=True)  # noqa: E741
"""Indices in 0..n−1: i, j for entries, k and l bound by the steps' sums."""

EPS = sympy.Symbol("epsilon", positive=True)
"""The ε > 0 of the variants."""


def total(summand: Any, index: sympy.Symbol) -> sympy.Sum:
    """Σ_{index=0}^{n−1} summand."""
    return sympy.Sum(summand, (index, 0, N - 1))


def row_step(A: Entry, eps: Any = 0, index: sympy.Symbol = K) -> Entry:
    """T_r^ε(A): each entry divided by (its row sum + ε); ``index`` is the row sum's bound
    index."""
    return lambda i, j: A(i, j) / (total(A(i, index), index) + eps)


def column_step(A: Entry, eps: Any = 0, index: sympy.Symbol = K) -> Entry:
    """T_c^ε(A): each entry divided by (its column sum + ε); ``index`` is the column sum's bound
    index."""
    return lambda i, j: A(i, j) / (total(A(index, j), index) + eps)


def transpose(A: Entry) -> Entry:
    """Aᵀ: (i, j) ↦ A_ji."""
    return lambda i, j: A(j, i)


def row_sum(A: Entry) -> Any:
    """Row i's sum Σ_j A_ij, reduced: split by linearity, the bound j renamed to k."""
    return split_sums(total(A(I, J), J)).xreplace({J: K})


def column_sum(A: Entry) -> Any:
    """Column j's sum Σ_i A_ij, reduced: split by linearity, the bound i renamed to k."""
    return split_sums(total(A(I, J), I)).xreplace({I: K})


def require_positive(label: str, value: Any) -> None:
    """Require ``value`` to be provably positive from its symbols' assumptions.

    Raises:
        ProofFailure: naming ``label`` when sympy cannot show ``value > 0``.
    """
    if value.is_positive is not True:
        raise ProofFailure(f"{label}: {value} is not provably positive")


def require_reduces(label: str, value: Any, expected: Any) -> None:
    """Require ``value − expected`` to simplify to 0.

    Raises:
        ProofFailure: naming ``label``, the value and the expected form.
    """
    if sympy.simplify(value - expected) != 0:
        raise ProofFailure(f"{label}: got {value}, expected {expected}")


def positive_entries(name: str, assumptions: Mapping[str, bool] | None = None) -> Entry:
    """A generic n×n matrix with positive entries ``name[i, j]`` (``assumptions``: the entries'
    sympy assumptions instead, e.g. those :func:`hcspec.spec.steps.granted` gives a theorem that
    does not declare A > 0)."""
    base = sympy.IndexedBase(name, **({"positive": True} if assumptions is None
                                      else dict(assumptions)))
    return lambda i, j: base[i, j]


def rows_exact() -> tuple[Any, Any, Any]:
    """Lemma (every n): for A > 0 entrywise, row i of T_r(A) sums to exactly 1.

    Returns:
        ``(Σ_j T_r(A)_ij, the sum split by linearity, its value 1)`` for the derivation.

    Raises:
        ProofFailure: when the sum does not reduce to 1.
    """
    probe = sympy.IndexedBase("a")
    if total(probe[J], J).xreplace({N: 3}).doit() != probe[0] + probe[1] + probe[2]:
        raise ProofFailure("the index form's sums do not run over the n indices 0..n−1")
    rows = row_step(positive_entries("A"))
    summed = total(rows(I, J), J)
    split = split_sums(summed)
    value = row_sum(rows)
    require_reduces("T_r(A) 1 = 1, symbolic n", value, 1)
    return summed, split, value


def variant_rows(eps: Any = EPS) -> tuple[Any, Any, Any]:
    """Lemma (every n): for A > 0 and ε > 0, row i of T_r^ε(A) sums to r_i/(r_i + ε) with
    r_i = Σ_k A_ik, and 1 − r_i/(r_i + ε) = ε/(r_i + ε) > 0 (``eps``: the proof's ε, whose
    positivity the last step needs).

    Returns:
        ``(Σ_j T_r^ε(A)_ij, its value, the gap to 1)``.

    Raises:
        ProofFailure: when the sum or the gap does not reduce as claimed, or the gap is not
            provably positive.
    """
    A = positive_entries("A")
    rows = row_step(A, eps)
    r = total(A(I, K), K)
    value = row_sum(rows)
    require_reduces("T_r^ε(A) 1 = r/(r + ε), symbolic n", value, r / (r + eps))
    gap = sympy.cancel(1 - value)
    require_reduces("1 − r/(r + ε) = ε/(r + ε), symbolic n", gap, eps / (r + eps))
    require_positive("ε/(r + ε)", eps / (r + eps))
    return total(rows(I, J), J), value, eps / (r + eps)


def variant_columns(eps: Any = EPS, entries: Mapping[str, bool] | None = None
                    ) -> tuple[Any, Any]:
    """Lemma (every n): for B > 0 and ε > 0, column j of T_c^ε(B) sums to c_j/(c_j + ε) with
    c_j = Σ_k B_kj, which is below 1.

    Returns:
        ``(Σ_i T_c^ε(B)_ij, its value)``.

    Raises:
        ProofFailure: when the sum does not reduce as claimed or ε/(c + ε) is not positive
            (``eps``, ``entries``: the proof's ε and B's sympy assumptions, as in
            :func:`positive_entries`).
    """
    B = positive_entries("B", entries)
    columns = column_step(B, eps)
    c = total(B(K, J), K)
    value = column_sum(columns)
    require_reduces("1ᵀ T_c^ε(B) = c/(c + ε), symbolic n", value, c / (c + eps))
    require_positive("1 − c/(c + ε) = ε/(c + ε)", sympy.cancel(1 - value))
    return total(columns(I, J), I), value


def steps_keep_positive_both(eps: Any, entries: Mapping[str, bool] | None = None
                             ) -> tuple[Any, Any]:
    """Lemma (every n): the entries ``(T_r^ε(A)_ij, T_c^ε(A)_ij)`` of a positive A, each
    provably positive; T_c is checked to be the column step, T_c(A) = T_r(Aᵀ)ᵀ, so the two
    operators cannot be confused (``entries``: A's sympy assumptions, as in
    :func:`positive_entries`).

    Raises:
        ProofFailure: when an entry is not provably positive or the column step is not the
            transposed row step.
    """
    A = positive_entries("A", entries)
    rows, columns = row_step(A, eps)(I, J), column_step(A, eps)(I, J)
    if sympy.simplify(columns - transpose(row_step(transpose(A), eps))(I, J)) != 0:
        raise ProofFailure(f"T_c^ε(A)_ij = {columns} is not T_r^ε(Aᵀ)_ji")
    for name, entry in (("T_r", rows), ("T_c", columns)):
        require_positive(f"{name}^ε(A)_ij, symbolic n", entry)
    return rows, columns


def steps_keep_positive(eps: Any, entries: Mapping[str, bool] | None = None) -> Any:
    """Lemma (every n): T_r^ε and T_c^ε map a positive matrix to a positive one (a positive
    entry over a non-empty sum of positive entries, plus ε ≥ 0), so by induction on the rounds
    every iterate from M⁰ > 0 is positive (see :func:`steps_keep_positive_both`).

    Returns:
        The entry T_r^ε(A)_ij shown positive.

    Raises:
        ProofFailure: when an entry is not provably positive.
    """
    return steps_keep_positive_both(eps, entries)[0]
