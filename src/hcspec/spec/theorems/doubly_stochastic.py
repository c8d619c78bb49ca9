"""Facts about doubly stochastic H_res (the mHC manifold) and mHC at n = 1.

Theorems: ``ds.transpose_closure``, ``ds.product_closure``, ``ds.convex_closure``,
``ds.n1_unique``, ``ds.two_by_two_family``, ``ds.permutation_vertices``, ``ds.nonexpansive``,
``ds.stream_sum_preserved``, ``ds.gradient_stream_sum_preserved``, ``mhc.n1_residual``,
``mhc.sinkhorn_rows_exact``.
Sources: mHC arXiv:2512.24880 §4.1 Eq. 6 (the manifold and its three properties: non-expansive,
compositional closure, Birkhoff polytope) and §4.2 Eq. 7–9 (parameterisation, Sinkhorn–Knopp).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import sympy

from hcspec.spec import doubly_stochastic as ds
from hcspec.spec import formulas, norms
from hcspec.spec import sinkhorn_index as si
from hcspec.spec.checks import (
    chain,
    instantiate,
    require_equal,
    require_nonnegative,
    require_relation,
    require_true,
    require_zero,
    symbol_matrix,
    symbol_vector,
)
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import Given, assume, granted, hypothesis, prose, statement
from hcspec.spec.sums import split_sums, swap_sum
from hcspec.spec.theorems.backprop import generic_map

SIZES_N = (1, 2, 3, 4)
LAMBDA = sympy.Symbol("lambda", nonnegative=True)
MU = sympy.Symbol("mu", nonnegative=True)
"""Convex weights; μ = 1 − λ is substituted for the equality constraints."""

Combine = Callable[[sympy.Matrix, sympy.Matrix], sympy.Matrix]

DS_H = ("H ∈ R^{n×n} doubly stochastic (mHC Eq. 6): H 1 = 1, 1ᵀ H = 1ᵀ, H ≥ 0; entries are "
        "nonnegative symbols, the last row and column solved from the sum constraints.")
DS_K = "K ∈ R^{n×n} doubly stochastic too: K 1 = 1, 1ᵀ K = 1ᵀ, K ≥ 0 (entries likewise)."
DS_ASSUMPTIONS = (DS_H, DS_K)
"""H and K doubly stochastic, one line each, so a theorem about H alone declares only the first
(an assumption no step uses fails prove)."""


def closure_proof(label: str, combine: Combine, sizes: Sequence[int] = SIZES_N
                  ) -> Callable[[], list[Step]]:
    """A proof that ``combine(H, K)`` is doubly stochastic for generic doubly stochastic H, K.

    Tests pass a wrong ``combine`` (e.g. multiplying by a matrix with a negative entry) to see
    the prover fail.
    """

    def prove() -> list[Step]:
        steps: list[Step] = []
        for n in sizes:
            H, K = ds.generic("H", n), ds.generic("K", n)
            M = combine(H.matrix, K.matrix)
            ds.require_doubly_stochastic(f"{label}, n={n}", M, H, K, substitutions={MU: 1 - LAMBDA})
            if n == 2 or len(sizes) == 1:
                sums = sympy.Matrix.hstack(ds.row_sums(M), ds.col_sums(M).T)
                used = M.free_symbols
                facts = [assume("H 1 = 1, 1ᵀ H = 1ᵀ", replace=H.solution)]
                if not used.isdisjoint(K.matrix.free_symbols):
                    facts.append(assume("K 1 = 1, 1ᵀ K = 1ᵀ", replace=K.solution))
                if MU in used:
                    facts.append(assume("μ = 1 − λ", replace={MU: 1 - LAMBDA}))
                steps.append(prose(
                    f"{label}, n = {n}: every entry of M is a polynomial with nonnegative "
                    "coefficients in nonnegative symbols, so M ≥ 0 (checked exactly)"))
                steps.append((f"{label}, n = {n}: [M 1 | (1ᵀ M)ᵀ] on the constraint set",
                              chain(sums, sympy.ones(n, 2), using=facts)))
        return steps

    return prove


N = sympy.Symbol("n", integer=True, positive=True)
ONE = sympy.MatrixSymbol(r"\mathbf{1}", N, 1)
H_SYM, K_SYM = sympy.MatrixSymbol("H", N, N), sympy.MatrixSymbol("K", N, N)
_I, _J, _K = sympy.symbols("i j k", integer=True, nonnegative=True)
_H_ENTRY = sympy.IndexedBase("H", nonnegative=True)
_K_ENTRY = sympy.IndexedBase("K", nonnegative=True)

Entry = Callable[[sympy.IndexedBase, sympy.IndexedBase], sympy.Expr]


def constraint_facts(expr: Any) -> list[Given]:
    """The declared constraints :func:`use_constraints` applies, as chain facts (μ = 1 − λ only
    where ``expr`` has μ)."""
    facts = [assume("H 1 = 1", factors=(H_SYM, ONE), rhs=ONE),
             assume("1ᵀ H = 1ᵀ", factors=(ONE.T, H_SYM), rhs=ONE.T)]
    if expr.has(K_SYM):
        facts += [assume("K 1 = 1", factors=(K_SYM, ONE), rhs=ONE),
                  assume("1ᵀ K = 1ᵀ", factors=(ONE.T, K_SYM), rhs=ONE.T)]
    if expr.has(MU):
        facts.append(assume("μ = 1 − λ", replace={MU: 1 - LAMBDA}))
    return facts


def use_constraints(expr: Any) -> Any:
    """Apply H 1 = 1, 1ᵀ H = 1ᵀ, K 1 = 1, 1ᵀ K = 1ᵀ until nothing changes, then μ = 1 − λ."""
    for _ in range(4):
        for M in (H_SYM, K_SYM):
            expr = ds.rewrite(expr, [M, ONE], ONE)
            expr = ds.rewrite(expr, [ONE.T, M], ONE.T)
    return sympy.expand(expr.xreplace({MU: 1 - LAMBDA}))


def symbolic_closure(label: str, combine: Combine, entry: Entry) -> Callable[[], list[Step]]:
    """A proof, for symbolic n, that ``combine(H, K)`` is doubly stochastic: its row and column
    sums reduce to 1 using only the constraints on H and K (rewriting), and its entry ``entry``
    (a sum or product of nonnegative terms) is nonnegative from the assumptions."""

    def prove() -> list[Step]:
        M = combine(H_SYM, K_SYM)
        steps: list[Step] = []
        for name, product, target in (("row sums", M * ONE, ONE),
                                      ("column sums", ONE.T * M, ONE.T)):
            reduced = use_constraints(product)
            require_equal(f"{label}: {name}, symbolic n", reduced, target)
            steps.append((f"{label}, every n: {name} reduce to 1 using the constraints",
                          chain(product, sympy.expand(product.doit()), reduced,
                                using=constraint_facts(product))))
        value = entry(_H_ENTRY, _K_ENTRY)
        explicit = combine(sympy.Matrix(2, 2, lambda a, b: _H_ENTRY[a, b]),
                           sympy.Matrix(2, 2, lambda a, b: _K_ENTRY[a, b]))
        require_equal(f"{label}: the entry shown is entry (0, 1) of the combination, n = 2",
                      value.xreplace({N: 2}).xreplace({_I: 0, _J: 1}).doit(), explicit[0, 1])
        if value.is_nonnegative is not True:
            raise ProofFailure(f"{label}: entry {value} is not provably nonnegative")
        steps.append(require_true(f"{label}, every n: entry (i, j) is a sum or product of "
                                  "nonnegative terms", value.is_nonnegative is True,
                                  sympy.GreaterThan(value, 0, evaluate=False)))
        return steps

    return prove


def _both(*proofs: Callable[[], list[Step]]) -> Callable[[], list[Step]]:
    def prove() -> list[Step]:
        return [step for proof in proofs for step in proof()]

    return prove


theorem(
    "ds.transpose_closure",
    "If H is doubly stochastic, so is Hᵀ.",
    assumptions=(DS_H,),
    cases="symbolic n (rewriting with the constraints; entries from nonnegative Indexed "
          "symbols); examples with explicit entries at n in {1,2,3}",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.1 Eq. 6",
)(_both(symbolic_closure("Hᵀ", lambda H, K: H.T, lambda h, k: h[_J, _I]),
        closure_proof("Hᵀ", lambda H, K: H.T, sizes=(1, 2, 3))))

theorem(
    "ds.product_closure",
    "If H and K are doubly stochastic, so is H K (compositional closure).",
    assumptions=DS_ASSUMPTIONS,
    cases="symbolic n (rewriting with the constraints; entries from nonnegative Indexed "
          "symbols); examples with explicit entries at n in {1,2,3}",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.1 (compositional closure), Eq. 4 (products over depth)",
)(_both(symbolic_closure("H K", lambda H, K: H * K,
                         lambda h, k: sympy.Sum(h[_I, _K] * k[_K, _J], (_K, 0, N - 1))),
        closure_proof("H K", lambda H, K: H * K, sizes=(1, 2, 3))))

theorem(
    "ds.convex_closure",
    "If H and K are doubly stochastic and 0 ≤ λ ≤ 1, then λ H + (1 − λ) K is doubly stochastic.",
    assumptions=(*DS_ASSUMPTIONS, "λ, μ ≥ 0 with μ = 1 − λ."),
    cases="symbolic n (rewriting with the constraints; entries from nonnegative Indexed "
          "symbols); examples with explicit entries at n in {1,2,3}",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.1 (Birkhoff polytope: convex set)",
)(_both(symbolic_closure("λ H + (1 − λ) K", lambda H, K: LAMBDA * H + MU * K,
                         lambda h, k: LAMBDA * h[_I, _J] + MU * k[_I, _J]),
        closure_proof("λ H + (1 − λ) K", lambda H, K: LAMBDA * H + MU * K, sizes=(1, 2, 3))))


@theorem(
    "ds.n1_unique",
    "The only 1×1 doubly stochastic matrix is [1].",
    assumptions=(),
    setting=("H = [h] doubly stochastic: h ≥ 0, row sum h = 1, column sum h = 1.",),
    cases="n = 1",
    generality="instance",
    source="mHC arXiv:2512.24880 §4.1 (\"when n = 1 the doubly stochastic condition degenerates "
           "to the scalar 1\")",
)
def _ds_n1_unique() -> list[Step]:
    h = sympy.Symbol("h", nonnegative=True)
    solutions = sympy.solve([h - 1, h - 1], [h], dict=True)
    if solutions != [{h: 1}]:
        raise ProofFailure(f"expected the unique solution h = 1, got {solutions}")
    ds.require_doubly_stochastic("[1]", sympy.Matrix([[1]]))
    found = sympy.Symbol(r"\{h \ge 0 : h = 1,\ h = 1\}")
    return [require_true("solve the row and column constraints: the unique solution",
                         len(solutions) == 1,
                         sympy.Eq(found, sympy.FiniteSet(1), evaluate=False),
                         where={found: sympy.FiniteSet(*(s[h] for s in solutions))}),
            prose("and [1] ≥ 0 has unit row and column sums, so [1] is doubly stochastic "
                  "(checked exactly)")]


@theorem(
    "ds.two_by_two_family",
    "Every 2×2 matrix with unit row and column sums is [[a, 1−a], [1−a, a]] = a I + (1−a) P; "
    "it is doubly stochastic iff 0 ≤ a ≤ 1.",
    assumptions=(),
    setting=("H a real 2×2 matrix, entries a, b, c, e; P the swap permutation.",),
    cases="n = 2",
    generality="instance",
    source="mHC arXiv:2512.24880 §4.1 Eq. 6 and the Birkhoff polytope",
)
def _ds_two_by_two() -> list[Step]:
    a, b, c, e = sympy.symbols("a b c e", real=True)
    H = sympy.Matrix([[a, b], [c, e]])
    constraints = list(ds.row_sums(H) - sympy.ones(2, 1)) + list(ds.col_sums(H) - sympy.ones(1, 2))
    solutions = sympy.solve(constraints, [b, c, e], dict=True)
    if len(solutions) != 1:
        raise ProofFailure(f"expected a one-parameter family, got {solutions}")
    family = H.xreplace(solutions[0])
    expected = sympy.Matrix([[a, 1 - a], [1 - a, a]])
    swap = sympy.Matrix([[0, 1], [1, 0]])
    condition = sympy.reduce_inequalities([entry >= 0 for entry in set(family)], a)
    interval = sympy.And(sympy.Le(0, a), sympy.Le(a, 1))
    return [
        require_equal("unit row and column sums leave one free entry a", family, expected),
        require_equal("Birkhoff form: a I + (1 − a) P", expected,
                      a * sympy.eye(2) + (1 - a) * swap),
        require_true("nonnegativity of every entry ⇔ 0 ≤ a ≤ 1 (reduce_inequalities)",
                     sympy.simplify(sympy.Equivalent(condition, interval)),
                     sympy.Equivalent(sympy.And(sympy.Ge(a, 0), sympy.Ge(1 - a, 0)), interval)),
    ]


def _permutation_vertices_every_n() -> list[Step]:
    """Index form, symbolic n: P_ij = δ_σ(i)j = δ_iτ(j) (τ = σ⁻¹) has row and column sums 1; if
    P = λA + (1 − λ)B with A, B doubly stochastic and 0 < λ < 1, A has the zero pattern of P,
    so A_ij = a_i δ_σ(i)j, whose row sums a_i must be 1: A = P (and B likewise).

    Raises:
        ProofFailure: when a sum does not reduce as claimed or a term is not provably ≥ 0.
    """
    n = sympy.Symbol("n", integer=True, positive=True)
    i, j = sympy.symbols("i j", integer=True, nonnegative=True)
    sigma = sympy.Function("sigma", integer=True, nonnegative=True)(i)
    tau = sympy.Function("tau", integer=True, nonnegative=True)(j)
    in_range = {sympy.Le(sigma, n - 1): True, sympy.Le(tau, n - 1): True}

    def reduce(total: sympy.Sum) -> sympy.Expr:
        return sympy.piecewise_fold(total.doit()).xreplace(in_range)

    row = sympy.Sum(sympy.KroneckerDelta(sigma, j), (j, 0, n - 1))
    column = sympy.Sum(sympy.KroneckerDelta(i, tau), (i, 0, n - 1))
    if reduce(row) != 1 or reduce(column) != 1:
        raise ProofFailure(f"P's row or column sum is not 1: {reduce(row)}, {reduce(column)}")
    lam = hypothesis("0 < λ < 1", "lambda", weaker={"real": True}, positive=True)
    mu = hypothesis("0 < λ < 1", "mu", weaker={"real": True}, positive=True)  # μ = 1 − λ > 0
    a_off, b_off = sympy.symbols("A_{ij} B_{ij}", **granted("A, B doubly stochastic",
                                                             weaker={"real": True},
                                                             nonnegative=True))
    for term in (lam * a_off, mu * b_off):
        if term.is_nonnegative is not True:
            raise ProofFailure(f"{term} is not provably nonnegative")
    a = sympy.IndexedBase("a", real=True)
    pinned = sympy.Sum(a[i] * sympy.KroneckerDelta(sigma, j), (j, 0, n - 1))
    if reduce(pinned) != a[i]:
        raise ProofFailure(f"the row sum of the pinned A is {reduce(pinned)}, not a_i")
    bijection = assume("σ a bijection of {0, …, n−1}", replace=in_range)
    row_sums = assume("A, B doubly stochastic", replace={a[i]: 1})  # row i of A sums to a_i
    return [
        ("every n: P_ij = δ_σ(i)j = δ_iτ(j) (τ = σ⁻¹) has unit row sums",
         chain(row, 1, using=[bijection])),
        ("and unit column sums (P ≥ 0: P is doubly stochastic)",
         chain(column, 1, using=[bijection])),
        require_relation("if P = λ A + (1 − λ) B with A, B doubly stochastic, 0 < λ < 1 "
                         "(μ = 1 − λ), "
                     "both terms of λ A_ij + μ B_ij are nonnegative, so where P_ij = 0 both "
                     "vanish: A_ij = B_ij = 0",
                     sympy.And(sympy.Ge(lam * a_off, 0, evaluate=False),
                               sympy.Ge(mu * b_off, 0, evaluate=False))),
        ("so A = (a_i δ_σ(i)j): row i of A sums to a_i",
         chain(pinned, a[i], using=[bijection])),
        ("A is doubly stochastic, so that row sum a_i is 1: A_ij = a_i δ_σ(i)j = δ_σ(i)j = "
         "P_ij, A = P (B likewise)",
         chain(r"A_{ij}", a[i] * sympy.KroneckerDelta(sigma, j), sympy.KroneckerDelta(sigma, j),
               using=[row_sums])),
    ]


@theorem(
    "ds.permutation_vertices",
    "Every permutation matrix is doubly stochastic and is a vertex of the doubly stochastic set: "
    "a doubly stochastic matrix with the zero pattern of P equals P, so P = λA + (1−λ)B with "
    "0 < λ < 1 forces A = B = P.",
    assumptions=("A, B doubly stochastic.", "0 < λ < 1.",
                 "P_ij = δ_σ(i)j with σ a bijection of {0, …, n−1} (τ = σ⁻¹)."),
    cases="symbolic n in index form (P_ij = δ_σ(i)j); examples: all n! permutations for n in "
          "{1,2,3,4}, the zero pattern solved",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.1 (Birkhoff polytope: convex hull of the permutations)",
)
def _ds_permutation_vertices() -> list[Step]:
    steps: list[Step] = _permutation_vertices_every_n()
    shown: Step | None = None
    for n in SIZES_N:
        for P in ds.permutation_matrices(n):
            ds.require_doubly_stochastic(f"permutation {P.tolist()}", P)
            A = symbol_matrix("A", n, n, nonnegative=True)
            support = {A[i, j]: 0 for i, j in itertools.product(range(n), range(n))
                       if P[i, j] == 0}
            pinned = A.xreplace(support)
            unknowns = sorted(pinned.free_symbols, key=str)
            equations = list(ds.row_sums(pinned) - sympy.ones(n, 1)) + list(
                ds.col_sums(pinned) - sympy.ones(1, n))
            solutions = sympy.solve(equations, unknowns, dict=True)
            if len(solutions) != 1 or pinned.xreplace(solutions[0]) != P:
                raise ProofFailure(f"P = {P.tolist()} is not the only doubly stochastic matrix "
                                   f"with its zero pattern: {solutions}")
            if n == 3 and ds.permutation_matrices(3)[3] == P:
                name = sympy.Symbol("A")
                shown = require_relation(
                    "example, n = 3: a doubly stochastic A with A_ij = 0 wherever P_ij = 0 "
                    "(forced by λ A_ij + (1 − λ) B_ij = 0 with A, B ≥ 0) solves to A = P",
                    sympy.Eq(name, P, evaluate=False),
                    where={name: pinned.xreplace(solutions[0])})
    assert shown is not None
    checked = sum(len(ds.permutation_matrices(n)) for n in SIZES_N)
    steps += [shown, prose(f"examples: all {checked} permutation matrices of sizes "
                           f"{', '.join(map(str, SIZES_N))} checked the same way")]
    return steps


def sum_of_squares(H: sympy.Matrix, x: sympy.Matrix) -> sympy.Expr:
    """Σ_i Σ_{j<k} H_ij H_ik (x_j − x_k)²: ‖x‖² − ‖Hx‖² for doubly stochastic H."""
    n = H.shape[0]
    return sum((H[i, j] * H[i, k] * (x[j] - x[k]) ** 2
                for i in range(n) for j, k in itertools.combinations(range(n), 2)),
               sympy.Integer(0))


_ROW, _COL = sympy.symbols("i j", integer=True, nonnegative=True)
_H_IDX = sympy.IndexedBase("H", nonnegative=True)
_X_IDX = sympy.IndexedBase("x", real=True)


def _sum_over(index: sympy.Symbol, summand: Any) -> sympy.Sum:
    return sympy.Sum(summand, (index, 0, N - 1))


def jensen_gap_every_n() -> list[Step]:
    """For symbolic n, index form: ‖x‖² − ‖Hx‖² = Σ_i Σ_j H_ij (x_j − (Hx)_i)² when H has unit
    row and column sums, and every term is ≥ 0 when H ≥ 0.

    Step 1 (one row i, the Jensen gap): with m = (Hx)_i = Σ_j H_ij x_j and Σ_j H_ij = 1,
    Σ_j H_ij (x_j − m)² = Σ_j H_ij x_j² − m². Step 2 (all rows, column sums):
    Σ_i Σ_j H_ij x_j² = Σ_j x_j² Σ_i H_ij = Σ_j x_j² = ‖x‖². Subtracting Σ_i m_i² = ‖Hx‖² gives
    the identity."""
    i, j = _ROW, _COL
    H, x = _H_IDX, _X_IDX
    m = sympy.Symbol("m_i", real=True)
    row_gap = _sum_over(j, H[i, j] * (x[j] - m) ** 2)
    expanded = split_sums(row_gap)
    constraints = {_sum_over(j, H[i, j]): 1, _sum_over(j, H[i, j] * x[j]): m}
    reduced = sympy.expand(expanded.xreplace(constraints))
    row_target = _sum_over(j, H[i, j] * x[j] ** 2) - m ** 2
    if sympy.expand(reduced - row_target) != 0:
        raise ProofFailure(f"row gap: expected Σ_j H_ij x_j² − m², got {reduced}")
    double = sympy.Sum(H[i, j] * x[j] ** 2, (j, 0, N - 1), (i, 0, N - 1))
    swapped = swap_sum(double)
    (inner_index, *inner_bounds), outer = swapped.limits
    inner = split_sums(sympy.Sum(swapped.function, (inner_index, *inner_bounds)))
    column = sympy.expand(inner.xreplace({_sum_over(i, H[i, j]): 1}))
    if column != x[j] ** 2:
        raise ProofFailure(f"column step: expected x_j², got {column}")
    term = H[i, j] * (x[j] - m) ** 2
    if term.is_nonnegative is not True:
        raise ProofFailure(f"the term {term} is not provably nonnegative")
    rows = assume("H 1 = 1", replace={_sum_over(j, H[i, j]): 1})
    mean = assume("m_i = (Hx)_i = Σ_j H_ij x_j", replace={_sum_over(j, H[i, j] * x[j]): m})
    # step 3, all rows: m_i indexed by the row, the sums nested (outer i, inner j)
    m_row = sympy.IndexedBase("m", real=True)
    means = assume("m_i = (Hx)_i = Σ_j H_ij x_j",
                   replace={_sum_over(j, H[i, j] * x[j]): m_row[i]})
    total = _sum_over(i, _sum_over(j, H[i, j] * (x[j] - m_row[i]) ** 2))
    split = _sum_over(i, _sum_over(j, H[i, j] * x[j] ** 2)
                      - 2 * m_row[i] * _sum_over(j, H[i, j] * x[j])
                      + m_row[i] ** 2 * _sum_over(j, H[i, j]))
    per_row = _sum_over(i, _sum_over(j, H[i, j] * x[j] ** 2) - m_row[i] ** 2)
    mid = _sum_over(i, _sum_over(j, H[i, j] * x[j] ** 2)) - _sum_over(i, m_row[i] ** 2)
    end = _sum_over(j, x[j] ** 2) - _sum_over(i, m_row[i] ** 2)
    return [
        ("every n, one row i (Jensen gap): expand, then use Σ_j H_ij = 1 and the notation m_i",
         chain(row_gap, expanded, reduced, using=[rows, mean])),
        ("every n, all rows: swap the finite sums, then Σ_i H_ij = 1 (unit column sums)",
         chain(double, swapped, sympy.Sum(inner, outer), sympy.Sum(column, outer),
               using=[assume("1ᵀ H = 1ᵀ", replace={_sum_over(i, H[i, j]): 1})])),
        statement(("every n: summing step 1 over i and using step 2, Σ_i Σ_j H_ij (x_j − m_i)² "
                   "= ‖x‖² − ‖Hx‖² (Σ_j x_j² = ‖x‖², Σ_i m_i² = ‖Hx‖²)",
         chain(total, mid, end, via=(split, per_row),
               using=[rows, means, Given("Σ_i Σ_j H_ij x_j² = Σ_j x_j² (step 2)",
                                         ((double, _sum_over(j, x[j] ** 2)),))]))),
        require_true("each term H_ij (x_j − m_i)² is a nonnegative entry times a square",
                     term.is_nonnegative is True, sympy.GreaterThan(term, 0, evaluate=False)),
    ]


@theorem(
    "ds.nonexpansive",
    "‖H x‖₂ ≤ ‖x‖₂ for doubly stochastic H: ‖x‖² − ‖Hx‖² = Σ_i Σ_j H_ij (x_j − (Hx)_i)² ≥ 0 "
    "(Jensen per row, then the unit column sums).",
    assumptions=(DS_H, "x ∈ R^n real; notation m_i = (Hx)_i = Σ_j H_ij x_j."),
    cases="symbolic n (index form: finite sums Σ_{j<n}, split and swapped); examples: the "
          "pairwise sum of squares Σ_i Σ_{j<k} H_ij H_ik (x_j − x_k)² at explicit n in {1,2,3,4}",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.1 (\"the spectral norm … is bounded by 1\", non-expansive)",
)
def _ds_nonexpansive() -> list[Step]:
    steps: list[Step] = jensen_gap_every_n()
    for n in SIZES_N:
        H = ds.generic("H", n)
        x = symbol_vector("x", n)
        sos = sum_of_squares(H.matrix, x)
        gap = (x.T * x)[0, 0] - ((H.matrix * x).T * (H.matrix * x))[0, 0]
        require_zero(f"‖x‖² − ‖Hx‖² − SOS on the constraint set, n={n}",
                     H.on_constraints(gap - sos))
        require_nonnegative(f"SOS terms, n={n}", sos.args if sos.is_Add else [sos])
        if n == 2:
            name = sympy.Symbol(r"\|x\|^{2} - \|Hx\|^{2}")
            steps.append((
                "example, n = 2: ‖x‖² − ‖Hx‖² as a pairwise sum of nonnegative terms on the "
                "constraint set", chain(name, gap, sos, using=[
                    assume("H 1 = 1, 1ᵀ H = 1ᵀ", replace=H.solution)])))
    steps.append(prose("hence ‖H x‖₂ ≤ ‖x‖₂ (both sides are nonnegative: take square roots)"))
    return steps


@theorem(
    "ds.stream_sum_preserved",
    "1ᵀ H X = 1ᵀ X for doubly stochastic H (only 1ᵀH = 1ᵀ is used), so the reduced state of an "
    "mHC sublayer evolves like a residual: 1ᵀ X' = 1ᵀ X + (1ᵀ h_post) zᵀ.",
    assumptions=("H ≥ 0 with unit column sums, 1ᵀ H = 1ᵀ (a doubly stochastic H has them); "
                 "X ∈ R^{n×d}.",),
    cases="symbolic n, d (rewriting with 1ᵀ H = 1ᵀ); examples with explicit entries at n in "
          "{1,2,3} × d in {1,2}",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.1 Eq. 6 (\"preserve the global mean\"), Eq. 3–4",
)
def _ds_stream_sum() -> list[Step]:
    D = sympy.Symbol("d", integer=True, positive=True)
    X, h_post, z = (sympy.MatrixSymbol("X", N, D), sympy.MatrixSymbol("h_post", N, 1),
                    sympy.MatrixSymbol("z", D, 1))
    new_sum = ONE.T * (H_SYM * X + h_post * z.T)
    reduced = ds.rewrite(new_sum, [ONE.T, H_SYM], ONE.T)
    require_equal("1ᵀ X' with 1ᵀ H = 1ᵀ, symbolic n, d", reduced, ONE.T * X + ONE.T * h_post * z.T)
    steps: list[Step] = [("every n, d: expand 1ᵀ X' and use 1ᵀ H_res = 1ᵀ (unit column sums)",
                          chain(new_sum, sympy.expand(new_sum.doit()), reduced, using=[
                              assume("1ᵀ H = 1ᵀ", factors=(ONE.T, H_SYM), rhs=ONE.T)]))]
    for n in (1, 2, 3):
        H = ds.generic("H", n, rows=False)
        for d in (1, 2):
            X, z, h_post = symbol_matrix("X", n, d), symbol_vector("z", d), symbol_vector("q", n)
            one = sympy.ones(1, n)
            require_zero(f"1ᵀ H X − 1ᵀ X, n={n}, d={d}",
                         H.on_constraints(one * H.matrix * X - one * X))
            new_sum = one * (H.matrix * X + h_post * z.T)
            step = require_equal(f"1ᵀ X' = 1ᵀ X + (1ᵀ h_post) zᵀ, n={n}, d={d}",
                                 H.on_constraints(new_sum), one * X + (one * h_post) * z.T)
            if (n, d) == (2, 2):
                steps.append(("example, n = 2, d = 2: 1ᵀ H X with unit column sums",
                              chain(one * H.matrix * X, one * X,
                                    using=[assume("1ᵀ H = 1ᵀ", replace=H.solution)])))
                steps.append(step)
    return steps


def _gradient_only_if_every_n(G: sympy.MatrixSymbol, D: sympy.Symbol) -> list[Step]:
    """For symbolic n, d and any real H: 1ᵀHᵀG' − 1ᵀG' = vᵀG' with v = H 1 − 1; choosing
    G' = v eᵀ (eᵀe = 1) turns the residual times e into vᵀv = Σ_i v_i², which vanishes only when
    v = 0. So if the residual is 0 for every G', then H 1 = 1."""
    v = H_SYM * ONE - ONE
    residual = ONE.T * H_SYM.T * G - ONE.T * G
    factored = require_equal("only if: the residual is (H 1 − 1)ᵀ G', symbolic n, d", residual,
                             v.T * G)
    e = sympy.MatrixSymbol("e", D, 1)
    probed = v.T * (v * e.T) * e
    reduced = ds.rewrite(probed, [e.T, e], sympy.Identity(1))
    if not sympy.expand((reduced - v.T * v).doit()).is_ZeroMatrix:
        raise ProofFailure(f"only if: G' = v eᵀ should give vᵀv, got {reduced}")
    i = _ROW
    square = sympy.IndexedBase("v", real=True)[i] ** 2
    if square.is_nonnegative is not True:
        raise ProofFailure("v_i² is not provably nonnegative")
    unit = Given("eᵀe = 1 (e chosen so)", factors=(e.T, e), rhs=sympy.Identity(1))
    return [
        factored,
        ("only if, every n, d: take G' = v eᵀ with v = H 1 − 1 and eᵀe = 1; the residual times "
         "e is vᵀv", chain(probed, v.T * v, using=[unit])),
        prose("vᵀv = Σ_i v_i² is a sum of squares of reals (each term below is ≥ 0), so it "
              "vanishes only when every v_i does: v = 0, i.e. H 1 = 1"),
        require_true("each term of vᵀv is a square", square.is_nonnegative is True,
                     sympy.GreaterThan(square, 0, evaluate=False)),
    ]


