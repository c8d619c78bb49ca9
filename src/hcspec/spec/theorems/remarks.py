"""Remarks of the papers and the project's seed notes, made exact: the mHC soft start, the
tensor-parallel locality of the stream mixing, what n = 1 cannot express, and the seed notes'
Sinkhorn loop (rows first, ε in the denominators, temperature τ) next to the paper's.

Theorems: ``mhc.soft_start``, ``mhc.tensor_parallel_locality``, ``reduction.n1_expressiveness``,
``mhc.sinkhorn_seed_loop``.
Sources: mHC arXiv:2512.24880 §4.2 Eq. 7–9 (α, biases, Sinkhorn–Knopp), §4.3 (infrastructure);
HC arXiv:2409.19606 §3.2 (the connection patterns n ≥ 2 can express), §4.5 Eq. 20.
"""

from __future__ import annotations

import itertools

import sympy

from hcspec.spec import doubly_stochastic as ds
from hcspec.spec import formulas, network
from hcspec.spec import sinkhorn_index as si
from hcspec.spec.checks import chain, require_equal, require_relation, require_true, symbol_matrix
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import Given, granted, hypothesis, induction, lemma_rewrite, prose
from hcspec.spec.theorems import lemmas
from hcspec.spec.theorems.duality import HC_PARALLEL_EVEN, HC_PARALLEL_ODD, symbolic_weights
from hcspec.spec.theorems.mhc import (
    CONVERGENCE_LOGITS,
    normalise_columns_eps,
    normalise_rows_eps,
    sigmoid,
)

N = formulas.n
LAMBDA = sympy.Symbol("lambda", real=True)
"""The diagonal logit of a soft-start b_res = λ I."""


def diagonal_start(n: sympy.Expr | int, one: sympy.MatrixExpr | None = None
                   ) -> sympy.MatrixExpr:
    """exp applied entrywise to the logits λ I: e^λ on the diagonal, 1 elsewhere, written as
    (e^λ − 1) I + 1 1ᵀ (n×n); ``one`` is the all-ones column (default: sympy's OneMatrix, which
    an explicit n evaluates; a MatrixSymbol named 1 keeps 1 1ᵀ visible for symbolic n)."""
    one = sympy.OneMatrix(n, 1) if one is None else one
    return (sympy.exp(LAMBDA) - 1) * sympy.Identity(n) + one * one.T


