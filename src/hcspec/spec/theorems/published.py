"""Each published parameterization's step is the spec's closed form under its mapping.

Theorems ``published.deepseek_v4_step``, ``published.mhc_paper_step``,
``published.hc_static_step``, ``published.hc_dynamic_step``: the step a layout defines
(:mod:`hcspec.reference.published`), written in that layout's own indexing, equals
``X' = H_res X + h_post F(Xᵀ h_pre)ᵀ`` (:func:`hcspec.spec.formulas.forward`) with the
mapping stated; every displayed step is an identity checked exactly (n = 2, d = 2, every
entry a symbol, the branch an arbitrary function ``F: R² → R²``). The DeepSeek-V4 step's gates
and orientation are read from its record, :data:`hcspec.spec.published.DEEPSEEK_V4_FORMULA`
(the one the formulas layer computes with), so the theorem and the torch statement cannot
drift apart.
"""

from __future__ import annotations

import sympy

from hcspec.spec import formulas, network, norms
from hcspec.spec.checks import instantiate, require_equal, symbol_matrix, symbol_vector
from hcspec.spec.published import DEEPSEEK_V4_FORMULA
from hcspec.spec.record import Gate
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import granted, statement
from hcspec.spec.theorems.init import dynamic_weights

N = D = 2


def _branch(x_in: sympy.Matrix) -> sympy.Matrix:
    """An arbitrary branch ``F: R^D → R^D`` applied to the column ``x_in``."""
    return sympy.Matrix([sympy.Function(f"F_{k}")(*x_in) for k in range(D)])


def _closed_form(X: sympy.Matrix, h_pre: sympy.Matrix, h_post: sympy.Matrix,
                 H_res: sympy.Matrix) -> sympy.Matrix:
    """The spec's ``H_res X + h_post F(Xᵀ h_pre)ᵀ`` with these explicit matrices."""
    s = formulas.connection_symbols(N, D)
    x_in = instantiate(formulas.aggregate(s), {s.X: X, s.h_pre: h_pre})
    return instantiate(formulas.forward(s), {s.X: X, s.h_post: h_post, s.H_res: H_res,
                                             s.z: _branch(x_in)})


def _equate(label: str, layout: sympy.Matrix, closed: sympy.Matrix, layout_tex: str,
            closed_tex: str) -> Step:
    """``layout = closed`` checked exactly, the page showing the two formulas it equates
    (``layout_tex``, ``closed_tex``: LaTeX names substituted back and compared by the kernel)."""
    left, right = sympy.Symbol(layout_tex), sympy.Symbol(closed_tex)
    return statement(require_equal(label, layout, closed, show=(left, right),
                                   where={left: layout, right: closed}))


_CLOSED_TEX = r"H_{res} X + h_{post} F(X^{T} h_{pre})^{T}"
"""The spec's closed form as the published pages display it."""


def _sigmoid(x: sympy.Expr) -> sympy.Expr:
    return 1 / (1 + sympy.exp(-x))


def _gate(g: Gate, logit: sympy.Expr, eps: sympy.Expr) -> sympy.Expr:
    """The record's gate ``c·σ(logit) (+ ε)`` with ``c`` exact and the symbol ``eps`` standing
    for a declared (nonzero) eps."""
    if g.activation != "sigmoid":
        raise ProofFailure(f"gate activation {g.activation!r}: only σ is stated")
    value = sympy.nsimplify(g.multiplier) * _sigmoid(logit)
    return value + eps if g.eps else value


def _require_positive_sums(what: str, M: sympy.Matrix) -> None:
    """Every column sum of ``M`` is provably positive, so a step dividing by them is defined.

    Raises:
        ProofFailure: naming ``what`` and the first sum not provably positive.
    """
    for j in range(M.shape[1]):
        total = sum(M[:, j])
        if sympy.sympify(total).is_positive is not True:
            raise ProofFailure(f"{what}: {total} is not provably positive (a division by zero "
                               "is not excluded)")