@theorem(
    "ds.gradient_stream_sum_preserved",
    "The bypass gradient keeps the stream sum for every upstream G', 1ᵀ Hᵀ G' = 1ᵀ G', exactly "
    "when H 1 = 1 (row sums); unit column sums alone do not suffice.",
    assumptions=(
        "H ≥ 0 with unit row sums, H 1 = 1; G' ∈ R^{n×d} the upstream gradient.",
    ),
    setting=(
        "Counterexample: H = [[1, 1], [0, 0]] (unit column sums, row sums 2 and 0).",
    ),
    cases="if and only if: symbolic n, d (rewriting with H 1 = 1; for the converse the probe "
          "G' = (H 1 − 1) eᵀ); examples at n in {1,2,3} × d in {1,2} (if) and n in {2,3} (only "
          "if); counterexample at n = 2, d = 2",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.1 Eq. 6; the bypass term of backward.closed_form",
)
def _ds_gradient_stream_sum() -> list[Step]:
    D = sympy.Symbol("d", integer=True, positive=True)
    G_sym = sympy.MatrixSymbol("G'", N, D)
    bypass = ONE.T * H_SYM.T * G_sym
    reduced = ds.rewrite(bypass, [H_SYM, ONE], ONE)
    require_equal("1ᵀ Hᵀ G' with H 1 = 1, symbolic n, d", reduced, ONE.T * G_sym)
    steps: list[Step] = [("if, every n, d: 1ᵀ Hᵀ = (H 1)ᵀ = 1ᵀ", chain(
        bypass, reduced, using=[assume("H 1 = 1", factors=(H_SYM, ONE), rhs=ONE)]))]
    for n in (1, 2, 3):
        H = ds.generic("H", n, cols=False)
        for d in (1, 2):
            G = symbol_matrix("G", n, d)
            one = sympy.ones(1, n)
            require_equal(f"1ᵀ Hᵀ G' = 1ᵀ G', n={n}, d={d}",
                          H.on_constraints(one * H.matrix.T * G), one * G)
    steps += _gradient_only_if_every_n(G_sym, D)
    for n in (2, 3):  # only if, examples: the residual's coefficients are H 1 − 1
        H_any, G = symbol_matrix("H", n, n), symbol_matrix("G", n, 2)
        residual = sympy.ones(1, n) * H_any.T * G - sympy.ones(1, n) * G
        for j in range(2):
            poly = sympy.Poly(sympy.expand(residual[0, j]), *G[:, j])
            coefficients = sympy.Matrix([poly.coeff_monomial(G[i, j]) for i in range(n)])
            require_equal(f"only if: coefficient of G'_ij in the residual is (H 1 − 1)_i, n={n}",
                          coefficients, ds.row_sums(H_any) - sympy.ones(n, 1))
    column_only = sympy.Matrix([[1, 1], [0, 0]])
    G = symbol_matrix("G", 2, 2)
    residual = (sympy.ones(1, 2) * column_only.T * G - sympy.ones(1, 2) * G).applyfunc(
        sympy.expand)
    if residual == sympy.zeros(1, 2):
        raise ProofFailure("the column-stochastic counterexample preserved the gradient sum")
    steps.append(require_true(
        "unit column sums only, H = [[1, 1], [0, 0]]: the residual 1ᵀHᵀG' − 1ᵀG' is non-zero",
        residual != sympy.zeros(1, 2), sympy.Ne(residual, sympy.zeros(1, 2), evaluate=False)))
    return steps


