"""Initialisation: static HC at init is a pre-norm network; dynamic HC at init is static HC.

Theorems: ``init.static_prenorm``, ``dynamic.init_equals_static``, ``dynamic.weights_bounded``.
Sources: HC arXiv:2409.19606 §2.3 Eq. 14, §2.2 Eq. 10–13, App. J Algorithm 2.
"""

from __future__ import annotations

import sympy

from hcspec.spec import formulas, network, norms
from hcspec.spec.checks import (
    chain,
    instantiate,
    require_equal,
    require_true,
    symbol_matrix,
    symbol_vector,
)
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import Given, hypothesis, prose
from hcspec.spec.theorems.duality import generic_branch, replicated_induction

D = 5  # feature size: never equal to n in {1, 2, 3, 4}
LAYERS = 6


@theorem(
    "init.static_prenorm",
    "With the static init h_pre = e_{k mod n}, H_res = I, h_post = 1 a stack of L sublayers equals "
    "the pre-norm residual network: every stream holds h_k = h_{k-1} + F_k(h_{k-1}) and the "
    "output 1ᵀ X_L = n h_Lᵀ, which a scale-invariant final norm maps to Norm(h_L).",
    assumptions=(),
    setting=(
        "X₀ = 1_n h₀ᵀ; F_k arbitrary sublayers (each with its own pre-norm inside).",
        "Final norm RMSNorm or LayerNorm without affine, ε = 0, for the last step.",
    ),
    cases="every L by induction, symbolic n, d (step X = 1hᵀ ⇒ X' = 1(h + F(h))ᵀ); examples: "
          "n in {1,2,3,4}, L up to 6, d = 5; final-norm step at d = 2; network.static_init equals "
          "Eq. 14 read in row form for k in {0..5}",
    generality="induction",
    source="HC arXiv:2409.19606 §2.3 Eq. 14, App. J Algorithm 2, §2.1 (row-sum output)",
)
def _init_static_prenorm() -> list[Step]:
    steps: list[Step] = replicated_induction(sympy.MatrixSymbol("e_k", formulas.n, 1))
    h0 = symbol_vector("h_0", D)
    for n in (1, 2, 3, 4):
        for k in range(LAYERS):
            paper = network.from_paper(eq14_matrix(n, k))
            ours = network.static_init(n, k)
            if (paper.h_pre, paper.h_post, paper.H_res) != (ours.h_pre, ours.h_post, ours.H_res):
                raise ProofFailure(f"network.static_init({n}, {k}) is not HC Eq. 14 read in row "
                                   f"form: {ours} vs {paper}")
        branches = [generic_branch(k) for k in range(1, LAYERS + 1)]
        weights = [network.static_init(n, k) for k in range(LAYERS)]
        trace = network.run_stack(network.replicate(h0, n), weights, branches)
        h = h0
        for k, branch in enumerate(branches, start=1):
            h = h + branch(h)
            step = require_equal(f"n={n}: every stream after sublayer {k} is h_{k}",
                                 trace.states[k], sympy.ones(n, 1) * h.T,
                                 show=(sympy.Symbol(f"X_{k}"), sympy.MatMul(
                                     sympy.Symbol(r"\mathbf{1}_n"), sympy.Symbol(f"h_{k}^T"))),
                                 where={sympy.Symbol(f"X_{k}"): trace.states[k],
                                        sympy.Symbol(r"\mathbf{1}_n"): sympy.ones(n, 1),
                                        sympy.Symbol(f"h_{k}^T"): h.T})
            if n == 2 and k in (1, LAYERS):
                steps.append(step)
        out = require_equal(f"n={n}: output 1ᵀ X_L = n h_Lᵀ", sympy.ones(1, n) * trace.states[-1],
                            n * h.T, show=(sympy.Symbol(r"\mathbf{1}^T X_L"),
                                           sympy.Mul(n, sympy.Symbol("h_L^T"))),
                            where={sympy.Symbol(r"\mathbf{1}^T X_L"):
                                   sympy.ones(1, n) * trace.states[-1],
                                   sympy.Symbol("h_L^T"): h.T})
        if n == 2:
            steps.append(out)
    x = symbol_vector("h", 2)
    c = sympy.Symbol("n", positive=True)
    for name, norm in (("RMSNorm", norms.rms_norm), ("LayerNorm", norms.layer_norm)):
        step = require_equal(f"the final {name} absorbs the factor n (d = 2)", norm(c * x), norm(x))
        if name == "RMSNorm":
            steps.append(step)
    return steps


