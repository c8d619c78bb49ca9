"""Doubly stochastic matrices with explicit sympy entries: the set mHC projects H_res onto.

A matrix H ∈ R^{n×n} is doubly stochastic when ``H 1 = 1``, ``1ᵀ H = 1ᵀ`` and ``H ≥ 0``
(mHC arXiv:2512.24880 §4.1 Eq. 6). A :class:`GenericDS` holds an n×n matrix of nonnegative
symbols together with the solution of its 2n − 1 independent linear constraints: proofs check
equalities *on the constraint set* (substitute the solution, expand to zero) and nonnegativity
*from the symbols' assumptions* (every entry of a product or convex combination is a polynomial
with nonnegative coefficients in nonnegative symbols).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from hcspec.spec.checks import require_size, symbol_matrix
from hcspec.spec.registry import ProofFailure


@dataclass(frozen=True)
class GenericDS:
    """A generic n×n doubly stochastic matrix.

    Attributes:
        matrix: n×n matrix of nonnegative real symbols.
        solution: the dependent entries (last row and column) solved from the row- and column-sum
            constraints, as ``{symbol: expression in the free entries}``.
    """

    matrix: sympy.Matrix
    solution: dict[sympy.Symbol, Any]

    @property
    def n(self) -> int:
        """The size n."""
        return int(self.matrix.shape[0])

    def on_constraints(self, expr: Any) -> Any:
        """``expr`` with the dependent entries substituted (valid on the doubly stochastic set)."""
        return expr.xreplace(self.solution)


def generic(name: str, n: int, *, rows: bool = True, cols: bool = True) -> GenericDS:
    """A generic n×n matrix of nonnegative symbols with unit row sums (``rows``) and/or unit
    column sums (``cols``); both (the default) make it doubly stochastic.

    Raises:
        ValueError: if n < 1 or neither constraint is asked for.
    """
    require_size("n", n)
    if not (rows or cols):
        raise ValueError("expected at least one of rows=True, cols=True")
    H = symbol_matrix(name, n, n, nonnegative=True)
    constraints: list[Any] = []
    dependent: list[Any] = []
    if rows:
        constraints += list(row_sums(H) - sympy.ones(n, 1))
        dependent += [H[i, n - 1] for i in range(n)]
    if cols:
        constraints += list(col_sums(H) - sympy.ones(1, n))
        dependent += [H[n - 1, j] for j in range(n - (1 if rows else 0))]
    solutions = sympy.solve(constraints, dependent, dict=True)
    if len(solutions) != 1:
        raise ProofFailure(f"constraints of a generic {n}×{n} matrix: {solutions}")
    return GenericDS(H, solutions[0])


def random_doubly_stochastic(n: int, rng: random.Random) -> sympy.Matrix:
    """A random n×n doubly stochastic matrix with Float entries: a random convex combination of
    random permutation matrices (Birkhoff–von Neumann)."""
    perms = permutation_matrices(n)
    picks = [rng.choice(perms) for _ in range(3)]
    weights = [rng.uniform(0.1, 1.0) for _ in picks]
    total = sum(weights)
    return sum((sympy.Float(w / total, 20) * P for w, P in zip(weights, picks, strict=True)),
               sympy.zeros(n, n))


def row_sums(H: sympy.Matrix) -> sympy.Matrix:
    """H 1 (n×1)."""
    return H * sympy.ones(H.shape[1], 1)


def col_sums(H: sympy.Matrix) -> sympy.Matrix:
    """1ᵀ H (1×n)."""
    return sympy.ones(1, H.shape[0]) * H


def require_doubly_stochastic(
    label: str,
    H: sympy.Matrix,
    *on: GenericDS,
    substitutions: Mapping[sympy.Symbol, Any] | None = None,
) -> None:
    """Require ``H`` to be doubly stochastic.

    Numeric gate first: the generic matrices ``on`` are replaced by random doubly stochastic
    matrices (other symbols drawn from [0, 1], then ``substitutions`` applied) and ``H`` must have
    unit row/column sums and no negative entry there. Then exactly: every entry nonnegative from the
    symbols' assumptions, and unit row and column sums after substituting the constraint solutions
    of ``on`` and ``substitutions`` (e.g. μ = 1 − λ for a convex combination).

    Raises:
        ValueError: if ``H`` is not square.
        ProofFailure: naming ``label`` and the first violated condition.
    """
    n, cols = H.shape
    if n != cols:
        raise ValueError(f"{label}: expected a square matrix, got shape {H.shape}")
    extra = dict(substitutions or {})
    _gate(label, H, on, extra)
    for (i, j), entry in zip(itertools.product(range(n), range(n)), H, strict=True):
        if sympy.expand(entry).is_nonnegative is not True:
            raise ProofFailure(f"{label}: entry ({i},{j}) = {entry} is not provably >= 0")
    for name, sums, target in (("row", row_sums(H), sympy.ones(n, 1)),
                               ("column", col_sums(H), sympy.ones(1, n))):
        residual = (sums - target).xreplace(extra)
        for generic_ds in on:
            residual = generic_ds.on_constraints(residual)
        if any(sympy.expand(r) != 0 for r in residual):
            raise ProofFailure(f"{label}: {name} sums are not 1: {list(sums)}")


def _gate(label: str, H: sympy.Matrix, on: tuple[GenericDS, ...],
          extra: dict[sympy.Symbol, Any]) -> None:
    rng = random.Random(0)
    for _ in range(2):
        values: dict[Any, Any] = {}
        for generic_ds in on:
            sample = random_doubly_stochastic(generic_ds.n, rng)
            values.update(zip(generic_ds.matrix, sample, strict=True))
        numeric = H.xreplace(values).xreplace(extra)
        rest = sorted(numeric.free_symbols, key=str)
        numeric = numeric.xreplace({s: sympy.Float(rng.uniform(0, 1), 20) for s in rest})
        numeric = numeric.evalf(20)
        n = H.shape[0]
        sums = [*(row_sums(numeric) - sympy.ones(n, 1)), *(col_sums(numeric) - sympy.ones(1, n))]
        if any(abs(complex(v)) > 1e-12 for v in sums) or any(
            complex(v).real < -1e-12 for v in numeric
        ):
            raise ProofFailure(f"{label}: numeric gate failed: {numeric.tolist()} is not doubly "
                               "stochastic at a random doubly stochastic point")


def permutation_matrices(n: int) -> list[sympy.Matrix]:
    """All n! permutation matrices of size n, in lexicographic order of the permutation.

    Raises:
        ValueError: if n < 1.
    """
    require_size("n", n)
    return [
        sympy.Matrix(n, n, lambda i, j, p=perm: 1 if p[i] == j else 0)
        for perm in itertools.permutations(range(n))
    ]


def sinkhorn_knopp(logits: sympy.Matrix, iterations: int) -> sympy.Matrix:
    """Sinkhorn–Knopp as mHC Eq. 9 writes it: M⁰ = exp(logits), then ``iterations`` rounds of
    column normalisation followed by row normalisation (exact sympy arithmetic).

    Raises:
        ValueError: if ``logits`` is not square or ``iterations`` < 1.
    """
    n, cols = logits.shape
    if n != cols:
        raise ValueError(f"expected square logits, got shape {logits.shape}")
    require_size("iterations", iterations)
    M = logits.applyfunc(sympy.exp)
    for _ in range(iterations):
        M = normalise_rows(normalise_columns(M))
    return M


def normalise_rows(M: sympy.Matrix) -> sympy.Matrix:
    """T_r(M): divide each row by its sum (mHC Eq. 9)."""
    row = row_sums(M)
    return sympy.Matrix(M.shape[0], M.shape[1], lambda i, j: M[i, j] / row[i, 0])


def normalise_columns(M: sympy.Matrix) -> sympy.Matrix:
    """T_c(M): divide each column by its sum (mHC Eq. 9)."""
    column = col_sums(M)
    return sympy.Matrix(M.shape[0], M.shape[1], lambda i, j: M[i, j] / column[0, j])


def rewrite(expr: Any, lhs: Sequence[Any], rhs: Any) -> Any:
    """``expr`` (a matrix expression) with every product containing the factors ``lhs`` in a row
    replaced by ``rhs`` — one use of a constraint such as ``H 1 = 1`` (lhs ``[H, 1]``, rhs ``1``).
    The expression is expanded first; both it and its transpose are searched, so ``1ᵀ Hᵀ`` is
    rewritten by ``H 1 = 1`` too."""
    pattern = list(lhs)

    def visit(product: Any) -> Any:
        args = list(product.args)
        changed = True
        while changed:
            changed = False
            for i in range(len(args) - len(pattern) + 1):
                if args[i:i + len(pattern)] == pattern:
                    args[i:i + len(pattern)] = [rhs]
                    changed = True
                    break
        return sympy.MatMul(*args).doit() if len(args) > 1 else args[0]

    def once(e: Any) -> Any:
        return sympy.expand(e.doit()).replace(lambda m: isinstance(m, sympy.MatMul), visit)

    return once(once(expr).T.doit()).T.doit()
