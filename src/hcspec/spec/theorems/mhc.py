"""mHC's bounded read/write weights, its Sinkhorn–Knopp iterates (the paper's and the
DeepSeek-V4 variant), and the permutation vertices of the doubly stochastic set.

Theorems: ``mhc.h_pre_range``, ``mhc.h_post_range``, ``mhc.sinkhorn_variants``,
``mhc.sinkhorn_converges``, ``ds.permutation_isometry``, ``ds.birkhoff_decompositions``.
Sources: mHC arXiv:2512.24880 §4.1 Eq. 6 (Birkhoff polytope), §4.2 Eq. 8–9.
"""

from __future__ import annotations

import itertools

import sympy

from hcspec.spec import doubly_stochastic as ds
from hcspec.spec import sinkhorn_index as si
from hcspec.spec.checks import (
    chain,
    require_equal,
    require_relation,
    require_true,
    symbol_matrix,
    symbol_vector,
)
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import assume, granted, hypothesis, prose

T = sympy.Symbol("t", real=True)
"""A pre-activation H̃ entry (any real number)."""

U = sympy.Symbol("u", positive=True)


def sigmoid(x: sympy.Expr) -> sympy.Expr:
    """σ(x) = 1 / (1 + e^{−x}) (mHC Eq. 8)."""
    return 1 / (1 + sympy.exp(-x))


def _range_steps(scale: int, name: str) -> list[Step]:
    """``scale``·σ(t) lies in (0, scale) for every real t, and every value there is attained
    (t is real only when the theorem declares it: a complex t has no sign)."""
    t = hypothesis("any real pre-activation", "t", real=True)
    gate = scale * sigmoid(t)
    gap = scale - gate
    if gate.is_positive is not True:
        raise ProofFailure(f"{name} = {gate} is not provably positive for real t")
    gap_form = scale * sympy.exp(-t) / (1 + sympy.exp(-t))
    steps = [
        require_true(f"{name} > 0: a positive numerator over 1 + e^(−t) > 1",
                     gate.is_positive, sympy.StrictGreaterThan(gate, 0)),
        (f"{scale} − {name} has the same form with e^(−t) on top",
         chain(sympy.Symbol(f"{scale} - {name}"), gap, gap_form)),
    ]
    require_equal(f"{scale} − {name} = {scale} e^(−t) / (1 + e^(−t))", gap, gap_form)
    if gap_form.is_positive is not True:
        raise ProofFailure(f"{scale} − {name} is not provably positive")
    steps.append(require_true(f"hence {name} < {scale}", gap_form.is_positive,
                              sympy.StrictLessThan(gate, scale)))
    entries = sympy.IndexedBase("t", **granted("any real pre-activation", real=True))
    size = sympy.Symbol("n", integer=True, positive=True)
    index = sympy.Symbol("i", integer=True, nonnegative=True)
    steps.append(require_relation(
        f"entrywise, so for every n: the n weights {scale}σ(t_i) sum to a positive number",
        sympy.StrictGreaterThan(sympy.Sum(scale * sigmoid(entries[index]), (index, 0, size - 1)),
                                0, evaluate=False)))
    attained = gate.subs(t, sympy.log(U))
    steps.append((f"every value in (0, {scale}) is attained: at t = log u (u > 0)",
                  chain(attained, scale * U / (1 + U))))
    require_equal(f"{name}(log u) = {scale} u / (1 + u)", attained, scale * U / (1 + U))
    return steps


@theorem(
    "mhc.h_pre_range",
    "H_pre = σ(H̃_pre) has every entry in the open interval (0, 1), and every value of (0, 1) is "
    "attained: the read weights are positive and below 1 (their sum lies in (0, n)).",
    assumptions=("H̃_pre ∈ R^{1×n} any real pre-activation (mHC Eq. 7).",),
    setting=("σ(t) = 1/(1 + e^(−t)) (mHC Eq. 8).",),
    cases="every real entry t (symbolic); entrywise, so every n",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.2 Eq. 8",
)
def _h_pre_range() -> list[Step]:
    return _range_steps(1, "σ(t)")