@theorem(
    "published.deepseek_v4_step",
    "DeepSeek-V4's step X'_j = post_j·F(Σ_i pre_i X_i) + Σ_i comb[i, j] X_i, with "
    "pre = σ(·) + ε and post = 2σ(·), is the closed form with h_pre = pre, h_post = post and "
    "H_res = combᵀ; the last Sinkhorn–Knopp step (comb divided by its sums over axis −2) makes "
    "the rows of H_res = combᵀ sum to 1.",
    assumptions=("M ∈ R^{n×n} with positive entries",),
    setting=("pre, post logits a, b ∈ R^n; ε ≥ 0 (the identities hold for any ε); comb ∈ "
             "R^{n×n} any matrix (the Sinkhorn–Knopp output); the last step's denominator "
             "without ε",),
    cases="n = 2, d = 2: symbolic state, logits, comb and an arbitrary branch",
    generality="explicit sizes",
    source="DeepSeek-V4 (transformers 5.23.0 DeepseekV4HyperConnection and decoder layer; "
           "TileKernels mhc_pre / mhc_post); mHC arXiv:2512.24880 Eq. 3, 8",
)
def _deepseek_v4() -> list[Step]:
    X = symbol_matrix("X", N, D)
    a, b = symbol_vector("a", N), symbol_vector("b", N)
    eps = sympy.Symbol("epsilon", nonnegative=True)
    comb = symbol_matrix("c", N, N)
    record = DEEPSEEK_V4_FORMULA
    if not (record.transposed and record.sinkhorn.exact_axis == "columns"
            and record.h_pre.multiplier == 1 and record.h_pre.eps and not record.h_post.eps
            and record.h_post.multiplier == 2):
        raise ProofFailure(f"the statement (pre = σ(·) + ε, post = 2σ(·), H_res = combᵀ, the "
                           f"last step over axis −2) is not the record's: {record}")
    pre = a.applyfunc(lambda v: _gate(record.h_pre, v, eps))
    post = b.applyfunc(lambda v: _gate(record.h_post, v, eps))
    collapsed = sympy.Matrix([sum(pre[i] * X[i, k] for i in range(N)) for k in range(D)])
    z = _branch(collapsed)
    step = sympy.Matrix(N, D, lambda j, k: post[j] * z[k]
                        + sum(comb[i, j] * X[i, k] for i in range(N)))
    M = symbol_matrix("m", N, N, **granted("M ∈ R^{n×n} with positive entries", positive=True))
    _require_positive_sums("the last step's column sums", M)
    last = sympy.Matrix(N, N, lambda i, j: M[i, j] / sum(M[r, j] for r in range(N)))
    return [
        require_equal("the branch input Σ_i pre_i X_i is Xᵀ h_pre with h_pre = pre",
                      collapsed, X.T * pre),
        _equate("the step is H_res X + h_post F(Xᵀ h_pre)ᵀ with H_res = combᵀ, h_post = post",
                step, _closed_form(X, pre, post, comb.T),
                r"X'_{jk} = post_{j} F(\textstyle\sum_i pre_{i} X_{i})_{k} + "
                r"\textstyle\sum_i comb_{ij} X_{ik}", _CLOSED_TEX),
        require_equal("after the last step, H_res = combᵀ has unit row sums",
                      last.T * sympy.ones(N, 1), sympy.ones(N, 1)),
    ]


@theorem(
    "published.mhc_paper_step",
    "The mHC paper's step x_{l+1} = H_res x_l + H_postᵀ F(H_pre x_l) (Eq. 3, H_pre and H_post "
    "1×n rows) is the closed form with h_pre = H_preᵀ, h_post = H_postᵀ and H_res itself; a "
    "Sinkhorn–Knopp round (column then row normalisation, Eq. 9) leaves H_res with unit row "
    "sums.",
    assumptions=(
        "M ∈ R^{n×n} with positive entries (exp of the logits)",
    ),
    setting=(
        "H_pre, H_post ∈ R^{1×n}, H_res ∈ R^{n×n} any (Eq. 8 gives them)",
    ),
    cases="n = 2, d = 2: symbolic state and weights, an arbitrary branch",
    generality="explicit sizes",
    source="mHC arXiv:2512.24880 §4.2 Eq. 3, 5-9",
)
def _mhc_paper() -> list[Step]:
    X = symbol_matrix("X", N, D)
    H_pre, H_post = symbol_matrix("p", 1, N), symbol_matrix("q", 1, N)
    H_res = symbol_matrix("r", N, N)
    paper = H_res * X + H_post.T * _branch((H_pre * X).T).T
    M = symbol_matrix("m", N, N, **granted("M ∈ R^{n×n} with positive entries", positive=True))
    _require_positive_sums("the column step's sums", M)
    cols = sympy.Matrix(N, N, lambda i, j: M[i, j] / sum(M[r, j] for r in range(N)))
    _require_positive_sums("the row step's sums", cols.T)
    rows = sympy.Matrix(N, N, lambda i, j: cols[i, j] / sum(cols[i, c] for c in range(N)))
    return [
        _equate("Eq. 3 is H_res X + h_post F(Xᵀ h_pre)ᵀ with h_pre = H_preᵀ, h_post = H_postᵀ",
                paper, _closed_form(X, H_pre.T, H_post.T, H_res),
                r"H_{res} x_{l} + H_{post}^{T} F(H_{pre} x_{l})", _CLOSED_TEX),
        require_equal("a column-then-row round gives unit row sums",
                      rows * sympy.ones(N, 1), sympy.ones(N, 1)),
    ]


@theorem(
    "published.hc_static_step",
    "HC's step Ĥ = Bᵀ F(Hᵀ A_m)ᵀ + A_rᵀ H (Eq. 1-5, H the n×d state) is the closed form with "
    "h_pre = A_m, h_post = Bᵀ and H_res = A_rᵀ.",
    assumptions=(),
    setting=(
        "B ∈ R^{1×n}, A_m ∈ R^{n×1}, A_r ∈ R^{n×n} any",
    ),
    cases="n = 2, d = 2: symbolic state and weights, an arbitrary branch",
    generality="explicit sizes",
    source="HC arXiv:2409.19606 §2.2, Eq. 1-5",
)
def _hc_static() -> list[Step]:
    H = symbol_matrix("X", N, D)
    B, A_m, A_r = symbol_matrix("b", 1, N), symbol_matrix("a", N, 1), symbol_matrix("r", N, N)
    paper = B.T * _branch(H.T * A_m).T + A_r.T * H
    return [_equate("Ĥ = H_res H + h_post F(Hᵀ h_pre)ᵀ with h_pre = A_m, h_post = Bᵀ, "
                    "H_res = A_rᵀ", paper, _closed_form(H, A_m, B.T, A_r.T),
                    r"\hat{H} = B^{T} F(H^{T} A_{m})^{T} + A_{r}^{T} H",
                    r"H_{res} H + h_{post} F(H^{T} h_{pre})^{T}")]