def eq14_matrix(n: int, k: int) -> sympy.Matrix:
    """HC Eq. 14 for sublayer k (0-based): [[0, 1ᵀ], [e_{k mod n}, I_n]] ((n+1)×(n+1))."""
    return sympy.Matrix(sympy.BlockMatrix([
        [sympy.zeros(1, 1), sympy.ones(1, n)],
        [sympy.Matrix(n, 1, lambda i, _: 1 if i == k % n else 0), sympy.eye(n)],
    ]))


def dynamic_weights(
    X: sympy.Matrix,
    static: network.ConnectionWeights,
    W_beta: sympy.Matrix,
    W_m: sympy.Matrix,
    W_r: sympy.Matrix,
    s_alpha: sympy.Expr,
    s_beta: sympy.Expr,
    eps: sympy.Expr,
) -> network.ConnectionWeights:
    """DHC weights (HC Eq. 10–13) in row form for an n×d state X.

    X̄ = per-stream LayerNorm of X (no affine); h_post(X) = s_β tanh(X̄ W_β) + h_post,
    h_pre(X) = s_α tanh(X̄ W_m) + h_pre, A_r(X) = s_α tanh(X̄ W_r) + A_r with A_r = H_resᵀ, so
    H_res(X) = A_r(X)ᵀ. Shapes: W_β, W_m d×1; W_r d×n.
    """
    rows = [norms.layer_norm(X[i, :].T, eps).T for i in range(X.shape[0])]
    X_bar = sympy.Matrix.vstack(*rows)
    return network.ConnectionWeights(
        h_pre=s_alpha * (X_bar * W_m).applyfunc(sympy.tanh) + static.h_pre,
        h_post=s_beta * (X_bar * W_beta).applyfunc(sympy.tanh) + static.h_post,
        H_res=(s_alpha * (X_bar * W_r).applyfunc(sympy.tanh) + static.H_res.T).T,
    )


_X_IDX = sympy.IndexedBase("X", real=True)
_W_M, _W_BETA, _W_R = (sympy.IndexedBase(name, real=True) for name in ("m", "b", "r"))
_STATIC_PRE, _STATIC_POST, _STATIC_RES = (sympy.IndexedBase(name, real=True)
                                          for name in ("p", "q", "H"))
_I, _J, _K, _L, _M = sympy.symbols("i j k l m", integer=True, nonnegative=True)


def index_stream_norm(a: sympy.Expr, k: sympy.Expr, eps: sympy.Expr) -> sympy.Expr:
    """X̄_ak, the per-stream LayerNorm (no affine) in index form for symbolic d:
    (X_ak − μ_a) / sqrt(σ_a² + ε), μ_a = Σ_l X_al / d, σ_a² = Σ_m (X_am − μ_a)² / d."""
    d = formulas.d
    mu = sympy.Sum(_X_IDX[a, _L], (_L, 0, d - 1)) / d
    var = sympy.Sum((_X_IDX[a, _M] - mu) ** 2, (_M, 0, d - 1)) / d
    return (_X_IDX[a, k] - mu) / sympy.sqrt(var + eps)


def index_dynamic_weights(s_alpha: sympy.Expr, s_beta: sympy.Expr, eps: sympy.Expr, *,
                          named: bool = False) -> dict[str, sympy.Expr]:
    """HC Eq. 10–13 in index form for symbolic n, d (row form, H_res = A_rᵀ):
    h_pre,i = s_α tanh(Σ_k X̄_ik m_k) + p_i, h_post,i = s_β tanh(Σ_k X̄_ik b_k) + q_i,
    H_res,ij = s_α tanh(Σ_k X̄_jk r_ki) + H_ij; entries ``{name: expression in i (and j)}``
    (``named``: X̄_ak left as the name :data:`X_BAR`, for displays)."""
    d = formulas.d

    def proj(a: sympy.Expr, W: sympy.Expr) -> sympy.Sum:
        x_bar = X_BAR[a, _K] if named else index_stream_norm(a, _K, eps)
        return sympy.Sum(x_bar * W, (_K, 0, d - 1))

    return {
        "h_pre": s_alpha * sympy.tanh(proj(_I, _W_M[_K])) + _STATIC_PRE[_I],
        "h_post": s_beta * sympy.tanh(proj(_I, _W_BETA[_K])) + _STATIC_POST[_I],
        "H_res": s_alpha * sympy.tanh(proj(_J, _W_R[_K, _I])) + _STATIC_RES[_I, _J],
    }