@theorem(
    "mhc.h_post_range",
    "H_post = 2σ(H̃_post) has every entry in the open interval (0, 2), every value of (0, 2) is "
    "attained, and 2σ(0) = 1 (a zero pre-activation writes back with weight 1).",
    assumptions=("H̃_post ∈ R^{1×n} any real pre-activation (mHC Eq. 7).",),
    setting=("σ(t) = 1/(1 + e^(−t)) (mHC Eq. 8).",),
    cases="every real entry t (symbolic); entrywise, so every n",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.2 Eq. 8",
)
def _h_post_range() -> list[Step]:
    steps = _range_steps(2, "2σ(t)")
    steps.append(require_equal("at t = 0 the weight is 1", 2 * sigmoid(sympy.Integer(0)),
                               sympy.Integer(1)))
    return steps


EPS = sympy.Symbol("epsilon", positive=True)


def normalise_rows_eps(M: sympy.Matrix, eps: sympy.Expr) -> sympy.Matrix:
    """The DeepSeek-V4 row step: divide each row by (its sum + ε)."""
    row = ds.row_sums(M)
    return sympy.Matrix(M.shape[0], M.shape[1], lambda i, j: M[i, j] / (row[i, 0] + eps))


def normalise_columns_eps(M: sympy.Matrix, eps: sympy.Expr) -> sympy.Matrix:
    """The DeepSeek-V4 column step: divide each column by (its sum + ε)."""
    column = ds.col_sums(M)
    return sympy.Matrix(M.shape[0], M.shape[1], lambda i, j: M[i, j] / (column[0, j] + eps))


def softmax_rows(logits: sympy.Matrix) -> sympy.Matrix:
    """Row-wise softmax: exp(logits) with each row divided by its sum."""
    return ds.normalise_rows(logits.applyfunc(sympy.exp))


def _variants_every_n(eps: sympy.Symbol, positive: dict[str, bool]) -> list[Step]:
    """The paper's and the DeepSeek-V4 steps in index form, symbolic n (:mod:`sinkhorn_index`):
    rows of T_r(A) sum to 1, rows of T_r^ε(A) to r/(r + ε) < 1, both keep A > 0, the variant's
    round at ε = 0 is the paper's, and softmax_rows(H̃) = T_r(exp H̃) has unit row sums
    (``eps``: the proof's ε; ``positive``: the sympy assumptions of A's entries).

    Raises:
        ProofFailure: when a step does not reduce as claimed.
    """
    paper_sum, paper_split, paper_value = si.rows_exact()
    variant_sum, variant_value, gap = si.variant_rows(eps)
    rows_entry, columns_entry = si.steps_keep_positive_both(eps, positive)
    A = si.positive_entries("A", positive)
    variant_round = si.row_step(si.column_step(A, eps, si.L), eps)(si.I, si.J)
    paper_round = si.row_step(si.column_step(A, 0, si.L))(si.I, si.J)
    si.require_reduces("variant round at ε = 0 is the paper's, symbolic n",
                       variant_round.subs(eps, 0), paper_round)
    logits = sympy.IndexedBase("h", real=True)
    softmax = si.row_step(lambda i, j: sympy.exp(logits[i, j]))
    si.require_positive("exp(h_ij)", sympy.exp(logits[si.I, si.J]))
    softmax_value = si.row_sum(softmax)
    si.require_reduces("softmax_rows(H̃) 1 = 1, symbolic n", softmax_value, 1)
    return [
        ("every n: the paper's row step leaves row sums exactly 1 (as in mhc.sinkhorn_rows_exact)",
         chain(sympy.Symbol(r"(T_r(A) \mathbf{1})_i"), paper_sum, paper_split, paper_value)),
        ("every n: the variant's row step leaves r_i/(r_i + ε), r_i = Σ_k A_ik, exactly "
         "ε/(r_i + ε) > 0 below 1", chain(variant_sum, variant_value, 1 - gap)),
        require_relation("every n: the variant's row step keeps A > 0",
                     sympy.StrictGreaterThan(rows_entry, 0, evaluate=False)),
        require_relation("and so does its column step, so by induction every iterate is positive",
                         sympy.StrictGreaterThan(columns_entry, 0, evaluate=False)),
        ("every n: the variant's round (column step, then row step) with ε set to 0 is the "
         "paper's round",
         chain(r"T_r^{\varepsilon}(T_c^{\varepsilon}(A))_{ij} \big|_{\varepsilon = 0}",
                               variant_round.subs(eps, 0), paper_round)),
        ("every n: the softmax start is T_r(exp H̃), so its rows sum to 1",
         chain(si.total(softmax(si.I, si.J), si.J), softmax_value)),
    ]