@theorem(
    "published.hc_dynamic_step",
    "HC's dynamic step (Eq. 10-13) with B(H) = s_β tanh(H̄ W_β)ᵀ + B, A_m(H) = s_α tanh(H̄ W_m) "
    "+ A_m, A_r(H) = s_α tanh(H̄ W_r) + A_r is the closed form with h_pre = A_m(H), h_post = "
    "B(H)ᵀ, H_res = A_r(H)ᵀ; H_res[j, i] reads stream i only: s_α tanh(H̄_i · W_r[:, j]) + "
    "A_r[i, j].",
    assumptions=(),
    setting=(
        "H̄ = the per-stream LayerNorm of H (no affine, ε > 0); W_β, W_m ∈ R^{d×1}, "
        "W_r ∈ R^{d×n}; s_α, s_β ∈ R",
    ),
    cases="n = 2, d = 2: symbolic state and weights, an arbitrary branch",
    generality="explicit sizes",
    source="HC arXiv:2409.19606 §2.3, Eq. 10-13",
)
def _hc_dynamic() -> list[Step]:
    H = symbol_matrix("X", N, D)
    B, A_m, A_r = symbol_matrix("b", 1, N), symbol_matrix("a", N, 1), symbol_matrix("r", N, N)
    W_b, W_m, W_r = symbol_matrix("w", D, 1), symbol_matrix("u", D, 1), symbol_matrix("v", D, N)
    s_a, s_b = sympy.symbols("s_alpha s_beta", real=True)
    eps = sympy.Symbol("epsilon", positive=True)
    # the checkpoint layout, entry by entry in the paper's indexing (Eq. 10-13): H̄ is the
    # per-stream norm, B(H)_j = s_β tanh(H̄_j · W_β) + B_j, A_m(H)_i = s_α tanh(H̄_i · W_m) +
    # A_m,i, A_r(H)_ij = s_α tanh(H̄_i · W_r[:, j]) + A_r,ij; Ĥ_ik = B(H)_i F(x_in)_k +
    # Σ_j A_r(H)_ji H_jk with x_in = Σ_i A_m(H)_i H_i
    Hbar = [norms.layer_norm(H[i, :].T, eps) for i in range(N)]

    def dot(i: int, W: sympy.Matrix, col: int) -> sympy.Expr:
        return sum((Hbar[i][k] * W[k, col] for k in range(D)), sympy.Integer(0))

    B_x = [s_b * sympy.tanh(dot(j, W_b, 0)) + B[0, j] for j in range(N)]
    A_m_x = [s_a * sympy.tanh(dot(i, W_m, 0)) + A_m[i, 0] for i in range(N)]
    A_r_x = [[s_a * sympy.tanh(dot(i, W_r, j)) + A_r[i, j] for j in range(N)] for i in range(N)]
    z = _branch(sympy.Matrix([sum(A_m_x[i] * H[i, k] for i in range(N)) for k in range(D)]))
    layout = sympy.Matrix(N, D, lambda i, k: B_x[i] * z[k]
                          + sum(A_r_x[j][i] * H[j, k] for j in range(N)))
    # the spec's side: its own dynamic weights (dynamic.* theorems) in the closed form
    weights = dynamic_weights(H, network.ConnectionWeights(A_m, B.T, A_r.T), W_b, W_m, W_r,
                              s_a, s_b, eps)
    closed = _closed_form(H, weights.h_pre, weights.h_post, weights.H_res)
    return [
        _equate("Ĥ = H_res H + h_post F(Hᵀ h_pre)ᵀ with h_pre = A_m(H), h_post = B(H)ᵀ, "
                "H_res = A_r(H)ᵀ: the layout's step, entry by entry, against the spec's dynamic "
                "weights", layout, closed,
                r"\hat{H}_{ik} = B(H)_{i} F(\textstyle\sum_j A_{m}(H)_{j} H_{j})_{k} + "
                r"\textstyle\sum_j A_{r}(H)_{ji} H_{jk}",
                r"H_{res}(H) H + h_{post}(H) F(H^{T} h_{pre}(H))^{T}"),
        _equate("H_res[j, i] = s_α tanh(H̄_i · W_r[:, j]) + A_r[i, j]",
                weights.H_res, sympy.Matrix(N, N, lambda j, i: A_r_x[i][j]),
                r"H_{res}(H)", r"s_{\alpha} \tanh(\bar{H}_{i} \cdot W_{r}[:, j]) + A_{r}[i, j]"),
    ]