@theorem(
    "mhc.soft_start",
    "At α = 0 the mHC weights are the constants σ(b_pre), 2σ(b_post), SK(b_res) and they move "
    "by O(α) for small α; with b_post = 0 and b_res = λ I Sinkhorn–Knopp returns, after any number "
    "of rounds, H_res = I + (11ᵀ − n I)/(e^λ + n − 1), so the sublayer is X' = X + 1 zᵀ plus "
    "terms of size O(α) and O(n e^−λ): a residual update of every stream.",
    assumptions=(),
    setting=(
        "mHC Eq. 7: H̃ = α·(x' φ) + b per weight; x' φ is finite (x' is RMS-normalised).",
        "b_res = λ I: diagonal logits λ, off-diagonal 0 (the reference uses λ = 0.7); b_post = 0.",
    ),
    cases="symbolic n and λ (H_res by MatrixSymbol algebra with 1ᵀ1 = n; its distance to I by "
          "limit); the O(α) step by the first-order Taylor term per entry; Sinkhorn–Knopp run "
          "explicitly at n = 2: one round, then a fixed point",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.2 Eq. 7–9 (α = 0.01 at init; the biases' init is not given)",
)
def _soft_start() -> list[Step]:
    alpha, b, u = sympy.Symbol("alpha", real=True), sympy.Symbol("b", real=True), \
        sympy.Symbol("u", real=True)
    slope = sympy.diff(sigmoid(b + alpha * u), alpha).subs(alpha, 0)
    first_order = sigmoid(b) + alpha * slope
    require_equal("σ(b + α u) to first order in α", first_order,
                  sigmoid(b) + alpha * u * sigmoid(b) * (1 - sigmoid(b)))
    one = sympy.MatrixSymbol(r"\mathbf{1}", N, 1)
    M = diagonal_start(N, one)
    column_sums = ds.rewrite(one.T * M, [one.T, one], N * sympy.Identity(1))
    row_sums = ds.rewrite(M * one, [one.T, one], N * sympy.Identity(1))
    scale = sympy.exp(LAMBDA) + N - 1
    require_equal("1ᵀ M = (e^λ + n − 1) 1ᵀ, symbolic n", column_sums, scale * one.T)
    require_equal("M 1 = (e^λ + n − 1) 1, symbolic n", row_sums, scale * one)
    H_res = M / scale
    target = sympy.Identity(N) + (one * one.T - N * sympy.Identity(N)) / scale
    # both sides are a I + b 11ᵀ: compare the coefficients of I and of 11ᵀ
    require_equal("H_res = I + (11ᵀ − n I)/(e^λ + n − 1): coefficients of I and 11ᵀ, symbolic n",
                  sympy.Matrix([(sympy.exp(LAMBDA) - 1) / scale, 1 / scale]),
                  sympy.Matrix([1 - N / scale, 1 / scale]))
    off = 1 / scale
    if sympy.limit(off, LAMBDA, sympy.oo) != 0 or sympy.limit((1 - N) * off, LAMBDA,
                                                               sympy.oo) != 0:
        raise ProofFailure("H_res − I does not vanish as λ → ∞")
    E = sympy.Symbol("E", positive=True)  # e^λ, so the checks below are rational in E
    for n in (2,):
        fixed = sympy.Matrix((diagonal_start(n) / (sympy.exp(LAMBDA) + n - 1)).as_explicit())
        once = ds.sinkhorn_knopp(LAMBDA * sympy.eye(n), 1)
        require_equal(f"Sinkhorn–Knopp, one round, of λ I, n={n}",
                      once.xreplace({sympy.exp(LAMBDA): E}), fixed.xreplace({sympy.exp(LAMBDA): E}))
        fixed_E = fixed.xreplace({sympy.exp(LAMBDA): E})
        require_equal(f"and a further round leaves it unchanged (a fixed point), n={n}",
                      ds.normalise_rows(ds.normalise_columns(fixed_E)), fixed_E)
    s = formulas.connection_symbols()
    residual_like = formulas.forward(s).xreplace({s.H_res: sympy.Identity(N), s.h_post: one})
    H_post = 2 * sigmoid(sympy.Integer(0))
    ones = lemma_rewrite("lemma.unit_vectors", lemmas.ONES, (one.T, one), N * sympy.Identity(1),
                         entries={one: lambda r, c: 1})
    require_equal("the off-diagonal entry of the n = 2 fixed point is the one whose limit is "
                  "taken", once[0, 1], off.subs(N, 2))
    return [
        ("α = 0: H̃ = b, so the weights do not depend on the state; for small α each moves by "
         "α σ'(b) (x'φ)_i to first order (the first-order Taylor term)",
         chain(r"\sigma(b) + \alpha \tfrac{d}{d\alpha}\sigma(b + \alpha u)\big|_{\alpha=0}",
               first_order, sigmoid(b) + alpha * u * sigmoid(b) * (1 - sigmoid(b)))),
        ("b_res = λ I: M⁰ = exp(λ I) = (e^λ − 1) I + 11ᵀ has column sums e^λ + n − 1",
         chain(one.T * M, column_sums, scale * one.T, using=[ones])),
        ("and row sums e^λ + n − 1, so the first column step divides by that constant and every "
         "later step leaves it unchanged", chain(M * one, row_sums, scale * one, using=[ones])),
        ("the fixed point, for every n and number of rounds", chain(
            sympy.Symbol("H_{res}"), H_res, target)),
        ("its distance to I vanishes as λ grows (off-diagonal entries shown)",
         chain(sympy.Limit(off, LAMBDA, sympy.oo), sympy.Integer(0))),
        require_equal("b_post = 0: H_post = 2σ(0)", H_post, sympy.Integer(1)),
        ("with H_res = I and H_post = 1 the sublayer is a residual update of every stream",
         chain("X'", formulas.forward(s), residual_like, using=[Given(
             "H_res = I, h_post = 1", ((s.H_res, sympy.Identity(N)), (s.h_post, one)))])),
    ]


@theorem(
    "mhc.tensor_parallel_locality",
    "Sharding the feature axis d commutes with the connection: for X = [X₁ | X₂], "
    "H_res X = [H_res X₁ | H_res X₂], x_in = Xᵀ h_pre stacks the shards' Xₛᵀ h_pre and "
    "h_post zᵀ splits like z; only the dynamic/mHC weights need a cross-shard sum "
    "(‖vec X‖² and vec(X) φ are sums of per-shard terms).",
    assumptions=(),
    setting=(
        "X₁: n×d₁, X₂: n×d₂, z = [z₁; z₂]; the weights h_pre, h_post, H_res (n + n + n² "
                 "numbers) replicated on every shard; φ split by rows as [φ₁; φ₂].",
    ),
    cases="symbolic n, d₁, d₂ (block matrices; block_collapse)",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.3 (kernel fusion and parallelism); Eq. 3 and Eq. 7",
)
def _tensor_parallel_locality() -> list[Step]:
    d1, d2, c = sympy.symbols("d_1 d_2 c", integer=True, positive=True)
    X1, X2 = sympy.MatrixSymbol("X_1", N, d1), sympy.MatrixSymbol("X_2", N, d2)
    z1, z2 = sympy.MatrixSymbol("z_1", d1, 1), sympy.MatrixSymbol("z_2", d2, 1)
    s = formulas.connection_symbols(N, d1 + d2)
    X, z = sympy.BlockMatrix([[X1, X2]]), sympy.BlockMatrix([[z1], [z2]])
    steps: list[Step] = []
    for label, expr, expected in (
            ("mix: H_res acts on each shard", s.H_res * X,
             sympy.BlockMatrix([[s.H_res * X1, s.H_res * X2]])),
            ("read: x_in = Xᵀ h_pre stacks the shards' reads",
             formulas.aggregate(s).xreplace({s.X: X}),
             sympy.BlockMatrix([[X1.T * s.h_pre], [X2.T * s.h_pre]])),
            ("write: h_post zᵀ splits like z", s.h_post * z.T,
             sympy.BlockMatrix([[s.h_post * z1.T, s.h_post * z2.T]]))):
        collapsed = sympy.block_collapse(expr)
        if not isinstance(collapsed, sympy.BlockMatrix) or any(
                not sympy.expand(got - want).is_ZeroMatrix
                for got, want in zip(collapsed.blocks, expected.blocks, strict=True)):
            raise ProofFailure(f"{label}: {collapsed} is not {expected}")
        steps.append((f"{label}, every n, d₁, d₂", chain(expr, collapsed)))
    v1, v2 = sympy.MatrixSymbol("v_1", 1, c), sympy.MatrixSymbol("v_2", 1, c)
    phi1, phi2 = sympy.MatrixSymbol(r"\phi_1", c, N), sympy.MatrixSymbol(r"\phi_2", c, N)
    partial = sympy.block_collapse(sympy.BlockMatrix([[v1, v2]])
                                   * sympy.BlockMatrix([[phi1], [phi2]]))
    if not sympy.expand(sympy.Matrix([[partial - (v1 * phi1 + v2 * phi2)]])[0, 0]).is_ZeroMatrix:
        raise ProofFailure(f"vec(X) φ is not the sum of per-shard products: {partial}")
    steps.append(("the dynamic weights read all of vec(X): vec(X) φ is a sum of per-shard "
                  "products (one all-reduce of n numbers per weight), likewise ‖vec X‖²",
                  chain(sympy.BlockMatrix([[v1, v2]]) * sympy.BlockMatrix([[phi1], [phi2]]),
                        partial)))
    return steps


def minors_vanish(C: sympy.Matrix, L: int) -> list[sympy.Expr]:
    """The 2×2 minors w_{j,k} w_{j',k'} − w_{j',k} w_{j,k'} of the unrolled weights over
    sublayer rows 1 ≤ k < k' ≤ L and node columns j < j' < k (both rows read both columns)."""
    return [sympy.expand(C[k, j] * C[k2, j2] - C[k, j2] * C[k2, j])
            for k, k2 in itertools.combinations(range(1, L + 1), 2)
            for j, j2 in itertools.combinations(range(k), 2)]


_A_N1, _P_N1, _Q_N1 = (sympy.IndexedBase(name, real=True) for name in ("a", "p", "q"))
_T = sympy.Symbol("t", integer=True)


def n1_weight(j: sympy.Expr, k: sympy.Expr) -> sympy.Expr:
    """w_{j,k} at n = 1 for every L: p_k (Π_{t=j+1}^{k-1} a_t) q_j (unroll.connection_weights with
    scalar weights; q_0 = 1 for the embedding)."""
    return _P_N1[k] * sympy.Product(_A_N1[_T], (_T, j + 1, k - 1)) * _Q_N1[j]


def _n1_carried_every_l() -> list[Step]:
    """R_{k,j} = Π_{t=j+1}^{k} a_t at n = 1 for every k ≥ j, by a checked induction on k
    (symbolic j, k): sublayer k + 1 multiplies the term of node j by a_{k+1} (the forward of
    :mod:`hcspec.spec.formulas` at n = 1, symbolic d), the base R_{j,j} = 1 is the empty
    product, and the step a_{k+1} Π_{t=j+1}^{k} a_t = Π_{t=j+1}^{k+1} a_t splits off the last
    factor. So w_{j,k} = p_k (Π_{t=j+1}^{k−1} a_t) q_j for every L, not only at the L checked
    below.

    Raises:
        ProofFailure: when a step does not reduce as claimed.
    """
    j, k = sympy.symbols("j k", integer=True)
    s = formulas.connection_symbols(1, formulas.d)
    r, a_next = sympy.Symbol("R_{k,j}", real=True), _A_N1[k + 1]
    q_j, z_j = sympy.MatrixSymbol("q_j", 1, 1), sympy.MatrixSymbol("z_j", formulas.d, 1)
    carried = (formulas.forward(s) - s.h_post * s.z.T).xreplace({
        s.X: r * q_j * z_j.T, s.H_res: a_next * sympy.Identity(1)})
    upto = sympy.Product(_A_N1[_T], (_T, j + 1, k))
    base, step = induction(
        ("base case k = j: R_{j,j} = 1 is the empty product",
         chain(sympy.Product(_A_N1[_T], (_T, j + 1, j)), sympy.Integer(1))),
        ("induction step, every j ≤ k: R_{k+1,j} = a_{k+1} R_{k,j} with R_{k,j} = Π_{t=j+1}^{k} "
         "a_t is the product up to k + 1",
         chain(a_next * upto, upto * sympy.Product(_A_N1[_T], (_T, k + 1, k + 1)),
               sympy.Product(_A_N1[_T], (_T, j + 1, k + 1)))))
    return [
        ("n = 1, every d: sublayer k + 1 multiplies the term of node j by a_{k+1}",
         chain(carried, a_next * r * q_j * z_j.T)),
        base,
        step,
    ]


def _n1_minors_every_l() -> list[Step]:
    """Every 2×2 minor over sublayers k < k' and nodes j < j' < k vanishes, for symbolic
    indices (so every L): split Π_{j+1}^{k-1} and Π_{j+1}^{k'-1} at j' (sympy joins the pieces
    back) and both products of the minor become p_k p_k' q_j q_j' Π_{j+1}^{j'} Π_{j'+1}^{k-1}
    Π_{j'+1}^{k'-1}.

    Raises:
        ProofFailure: when a split does not join back or the minor does not vanish.
    """
    j, j2, k, k2 = sympy.symbols("j j' k k'", integer=True)

    def span(lo: sympy.Expr, hi: sympy.Expr) -> sympy.Product:
        return sympy.Product(_A_N1[_T], (_T, lo, hi))

    splits = {span(j + 1, k - 1): span(j + 1, j2) * span(j2 + 1, k - 1),
              span(j + 1, k2 - 1): span(j + 1, j2) * span(j2 + 1, k2 - 1)}
    for whole, pieces in splits.items():
        if sympy.simplify(pieces) != whole:
            raise ProofFailure(f"{pieces} does not join back to {whole}")
    minor = n1_weight(j, k) * n1_weight(j2, k2) - n1_weight(j2, k) * n1_weight(j, k2)
    split = minor.xreplace(splits)
    if sympy.expand(split) != 0:
        raise ProofFailure(f"the n = 1 minor does not vanish: {sympy.expand(split)}")
    shown = sympy.Add((n1_weight(j, k) * n1_weight(j2, k2)).xreplace(splits),
                      -(n1_weight(j2, k) * n1_weight(j, k2)).xreplace(splits), evaluate=False)
    return [
        prose("every L: at n = 1 the H_res are scalars a_t; unroll.connection_weights (proven "
              "for every L) gives w_{j,k} = p_k R_{k−1,j} q_j with R_{j,j} = 1 and "
              "R_{k,j} = H_k R_{k−1,j}"),
        *_n1_carried_every_l(),
        ("a product over t = j+1..k−1 splits at any j' (sympy joins the two pieces back)",
         chain(span(j + 1, k - 1), splits[span(j + 1, k - 1)])),
        ("so, for every L, for nodes j < j' < k and sublayers k < k' the minor vanishes: both "
         "products carry the same factors",
         chain(sympy.Symbol("w_{j,k} w_{j',k'} - w_{j',k} w_{j,k'}"),
                                   shown, sympy.Integer(0))),
    ]


@theorem(
    "reduction.n1_expressiveness",
    "At n = 1 the unrolled weights factor as w_{j,k} = p_k (a_{k-1} ⋯ a_{j+1}) q_j, so every 2×2 "
    "minor over two sublayers and two earlier nodes vanishes: every sublayer reads the earlier "
    "outputs in the same proportions (up to its own scale). n = 2 breaks this: the parallel "
    "arrangement (HC Eq. 18–19) has a non-zero minor.",
    assumptions=(),
    setting=(
        "Symbolic scalar weights p_k (h_pre), q_k (h_post), a_k (H_res) per sublayer.",
    ),
    cases="every L: the product form R_{k,j} = Π_{t=j+1}^{k} a_t by a checked induction on k "
          "(symbolic j, k) from unroll.connection_weights (proven for every L) at n = 1; the "
          "minors for symbolic indices j < j' < k < k' (products split by sympy); examples: "
          "n = 1, L in {2,3,4} with symbolic weights, the product form equal to the unrolled "
          "weights at L = 4; the n = 2 parallel pattern at L = 4",
    generality="induction",
    source="HC arXiv:2409.19606 §3.2 (n ≥ 2 expresses sequential and parallel arrangements), "
           "§4.5 Eq. 20; mHC arXiv:2512.24880 §4.1 (n = 1 degenerates to the residual)",
)
def _n1_expressiveness() -> list[Step]:
    steps: list[Step] = _n1_minors_every_l()
    for L in (2, 3, 4):
        weights = [symbolic_weights(1, k) for k in range(1, L + 1)]
        C = network.connection_weights(weights)
        if L == 4:
            values = {_P_N1: [None] + [w.h_pre[0] for w in weights],
                      _Q_N1: [sympy.Integer(1)] + [w.h_post[0] for w in weights],
                      _A_N1: [None] + [w.H_res[0, 0] for w in weights]}
            for k in range(1, L + 1):
                for j in range(k):
                    product = n1_weight(sympy.Integer(j), sympy.Integer(k)).doit().xreplace({
                        base[t]: entries[t] for base, entries in values.items()
                        for t in range(L + 1) if entries[t] is not None})
                    if sympy.expand(product - C[k, j]) != 0:
                        raise ProofFailure(f"w_{{{j},{k}}}: the product form {product} is not "
                                           f"the unrolled weight {C[k, j]}")
        nonzero = [m for m in minors_vanish(C, L) if m != 0]
        if nonzero:
            raise ProofFailure(f"n = 1, L = {L}: a 2×2 minor does not vanish: {nonzero[0]}")
        if L == 3:
            k, k2, j, j2 = 2, 3, 0, 1
            steps.append(("example, n = 1, L = 3: the minor over sublayers 2, 3 and nodes 0, 1 "
                          "(each such minor for L ≤ 4 expands to 0)",
                          chain(sympy.Symbol("w_{0,2} w_{1,3} - w_{1,2} w_{0,3}"),
                                C[k, j] * C[k2, j2] - C[k, j2] * C[k2, j], sympy.Integer(0))))
    parallel = [network.from_paper(HC_PARALLEL_ODD if k % 2 == 1 else HC_PARALLEL_EVEN)
                for k in range(1, 5)]
    C = network.connection_weights(parallel)
    minor = sympy.expand(C[2, 0] * C[3, 1] - C[2, 1] * C[3, 0])
    name = sympy.Symbol("w_{0,2} w_{1,3} - w_{1,2} w_{0,3}")
    steps.append(require_true("n = 2, parallel pattern: sublayer 2 does not read sublayer 1 but "
                              f"sublayer 3 does, so a minor is non-zero ({minor})", minor != 0,
                              sympy.Ne(name, 0, evaluate=False), where={name: minor}))
    return steps


SEED_EPS = sympy.Rational(1, 10**8)
"""The seed notes' ε = 1e-8 in the Sinkhorn denominators."""


def seed_sinkhorn(logits: sympy.Matrix, rounds: int, tau: sympy.Expr,
                  eps: sympy.Expr = SEED_EPS) -> sympy.Matrix:
    """The seed notes' loop: M⁰ = exp(H̃/τ), then ``rounds`` × (rows, then columns), each
    entry divided by (its row or column sum + ε).

    Raises:
        ValueError: if ``rounds`` < 1.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    M = (logits / tau).applyfunc(sympy.exp)
    for _ in range(rounds):
        M = normalise_columns_eps(normalise_rows_eps(M, eps), eps)
    return M


def _seed_loop_every_n(eps: sympy.Symbol, tau: sympy.Symbol,
                       positive: dict[str, bool]) -> list[Step]:
    """The seed loop in index form, symbolic n (:mod:`hcspec.spec.sinkhorn_index`): its last
    step T_c^ε leaves column sums c/(c + ε) < 1 on any positive iterate, its steps keep the
    iterate positive from exp(H̃/τ) > 0, and at ε = 0 one round satisfies
    T_c(T_r(M))_ij = T_r(T_c(Mᵀ))_ji (so t rounds on M are the transpose of the paper's t
    rounds on Mᵀ, by induction). ``eps``, ``tau``: the proof's ε and τ; ``positive``: the
    sympy assumptions of the iterate's entries.

    Raises:
        ProofFailure: when a step does not reduce as claimed.
    """
    column_total, column_value = si.variant_columns(eps, positive)
    kept = si.steps_keep_positive(eps, positive)
    logits = sympy.IndexedBase("h", real=True)
    si.require_positive("exp(h_ij/τ)", sympy.exp(logits[si.I, si.J] / tau))
    M = si.positive_entries("M", positive)
    seed_round = si.column_step(si.row_step(M, 0, si.L))
    paper_round = si.row_step(si.column_step(si.transpose(M), 0, si.L))
    si.require_reduces("ε = 0: T_c(T_r(M))_ij = T_r(T_c(Mᵀ))_ji, symbolic n",
                       seed_round(si.I, si.J), paper_round(si.J, si.I))
    return [
        ("every n: the seed loop's last step T_c^ε leaves column j of any positive iterate B "
         "summing to c_j/(c_j + ε), c_j = Σ_k B_kj: below 1 for ε > 0",
         chain(column_total, column_value)),
        require_relation("every n: its steps keep the iterate positive (from exp(H̃/τ) > 0, by "
                     "induction)", sympy.StrictGreaterThan(kept, 0, evaluate=False)),
        ("every n, ε = 0: entry (i, j) of a seed round on M is entry (j, i) of a paper round "
         "on Mᵀ (rows first on M is columns first on Mᵀ)",
         chain(r"T_c(T_r(M))_{ij}", seed_round(si.I, si.J), paper_round(si.J, si.I))),
    ]


@theorem(
    "mhc.sinkhorn_seed_loop",
    "The seed notes' Sinkhorn loop (exp(H̃/τ), rows first, +ε in every denominator) ends each "
    "round with column sums c/(c + ε) — in (0, 1), never exactly 1 — and inexact rows; the "
    "paper's (columns first, no ε) ends with rows exactly 1. At ε = 0 the seed loop on H̃ is the "
    "transpose of the paper's on H̃ᵀ, and τ only rescales the logits.",
    assumptions=("A positive n×n iterate.", "ε = 1e-8 > 0.", "τ > 0."),
    cases="column sums, positivity and the transpose relation for symbolic n in index form "
          "(every round by induction); examples: generic positive entries at n in {2,3}; inexact "
          "rows: the logits [[0, 2, −1], [1, 0, 3], [−2, 1, 0]] at τ = 1, 20 rounds, evaluated "
          "to 30 digits",
    generality="all sizes",
    source="mHC arXiv:2512.24880 §4.2 Eq. 9 (the paper's order); the seed notes' loop",
)
def _sinkhorn_seed_loop() -> list[Step]:
    eps = hypothesis("ε = 1e-8 > 0", "epsilon", weaker={"real": True}, positive=True)
    tau = hypothesis("τ > 0", "tau", weaker={"real": True}, positive=True)
    positive = granted("A positive n×n iterate", positive=True)
    steps: list[Step] = _seed_loop_every_n(eps, tau, positive)
    for n in (2, 3):
        h = symbol_matrix("h", n, n)
        seed = seed_sinkhorn(h, 1, tau, eps)
        column = ds.col_sums(normalise_rows_eps((h / tau).applyfunc(sympy.exp), eps))
        step = require_equal(f"seed loop, column sums after the last step = c/(c + ε), n={n}",
                             ds.col_sums(seed), column.applyfunc(lambda c: c / (c + eps)),
                             show=(sympy.Symbol(r"(\mathbf{1}^T M)_j"),
                                   sympy.Symbol(r"\frac{c_j}{c_j + \varepsilon}")),
                             where={sympy.Symbol(r"(\mathbf{1}^T M)_j"): ds.col_sums(seed),
                                    sympy.Symbol(r"\frac{c_j}{c_j + \varepsilon}"):
                                    column.applyfunc(lambda c: c / (c + eps))})
        transpose = require_equal(
            f"ε = 0: seed(H̃) = paper(H̃ᵀ)ᵀ, one round, n={n} (rounds compose)", seed.subs(eps, 0),
            ds.sinkhorn_knopp((h / tau).T, 1).T,
            show=(sympy.Symbol(r"\mathrm{seed}_{\varepsilon=0}(\tilde{H})"),
                  sympy.Symbol(r"\mathrm{paper}(\tilde{H}^T / \tau)^T")),
            where={sympy.Symbol(r"\mathrm{seed}_{\varepsilon=0}(\tilde{H})"): seed.subs(eps, 0),
                   sympy.Symbol(r"\mathrm{paper}(\tilde{H}^T / \tau)^T"):
                   ds.sinkhorn_knopp((h / tau).T, 1).T})
        if n == 2:
            steps += [("example, " + step[0], step[1]), ("example, " + transpose[0], transpose[1])]
    logits = CONVERGENCE_LOGITS.applyfunc(lambda v: sympy.Float(v, 40))
    values = seed_sinkhorn(logits, 20, sympy.Integer(1))
    column_error = max(abs(float((s - 1).evalf(30))) for s in ds.col_sums(values))
    row_error = max(abs(float((s - 1).evalf(30))) for s in ds.row_sums(values))
    paper = ds.sinkhorn_knopp(logits, 20)
    paper_rows = max(abs(float((s - 1).evalf(30))) for s in ds.row_sums(paper))
    if not (0 < column_error < 1e-7 and paper_rows < 1e-25 and row_error > column_error):
        raise ProofFailure(f"expected seed columns within 1e-7 but not exact, paper rows exact: "
                           f"seed columns {column_error}, seed rows {row_error}, paper rows "
                           f"{paper_rows}")
    steps.append(prose(f"20 rounds on the fixed 3×3 logits (computed): largest |sum − 1| is "
                       f"{column_error:.3g} for the seed loop's columns, {row_error:.3g} for its "
                       f"rows and {paper_rows:.3g} for the paper's rows"))
    seed_gap = sympy.Symbol(r"\max_j |(\mathbf{1}^T M)_j - 1|")
    steps.append(require_relation(
        "so the seed loop's columns end within 1e-7 of 1 but not exactly",
        sympy.And(sympy.StrictLessThan(seed_gap, sympy.Float(1e-7)),
                                              sympy.StrictGreaterThan(seed_gap, 0)),
                              where={seed_gap: sympy.Float(column_error)}))
    return steps