@theorem(
    "mhc.sinkhorn_variants",
    "The paper's Sinkhorn–Knopp (M⁰ = exp(H̃), then column and row normalisation) ends every "
    "round with row sums exactly 1; the DeepSeek-V4 variant (M⁰ = softmax_rows(H̃) + ε, ε added "
    "to every denominator) ends every round with row sums r/(r + ε) — exactly below 1, never 1 "
    "for ε > 0 — and equals the paper's step at ε = 0; in both only positivity is exact for "
    "the columns.",
    assumptions=(
        "A: any n×n matrix with positive entries (the iterate before the last row step, which "
        "is positive after any number of rounds).",
        "ε > 0.",
    ),
    setting=(
        "Variant: T_c^ε(A)_ij = A_ij / (Σ_i A_ij + ε), T_r^ε(A)_ij = A_ij / (Σ_j A_ij + ε).",
    ),
    cases="symbolic n in index form (every round by induction: each step keeps A > 0); "
          "examples: generic positive A, n in {1,2,3}; softmax start: generic logits, n in {2,3}",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.2 Eq. 9; the DeepSeek-V4 variant as described by the seeds",
)
def _sinkhorn_variants() -> list[Step]:
    eps = hypothesis("ε > 0", "epsilon", weaker={"real": True}, positive=True)
    positive = granted("A: any n×n matrix with positive entries", positive=True)
    steps: list[Step] = _variants_every_n(eps, positive)
    for n in (1, 2, 3):
        A = symbol_matrix("A", n, n, **positive)
        paper_step = require_equal(f"paper: T_r(A) 1 = 1, n={n}",
                                   ds.row_sums(ds.normalise_rows(A)), sympy.ones(n, 1))
        variant_step = require_equal(
            f"variant: T_r^ε(A) 1 = r / (r + ε) with r = A 1, n={n}",
            ds.row_sums(normalise_rows_eps(A, eps)),
            ds.row_sums(A).applyfunc(lambda r: r / (r + eps)))
        for M in (normalise_rows_eps(A, eps), normalise_columns_eps(A, eps)):
            if not all(entry.is_positive for entry in M):
                raise ProofFailure(f"variant, n={n}: an entry is not provably positive")
        require_equal(f"variant at ε = 0 is the paper's step, n={n}",
                      normalise_rows_eps(normalise_columns_eps(A, eps), eps).subs(eps, 0),
                      ds.normalise_rows(ds.normalise_columns(A)))
        if n == 2:
            steps += [("example, " + paper_step[0], paper_step[1]),
                      ("example, " + variant_step[0], variant_step[1])]
    r = sympy.Symbol("r", positive=True)
    steps.append(require_equal("1 − r/(r + ε) = ε/(r + ε) > 0 for r > 0, ε > 0: the variant's "
                               "row sums lie strictly below 1", 1 - r / (r + eps),
                               eps / (r + eps)))
    for n in (2, 3):
        logits = symbol_matrix("h", n, n)
        start = softmax_rows(logits)
        step = require_equal(f"example, softmax start: rows of softmax_rows(H̃) sum to 1, n={n}",
                             ds.row_sums(start), sympy.ones(n, 1))
        if n == 2:
            steps.append(step)
    steps.append(prose("so after the last round the paper's H_res has unit row sums and the "
                       "variant's has row sums in (0, 1); the column sums of both are 1 only in "
                       "the limit (mhc.sinkhorn_rows_exact, mhc.sinkhorn_converges)"))
    return steps