@theorem(
    "mhc.n1_residual",
    "At n = 1 the only doubly stochastic H_res is [1] (Sinkhorn–Knopp returns [1] for any logit), "
    "and with H_post = 2σ(0) = 1 and any H_pre = σ(·) > 0, mHC is the pre-norm residual "
    "x + f(RMSNorm(x)).",
    assumptions=(
        "H_pre = c > 0 is absorbed by the scale invariance of RMSNorm (norm.jacobians).",
    ),
    setting=(
        "The branch is F = f∘RMSNorm (pre-norm inside, ε = 0), f arbitrary.",
    ),
    cases="n = 1; d in {2,3}; Sinkhorn–Knopp with t_max = 20",
    generality="instance",
    source="mHC arXiv:2512.24880 §4.1 (n = 1 degenerates to 1), Eq. 3, Eq. 8–9",
)
def _mhc_n1_residual() -> list[Step]:
    logit = sympy.Symbol("h", real=True)
    c = hypothesis("H_pre = c > 0", "c", weaker={"real": True}, positive=True)
    H_res = ds.sinkhorn_knopp(sympy.Matrix([[logit]]), 20)
    H_post = 2 / (1 + sympy.exp(-sympy.Integer(0)))
    steps: list[Step] = [
        require_equal("Sinkhorn–Knopp, n = 1, t_max = 20, any logit h", H_res, sympy.Matrix([[1]])),
        require_equal("H_post = 2σ(0)", H_post, sympy.Integer(1)),
    ]
    for d in (2, 3):
        x = symbol_vector("x", d)
        s = formulas.connection_symbols(1, d)
        x_in = instantiate(formulas.aggregate(s), {s.X: x.T, s.h_pre: sympy.Matrix([[c]])})
        z = generic_map("f", norms.rms_norm(x_in), d)
        new_state = instantiate(formulas.forward(s), {s.X: x.T, s.H_res: H_res,
                                                      s.h_post: sympy.Matrix([[H_post]]), s.z: z})
        step = require_equal(f"X'ᵀ = H_res x + H_post f(RMSNorm(H_pre x)) = x + f(RMSNorm(x)), "
                             f"d={d}", new_state.T, x + generic_map("f", norms.rms_norm(x), d))
        if d == 2:
            steps.append(step)
    return steps