X_BAR = sympy.IndexedBase(r"\bar{X}")
"""X̄ as a name, for displays: X̄_ak stands for :func:`index_stream_norm` (a, k)."""


def _at_zero_w(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with every entry of W_m, W_β, W_r set to 0."""
    return expr.replace(lambda e: isinstance(e, sympy.Indexed)
                        and e.base in (_W_M, _W_BETA, _W_R), lambda e: sympy.Integer(0))


def index_instance(expr: sympy.Expr, n: int, d: int, X: sympy.Matrix,
                   static: network.ConnectionWeights, W_beta: sympy.Matrix, W_m: sympy.Matrix,
                   W_r: sympy.Matrix) -> sympy.Matrix:
    """The index-form weight ``expr`` at explicit n, d with the explicit matrices put in: an
    n×1 column for h_pre / h_post (free index i), an n×n matrix for H_res (i, j)."""
    values = {_X_IDX: X, _W_M: W_m, _W_BETA: W_beta, _W_R: W_r, _STATIC_PRE: static.h_pre,
              _STATIC_POST: static.h_post, _STATIC_RES: static.H_res}
    entries = {base[(a, b) if base in (_X_IDX, _W_R, _STATIC_RES) else a]: matrix[a, b]
               for base, matrix in values.items()
               for a in range(matrix.shape[0]) for b in range(matrix.shape[1])}

    def unroll(total: sympy.Sum) -> sympy.Expr:
        index, low, high = total.limits[0]
        return sympy.Add(*(total.function.xreplace({index: v})
                           for v in range(int(low), int(high) + 1)))

    def entry(i: int, j: int) -> sympy.Expr:
        concrete = expr.xreplace({formulas.d: sympy.Integer(d), _I: i, _J: j})
        concrete = concrete.replace(lambda e: isinstance(e, sympy.Sum), unroll)
        return concrete.xreplace(entries)

    columns = n if _J in expr.free_symbols else 1
    return sympy.Matrix(n, columns, entry)


def _init_every_size(s_alpha: sympy.Expr, s_beta: sympy.Expr, eps: sympy.Expr) -> list[Step]:
    """W = 0 in index form, symbolic n, d: every projection Σ_k X̄_ik · 0 is 0 and tanh(0) = 0.

    Raises:
        ProofFailure: when a weight at W = 0 is not its static value.
    """
    weights = index_dynamic_weights(s_alpha, s_beta, eps)
    static = {"h_pre": _STATIC_PRE[_I], "h_post": _STATIC_POST[_I],
              "H_res": _STATIC_RES[_I, _J]}
    for name, expr in weights.items():
        if sympy.simplify(_at_zero_w(expr) - static[name]) != 0:
            raise ProofFailure(f"{name}(X) at W = 0 is {_at_zero_w(expr)}, not {static[name]}")
    pre = weights["h_pre"]
    zero = Given("W_β = W_m = W_r = 0", ((_W_M[_K], 0), (_W_BETA[_K], 0), (_W_R[_K, _I], 0),
                                        (_W_R[_K, _J], 0)))
    return [
        ("every n and d (index form of Eq. 10–13): at W_m = 0 each projection Σ_k X̄_ik W_m,k is "
         "0 and tanh(0) = 0, so h_pre(X) = h_pre for every X; h_post and H_res likewise",
         chain(index_dynamic_weights(s_alpha, s_beta, eps, named=True)["h_pre"],
               _at_zero_w(pre), using=[zero])),
        prose("so the DHC sublayer X' = H_res(X) X + h_post(X) F(Xᵀ h_pre(X))ᵀ is SHC's for "
              "every X and F: h_pre(X) = h_pre, h_post(X) = h_post, H_res(X) = H_res (the "
              "weights are the only difference)"),
    ]


def _bounded_every_size(s_alpha: sympy.Expr, s_beta: sympy.Expr, eps: sympy.Expr
                        ) -> list[Step]:
    """|w(X) − w| < |s| in index form, symbolic n, d: w(X) − w = s tanh(u) with u real (X̄ is
    real: σ² + ε > 0), and 1 − tanh²(u) = 4e^{2u}/(e^{2u} + 1)² > 0.

    Raises:
        ProofFailure: when a gap is not s·tanh(u) with u real, or 1 − tanh² is not positive.
    """
    weights = index_dynamic_weights(s_alpha, s_beta, eps)
    named = index_dynamic_weights(s_alpha, s_beta, eps, named=True)
    static = {"h_pre": (_STATIC_PRE[_I], s_alpha), "h_post": (_STATIC_POST[_I], s_beta),
              "H_res": (_STATIC_RES[_I, _J], s_alpha)}
    u = sympy.Symbol("u", real=True)
    steps: list[Step] = []
    for name, expr in weights.items():
        base, scale = static[name]
        ratio = (expr - base) / scale
        inner = [call.args[0] for call in ratio.atoms(sympy.tanh)]
        if len(inner) != 1 or ratio != sympy.tanh(inner[0]) or inner[0].is_real is not True:
            raise ProofFailure(f"{name}(X) − {name} is not {scale}·tanh(u) with u real: "
                               f"{ratio}")
        if name == "h_pre":
            gap = (named[name] - base) / scale
            u_named = next(call.args[0] for call in gap.atoms(sympy.tanh))
            steps.append(("every n and d: the gap to the static weight is s_α tanh(u), "
                          "u = Σ_k X̄_ik W_m,k real (σ² + ε > 0)",
                          chain(sympy.Symbol(r"\frac{h_{pre}(X)_i - h_{pre,i}}{s_\alpha}"),
                                gap, sympy.tanh(u_named))))
            steps.append(prose("where X̄_ik = (X_ik − μ_i)/√(σ_i² + ε) is the per-stream "
                               "LayerNorm, real because σ² + ε > 0 (checked: u is real)"))
    sech = sympy.simplify((1 - sympy.tanh(u) ** 2).rewrite(sympy.exp))
    if sech.is_positive is not True:
        raise ProofFailure(f"1 − tanh²(u) = {sech} is not provably positive")
    steps.append(("and |tanh(u)| < 1 for real u, so |w(X) − w| = |s| |tanh(u)| < |s| for every "
                  "X and W (s ≠ 0)", chain(1 - sympy.tanh(u) ** 2, sech)))
    return steps


@theorem(
    "dynamic.init_equals_static",
    "DHC with W_β = W_m = W_r = 0 has h_pre(X) = h_pre, h_post(X) = h_post, H_res(X) = H_res for "
    "every X and every s_α, s_β (in particular the init 0.01), so its sublayer equals SHC's.",
    assumptions=(),
    setting=(
        "DHC per HC Eq. 10–13 with X̄ = per-stream LayerNorm (no affine, ε > 0), one s_α shared by "
        "A_m and A_r; the static part arbitrary (symbol matrices).",
        "The branch F is arbitrary.",
    ),
    cases="symbolic n, d in index form (each projection Σ_k X̄_ik W_k vanishes at W = 0); "
          "examples: explicit n in {1,2,3,4} × d in {1,2,3}",
    generality="all sizes",
    source="HC arXiv:2409.19606 §2.2 Eq. 10–13, §2.3 (W initialised to 0), App. J Algorithm 2",
)
def _dynamic_init_equals_static() -> list[Step]:
    s_alpha, s_beta = sympy.symbols("s_alpha s_beta", real=True)
    eps = sympy.Symbol("epsilon", positive=True)
    steps: list[Step] = _init_every_size(s_alpha, s_beta, eps)
    for n in (1, 2, 3, 4):
        for d in (1, 2, 3):
            X = symbol_matrix("X", n, d)
            static = network.ConnectionWeights(symbol_vector("p", n), symbol_vector("q", n),
                                               symbol_matrix("H", n, n))
            dyn = dynamic_weights(X, static, sympy.zeros(d, 1), sympy.zeros(d, 1),
                                  sympy.zeros(d, n), s_alpha, s_beta, eps)
            read_step = None
            for name in ("h_pre", "h_post", "H_res"):
                weight_step = require_equal(f"{name}(X) at W = 0, n={n}, d={d}",
                                            getattr(dyn, name), getattr(static, name))
                read_step = weight_step if name == "h_pre" else read_step
            c = formulas.connection_symbols(n, d)
            branch = generic_branch(0)
            outputs = []
            for w in (dyn, static):
                x_in = instantiate(formulas.aggregate(c), {c.X: X, c.h_pre: w.h_pre})
                outputs.append(instantiate(formulas.forward(c), {
                    c.X: X, c.h_post: w.h_post, c.H_res: w.H_res, c.z: branch(x_in)}))
            step = require_equal(f"DHC sublayer = SHC sublayer at W = 0, n={n}, d={d}", *outputs)
            if (n, d) == (2, 1):
                assert read_step is not None
                steps.append(("example, n = 2, d = 1: the dynamic read weights at W_m = 0",
                              read_step[1]))
                steps.append(("example, " + step[0], step[1]))
    return steps


@theorem(
    "dynamic.weights_bounded",
    "For every state X and every W_β, W_m, W_r, the DHC weights stay within |s| of the static "
    "ones entrywise (|h_pre(X) − h_pre| < |s_α|, |h_post(X) − h_post| < |s_β|, "
    "|H_res(X) − H_res| < |s_α|: tanh lies in (−1, 1)), and each entry is HC Eq. 10–13 written "
    "index by index.",
    assumptions=("The norm X̄ uses ε > 0.",),
    setting=(
        "DHC per HC Eq. 10–13 as dynamic.init_equals_static; X̄_i = LayerNorm(X_i) per stream.",
        "Index form: h_pre,i = s_α tanh(Σ_k X̄_ik W_m,k) + A_m,i; h_post,i = s_β tanh(Σ_k X̄_ik "
        "W_β,k) + B_i; A_r,ij = s_α tanh(Σ_k X̄_ik W_r,kj) + A_r,ij (static), H_res = A_rᵀ.",
    ),
    cases="bound for symbolic n, d in index form (|tanh| < 1 on real arguments); the index "
          "form equals the explicit DHC weights at n in {1,2,3} × d in {1,2} (symbolic W); "
          "numeric example at 3 random points with large W (entries up to ±10), n = 3, d = 2",
    generality="all sizes",
    source="HC arXiv:2409.19606 §2.2 Eq. 10–13",
)
def _dynamic_weights_bounded() -> list[Step]:
    import random

    s_alpha, s_beta = sympy.symbols("s_alpha s_beta", real=True)
    eps = hypothesis("ε > 0", "epsilon", weaker={"real": True}, positive=True)
    steps: list[Step] = _bounded_every_size(s_alpha, s_beta, eps)
    symbolic = index_dynamic_weights(s_alpha, s_beta, eps)
    for n in (1, 2, 3):
        for d in (1, 2):
            X = symbol_matrix("X", n, d)
            static = network.ConnectionWeights(symbol_vector("p", n), symbol_vector("q", n),
                                               symbol_matrix("H", n, n))
            W_beta, W_m, W_r = symbol_vector("b", d), symbol_vector("m", d), symbol_matrix(
                "r", d, n)
            dyn = dynamic_weights(X, static, W_beta, W_m, W_r, s_alpha, s_beta, eps)
            for name, expr in symbolic.items():
                expected = index_instance(expr, n, d, X, static, W_beta, W_m, W_r)
                step = require_equal(f"{name}(X) is the index form of Eq. 10–13 at n={n}, d={d}",
                                     getattr(dyn, name), expected)
                if (n, d, name) == (2, 1, "h_pre"):
                    steps.append(("example, " + step[0], step[1]))
    rng = random.Random(3)
    n, d = 3, 2
    X = symbol_matrix("X", n, d)
    static = network.ConnectionWeights(symbol_vector("p", n), symbol_vector("q", n),
                                       symbol_matrix("H", n, n))
    worst = sympy.Integer(0)
    for _ in range(3):
        W_beta, W_m, W_r = (sympy.Matrix(d, c, lambda *_: sympy.Float(rng.uniform(-10, 10), 20))
                            for c in (1, 1, n))
        dyn = dynamic_weights(X, static, W_beta, W_m, W_r, s_alpha, s_beta, sympy.Float(1e-5))
        point = {x: sympy.Float(rng.uniform(-2, 2), 20) for x in X}
        point.update({s_alpha: sympy.Float(0.5), s_beta: sympy.Float(0.25)})
        for name, scale in (("h_pre", 0.5), ("h_post", 0.25), ("H_res", 0.5)):
            gap = (getattr(dyn, name) - getattr(static, name)).xreplace(point).evalf(20)
            ratio = max(abs(g) for g in gap) / sympy.Float(scale)
            if not ratio < 1:
                raise ProofFailure(f"{name}(X) moved {ratio} × |s| from the static weight at "
                                   "W ≠ 0: the weights are not s·tanh(·) + static")
            worst = max(worst, ratio)
    ratio_name = sympy.Symbol(r"\max |w(X) - w| / |s|")
    steps.append(require_true("at W ≠ 0 (entries up to ±10) every weight stays within |s| of "
                              f"the static one (largest |gap|/|s| = {float(worst):.6f})",
                              bool(worst < 1), sympy.StrictLessThan(ratio_name, 1),
                              where={ratio_name: worst}))
    return steps