CONVERGENCE_LOGITS = sympy.Matrix([[0, 2, -1], [1, 0, 3], [-2, 1, 0]])
"""A fixed non-symmetric 3×3 logit matrix for the numeric convergence check."""


@theorem(
    "mhc.sinkhorn_converges",
    "On a fixed non-symmetric 3×3 logit matrix the Sinkhorn–Knopp iterates (mHC Eq. 9) keep unit "
    "row sums after every round while the largest column-sum error shrinks every round, below "
    "1e-6 by round 20 (t_max of the paper).",
    assumptions=(),
    setting=(
        "Logits [[0, 2, −1], [1, 0, 3], [−2, 1, 0]]; exact arithmetic, evaluated to "
                 "30 digits for the comparisons.",
    ),
    cases="one 3×3 instance, rounds 1..20 (a numeric check of the iterates, not a proof of "
          "convergence)",
    generality="instance",
    source="mHC arXiv:2512.24880 §4.2 Eq. 9 (t_max = 20); Sinkhorn–Knopp 1967",
)
def _sinkhorn_converges() -> list[Step]:
    M = CONVERGENCE_LOGITS.applyfunc(lambda v: sympy.exp(sympy.Float(v, 40)))
    errors = []
    for round_ in range(1, 21):
        M = ds.normalise_rows(ds.normalise_columns(M))
        rows = max(abs(s - 1) for s in ds.row_sums(M))
        if rows > 1e-25:
            raise ProofFailure(f"round {round_}: a row sum misses 1 by {rows}")
        errors.append(max(abs(s - 1) for s in ds.col_sums(M)))
    shrinking = all(b < a for a, b in itertools.pairwise(errors))
    if not shrinking:
        raise ProofFailure(f"the column-sum error does not shrink every round: {errors}")
    if not errors[-1] < 1e-6:
        raise ProofFailure(f"column-sum error after 20 rounds is {errors[-1]}, not below 1e-6")
    e = sympy.Symbol(r"e_{20}")
    shown = ", ".join(f"e_{k} = {float(errors[k - 1]):.3g}" for k in (1, 5, 10, 20))
    return [
        prose(f"largest column-sum error after rounds 1, 5, 10, 20 (computed): {shown}"),
        require_true("the error shrinks every round and is below 1e-6 at round 20",
                     shrinking and errors[-1] < 1e-6, sympy.StrictLessThan(e, sympy.Float(1e-6)),
                     where={e: errors[-1]}),
    ]