@theorem(
    "mhc.sinkhorn_rows_exact",
    "After every Sinkhorn–Knopp round (column then row normalisation, mHC Eq. 9) the row sums are "
    "exactly 1 and every entry is positive; the column sums are 1 only in the limit.",
    assumptions=(
        "M⁰ = exp(logits) > 0 entrywise.",
    ),
    setting=(
        "Each round ends with a row normalisation.",
        "Lemma form: for any positive matrix A, T_c(A) > 0, T_r(A) > 0 and T_r(A) 1 = 1; by "
        "induction on the rounds this holds after every round.",
    ),
    cases="lemma for symbolic n in index form (every round by induction); examples: generic "
          "positive A, n in {1,2,3,4}; column sums not exact: n = 2, logits [[0, 1], [2, 0]], one "
          "round",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.2 Eq. 8–9",
)
def _sinkhorn_rows_exact() -> list[Step]:
    positive = granted("M⁰ = exp(logits) > 0 entrywise", positive=True)
    summed, split, value = si.rows_exact()
    rows_entry, columns_entry = si.steps_keep_positive_both(0, positive)
    steps: list[Step] = [
        ("every n: the factor 1/Σ_k A_ik does not depend on j, so row i of T_r(A) sums to 1",
         chain(summed, split, value)),
        require_relation("every n: a positive entry over a non-empty sum of positive entries is "
                     "positive: T_r keeps A > 0",
                     sympy.StrictGreaterThan(rows_entry, 0, evaluate=False)),
        require_relation("and T_c keeps A > 0",
                     sympy.StrictGreaterThan(columns_entry, 0, evaluate=False)),
        prose("so, by induction on the rounds from M⁰ = exp(H̃) > 0, every iterate is positive"),
    ]
    for n in SIZES_N:
        A = symbol_matrix("A", n, n, **positive)
        rows = ds.normalise_rows(A)
        step = require_equal(f"T_r(A) 1 = 1, n={n}", ds.row_sums(rows), sympy.ones(n, 1))
        for name, M in (("T_r(A)", rows), ("T_c(A)", ds.normalise_columns(A))):
            if not all(entry.is_positive for entry in M):
                raise ProofFailure(f"{name} has an entry not provably positive, n={n}")
        if n == 2:
            steps.append(("example, " + step[0], step[1]))
    logits = sympy.Matrix([[0, 1], [2, 0]])
    column_gap = ds.col_sums(ds.sinkhorn_knopp(logits, 1)) - sympy.ones(1, 2)
    value = column_gap[0, 0].evalf(30)
    if not abs(value) > sympy.Float("1e-3"):
        raise ProofFailure(f"expected a column-sum error after one round, got {value}")
    gap = sympy.Symbol(r"|(\mathbf{1}^T M^{(1)})_0 - 1|")
    steps.append(require_relation("one round on logits [[0, 1], [2, 0]]: the first column sum "
                              f"misses 1 by {float(value):.4f}",
                              sympy.StrictGreaterThan(gap, sympy.Float("1e-3"), evaluate=False),
                              where={gap: abs(value)}))
    return steps
