"""Finite sums with a symbolic number of terms: the few rewriting steps the spec's index-form
proofs use (``Σ_{j=0}^{n-1}`` with ``n`` a symbol, summands built from ``IndexedBase`` entries).

sympy does not split or reorder such sums by itself; these helpers do exactly the textbook steps
and nothing else, so a proof that uses them stays a chain of checkable rewrites:

- :func:`split_sums`: linearity, ``Σ (a + b) = Σ a + Σ b`` and ``Σ c·a = c Σ a`` (c free of the
  index);
- :func:`swap_sum`: Fubini for finite sums, ``Σ_i Σ_j a_ij = Σ_j Σ_i a_ij``.
"""

from __future__ import annotations

from typing import Any

import sympy
from sympy.simplify.simplify import factor_sum


def split_sums(expr: Any) -> Any:
    """``expr`` with every ``Sum`` replaced by the sum of its expanded terms, each with the
    factors free of the summation index pulled out (linearity of a finite sum)."""

    def split(total: sympy.Sum) -> Any:
        summand = sympy.expand(total.function)
        terms = summand.args if summand.is_Add else (summand,)
        return sympy.Add(*(factor_sum(sympy.Sum(term, *total.limits)) for term in terms))

    return sympy.expand(expr.replace(lambda e: isinstance(e, sympy.Sum), split))


def swap_sum(total: sympy.Sum) -> sympy.Sum:
    """``Σ_i Σ_j a`` written as ``Σ_j Σ_i a`` (finite sums with constant limits commute).

    Raises:
        ValueError: unless ``total`` has exactly two limits whose bounds do not involve the other
            index.
    """
    if len(total.limits) != 2:
        raise ValueError(f"expected a double sum, got {total}")
    (i, *bounds_i), (j, *bounds_j) = total.limits
    if any(i in sympy.sympify(b).free_symbols for b in bounds_j) or any(
            j in sympy.sympify(b).free_symbols for b in bounds_i):
        raise ValueError(f"the limits of {total} depend on each other")
    return sympy.Sum(total.function, (j, *bounds_j), (i, *bounds_i))