def _permutation_isometry_every_n() -> list[Step]:
    """For symbolic n: P is doubly stochastic, so ‖x‖² − ‖Px‖² = Σ_i Σ_j P_ij (x_j − (Px)_i)²
    (ds.nonexpansive's identity); row i of P is e_σ(i), so (Px)_i = x_σ(i) and every term is
    δ_σ(i)j (x_j − x_σ(i))² = 0 (for j = σ(i) the square is 0, otherwise δ is 0)."""
    n = sympy.Symbol("n", integer=True, positive=True)
    i, j = sympy.symbols("i j", integer=True, nonnegative=True)
    x = sympy.IndexedBase("x", real=True)
    sigma = sympy.Function("sigma", integer=True, nonnegative=True)(i)
    delta = sympy.KroneckerDelta(sigma, j)
    row_sum = sympy.Sum(delta, (j, 0, n - 1))
    read = sympy.Sum(delta * x[j], (j, 0, n - 1))
    in_range = {sympy.Le(sigma, n - 1): True}  # σ(i) is an index, 0 ≤ σ(i) ≤ n − 1
    bijection = assume("a bijection σ of {0, …, n−1}", replace=in_range)
    row_total = sympy.piecewise_fold(row_sum.doit()).xreplace(in_range)
    value = sympy.piecewise_fold(read.doit()).xreplace(in_range)
    if sympy.simplify(row_total) != 1 or sympy.simplify(value) != x[sigma]:
        raise ProofFailure(f"row σ(i) of P: expected row sum 1 and (Px)_i = x_σ(i), got "
                           f"{row_total}, {value}")
    term = delta * (x[j] - value) ** 2
    jensen = sympy.IndexedBase("H")[i, j] * (x[j] - sympy.Symbol("m")) ** 2  # ds.nonexpansive
    if term != jensen.xreplace({sympy.IndexedBase("H")[i, j]: delta, sympy.Symbol("m"): value}):
        raise ProofFailure(f"{term} is not ds.nonexpansive's term H_ij (x_j − (Hx)_i)² at H = P")
    on_diagonal, off_diagonal = term.subs(j, sigma), term.replace(
        lambda e: isinstance(e, sympy.KroneckerDelta), lambda e: sympy.Integer(0))
    if on_diagonal != 0 or off_diagonal != 0:
        raise ProofFailure(f"the gap term {term} is not 0 in both cases: {on_diagonal}, "
                           f"{off_diagonal}")
    diagonal = sympy.Symbol(r"\delta_{\sigma(i)\sigma(i)} (x_{\sigma(i)} - (Px)_i)^2")
    off = sympy.Symbol(r"\delta_{\sigma(i)j} (x_j - (Px)_i)^2 \big|_{j = \sigma(i) + 1}")
    return [
        ("every n: row i of P is e_σ(i)ᵀ, so P reads one entry", chain(
            sympy.Symbol("(Px)_i"), read, value, using=[bijection])),
        prose("by ds.nonexpansive's identity for the doubly stochastic P, ‖x‖² − ‖Px‖² = "
              "Σ_i Σ_j P_ij (x_j − (Px)_i)²; each term is 0:"),
        require_relation("for j = σ(i) the square vanishes", sympy.Eq(diagonal, 0),
                     where={diagonal: term.subs(j, sigma)}),
        require_relation("for j ≠ σ(i) the Kronecker δ vanishes (shown at j = σ(i) + 1)",
                     sympy.Eq(off, 0),
                     where={off: term.subs(j, sigma + 1)}),
    ]


@theorem(
    "ds.permutation_isometry",
    "A permutation matrix keeps the norm exactly: ‖P x‖₂ = ‖x‖₂, because PᵀP = I; so the "
    "non-expansive bound of ds.nonexpansive is attained at the vertices.",
    assumptions=("P a permutation matrix: P_ij = δ_{σ(i) j} for a bijection σ of {0, …, n−1}, "
                 "so P is doubly stochastic (one 1 in every row and column); x ∈ R^n real.",),
    cases="symbolic n (index form: the Jensen-gap identity of ds.nonexpansive, each term 0 for a "
          "0/1 row); examples: all n! permutations for n in {1,2,3,4} (PᵀP = I)",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.1 (the vertices of the Birkhoff polytope)",
)
def _permutation_isometry() -> list[Step]:
    steps: list[Step] = _permutation_isometry_every_n()
    for n in (1, 2, 3, 4):
        x = symbol_vector("x", n)
        for P in ds.permutation_matrices(n):
            if sympy.eye(n) != P.T * P:
                raise ProofFailure(f"PᵀP != I for P = {P.tolist()}")
            require_equal(f"‖Px‖² = ‖x‖², P = {P.tolist()}", (P * x).T * (P * x), x.T * x)
    P = ds.permutation_matrices(3)[3]
    x = symbol_vector("x", 3)
    steps += [
        ("n = 3 example: P x permutes the entries", chain(sympy.MatMul(P, x), P * x)),
        ("so the squared norm is the same sum in another order",
         chain(sympy.Symbol(r"\|P x\|^2"), ((P * x).T * (P * x))[0, 0], (x.T * x)[0, 0])),
    ]
    return steps


BIRKHOFF_EXAMPLES = (
    sympy.Matrix([[sympy.Rational(1, 2), sympy.Rational(1, 3), sympy.Rational(1, 6)],
                  [sympy.Rational(1, 6), sympy.Rational(1, 2), sympy.Rational(1, 3)],
                  [sympy.Rational(1, 3), sympy.Rational(1, 6), sympy.Rational(1, 2)]]),
    sympy.Matrix([[sympy.Rational(2, 5), sympy.Rational(3, 5), 0],
                  [sympy.Rational(1, 5), sympy.Rational(1, 5), sympy.Rational(3, 5)],
                  [sympy.Rational(2, 5), sympy.Rational(1, 5), sympy.Rational(2, 5)]]),
    sympy.Matrix(4, 4, lambda i, j: sympy.Rational([[4, 3, 2, 1], [1, 4, 3, 2], [2, 1, 4, 3],
                                                    [3, 2, 1, 4]][i][j], 10)),
    sympy.Matrix([[sympy.Rational(1, 2), sympy.Rational(1, 4), sympy.Rational(1, 4), 0],
                  [0, sympy.Rational(1, 2), sympy.Rational(1, 4), sympy.Rational(1, 4)],
                  [sympy.Rational(1, 4), 0, sympy.Rational(1, 2), sympy.Rational(1, 4)],
                  [sympy.Rational(1, 4), sympy.Rational(1, 4), 0, sympy.Rational(1, 2)]]),
)
"""Rational doubly stochastic matrices decomposed exactly by ``ds.birkhoff_decompositions``."""


def birkhoff_decomposition(M: sympy.Matrix) -> list[tuple[sympy.Expr, sympy.Matrix]]:
    """Weights and permutation matrices with M = Σ λ_k P_k, λ_k > 0, Σ λ_k = 1 (exact): repeatedly
    take a permutation inside the support of the remainder and remove its smallest entry there.

    Raises:
        ProofFailure: if the remainder has no permutation in its support (then M was not doubly
            stochastic).
    """
    n = M.shape[0]
    rest = sympy.Matrix(M)
    parts: list[tuple[sympy.Expr, sympy.Matrix]] = []
    while any(entry != 0 for entry in rest):
        for perm in itertools.permutations(range(n)):
            if all(rest[i, perm[i]] > 0 for i in range(n)):
                break
        else:
            raise ProofFailure(f"no permutation in the support of {rest.tolist()}")
        weight = min(rest[i, perm[i]] for i in range(n))
        P = sympy.Matrix(n, n, lambda i, j, p=perm: 1 if p[i] == j else 0)
        parts.append((weight, P))
        rest -= weight * P
    return parts


@theorem(
    "ds.birkhoff_decompositions",
    "Birkhoff–von Neumann on examples: each of four rational doubly stochastic matrices (two 3×3, "
    "two 4×4) is exactly a convex combination of permutation matrices.",
    assumptions=(),
    setting=(
        "The matrices of BIRKHOFF_EXAMPLES (rational, doubly stochastic).",
        "The general theorem (every doubly stochastic matrix, any n) rests on Hall's "
                 "marriage theorem, a combinatorial argument outside what sympy checks; "
                 "ds.two_by_two_family proves it for n = 2.",
    ),
    cases="four explicit matrices: two 3×3, two 4×4",
    generality="instance",
    source="mHC arXiv:2512.24880 §4.1 (the Birkhoff polytope is the convex hull of the "
           "permutation matrices)",
)
def _birkhoff_decompositions() -> list[Step]:
    steps: list[Step] = []
    for M in BIRKHOFF_EXAMPLES:
        ds.require_doubly_stochastic(f"example {M.tolist()}", M)
        parts = birkhoff_decomposition(M)
        weights = [w for w, _ in parts]
        if not all(w > 0 for w in weights) or sum(weights) != 1:
            raise ProofFailure(f"weights {weights} are not a convex combination")
        total = sum((w * P for w, P in parts), sympy.zeros(*M.shape))
        require_equal(f"Σ λ_k P_k = M for {M.tolist()}", total, M)
        if M.shape == (3, 3) and not steps:
            terms = sympy.MatAdd(*(sympy.MatMul(w, sympy.ImmutableMatrix(P))
                                   for w, P in parts), evaluate=False)
            steps.append((f"a 3×3 example: {len(parts)} permutations, weights summing to 1",
                          chain(sympy.ImmutableMatrix(M), terms)))
        steps.append(require_equal(f"{M.shape[0]}×{M.shape[0]} example: its decomposition's "
                                   "weights sum to 1", sympy.Add(*weights, evaluate=False), 1))
    return steps
