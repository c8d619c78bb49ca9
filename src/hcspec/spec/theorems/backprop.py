"""The backprop facts the HC backward rests on (rows are samples/tokens, gradients have the shape
of their variable, the loss is a Frobenius inner product L = Σ G_Y ∘ Y).

Theorems: ``linear.backward``, ``matmul_chain.backward``, ``ffn.backward``,
``residual.direct_term``, ``prenorm.direct_term``, ``postnorm.no_bare_direct_term``.
Sources: the chain rule; HC arXiv:2409.19606 §1 and App. G (pre-/post-norm and gradient
vanishing); mHC arXiv:2512.24880 §1 Eq. 1–2 (identity mapping of the residual).
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from hcspec.spec import norms
from hcspec.spec.checks import chain, require_equal, require_true, symbol_matrix, symbol_vector
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import prose


def frobenius_loss(upstream: sympy.Matrix, output: sympy.Matrix) -> sympy.Expr:
    """L = Σ_ij G_ij Y_ij, whose gradient with respect to Y is G (any shape)."""
    if upstream.shape != output.shape:
        raise ValueError(f"upstream gradient shape {upstream.shape} != output shape {output.shape}")
    return sum(upstream.multiply_elementwise(output), sympy.Integer(0))


def gradient(loss: sympy.Expr, variable: sympy.Matrix) -> sympy.Matrix:
    """∂L/∂V entrywise: a matrix of the same shape as ``variable``."""
    return variable.applyfunc(lambda entry: sympy.diff(loss, entry))


def generic_map(name: str, inputs: sympy.Matrix, size: int) -> sympy.Matrix:
    """An arbitrary differentiable map R^k → R^size: undefined functions ``name_i(inputs...)``."""
    return sympy.Matrix(size, 1, lambda i, _: sympy.Function(f"{name}_{i}")(*inputs))


def derivative_at(phi: sympy.Function, point: sympy.Expr) -> sympy.Expr:
    """φ'(point) for an undefined one-argument function φ."""
    t = sympy.Dummy("t")
    return sympy.diff(phi(t), t).subs(t, point)


M_ROWS, K_IN, P_OUT = sympy.symbols("m k p", integer=True, positive=True)


def matrix_gradient(label: str, loss: sympy.Expr, variable: sympy.MatrixSymbol,
                    closed: sympy.MatrixExpr) -> Step:
    """∂loss/∂variable by sympy's matrix calculus (symbolic sizes), required equal to ``closed``
    (exactly, after a numeric gate at explicit sizes); the step shows the differentiation."""
    derived = loss.diff(variable)
    require_equal(label, derived, closed)
    return (label, chain(sympy.Symbol(r"\frac{\partial L}{\partial " + sympy.latex(variable)
                                      + "}"), derived, closed))


@theorem(
    "linear.backward",
    "Y = X W + 1 bᵀ gives G_X = G_Y Wᵀ, G_W = Xᵀ G_Y, G_b = G_Yᵀ 1.",
    assumptions=(),
    setting=(
        "X: m×k (rows are samples), W: k×p, b ∈ R^p, L = Σ G_Y ∘ Y = tr(G_Yᵀ Y).",
    ),
    cases="symbolic m, k, p (matrix calculus on tr(G_Yᵀ Y)); examples entry by entry at "
          "(m, k, p) in {(1,2,3), (3,1,2), (2,2,2)}",
    generality="all sizes",
    source="chain rule (the linear maps inside an HC branch; HC arXiv:2409.19606 §2)",
)
def _linear_backward() -> list[Step]:
    X, W = sympy.MatrixSymbol("X", M_ROWS, K_IN), sympy.MatrixSymbol("W", K_IN, P_OUT)
    G, b = sympy.MatrixSymbol("G_Y", M_ROWS, P_OUT), sympy.MatrixSymbol("b", P_OUT, 1)
    one = sympy.MatrixSymbol(r"\mathbf{1}", M_ROWS, 1)
    loss = sympy.Trace(G.T * (X * W + one * b.T))
    steps: list[Step] = [
        prose("every m, k, p: the loss is the trace L = tr(G_Yᵀ (X W + 1 bᵀ))"),
        matrix_gradient("G_X, symbolic m, k, p", loss, X, G * W.T),
        matrix_gradient("G_W, symbolic m, k, p", loss, W, X.T * G),
        matrix_gradient("G_b, symbolic m, k, p", loss, b, G.T * one),
    ]
    for m, k, p in ((1, 2, 3), (3, 1, 2), (2, 2, 2)):
        Xe, We, Ge = symbol_matrix("X", m, k), symbol_matrix("W", k, p), symbol_matrix("G", m, p)
        be = symbol_vector("b", p)
        entry_loss = frobenius_loss(Ge, Xe * We + sympy.ones(m, 1) * be.T)
        require_equal(f"G_X, (m,k,p)=({m},{k},{p})", gradient(entry_loss, Xe), Ge * We.T)
        require_equal(f"G_W, (m,k,p)=({m},{k},{p})", gradient(entry_loss, We), Xe.T * Ge)
        require_equal(f"G_b, (m,k,p)=({m},{k},{p})", gradient(entry_loss, be),
                      Ge.T * sympy.ones(m, 1))
    return steps


def _chain_gradients(
    A: sympy.Matrix, B: sympy.Matrix, C: sympy.Matrix, D: sympy.Matrix, G: sympy.Matrix
) -> dict[str, tuple[sympy.Matrix, sympy.Matrix]]:
    loss = frobenius_loss(G, A * B * C * D)
    return {
        "G_A": (gradient(loss, A), G * (B * C * D).T),
        "G_B": (gradient(loss, B), A.T * G * D.T * C.T),
        "G_C": (gradient(loss, C), (A * B).T * G * D.T),
        "G_D": (gradient(loss, D), (A * B * C).T * G),
    }


@theorem(
    "matmul_chain.backward",
    "Y = ABCD gives G_B = Aᵀ G_Y (CD)ᵀ = Aᵀ G_Y Dᵀ Cᵀ (and G_A, G_C, G_D likewise); the wrong "
    "order Aᵀ G_Y Cᵀ Dᵀ is rejected even when the shapes allow it.",
    assumptions=(),
    setting=(
        "Conformable A, B, C, D; L = Σ G_Y ∘ Y = tr(G_Yᵀ Y).",
    ),
    cases="symbolic shapes a×b·b×c·c×e·e×f (matrix calculus on tr(G_Yᵀ ABCD)); example entry by "
          "entry at all-square 2×2, where the wrong order is well-shaped and rejected",
    generality="all sizes",
    source="chain rule; (CD)ᵀ = DᵀCᵀ",
)
def _matmul_chain_backward() -> list[Step]:
    a, b, c, e, f = sympy.symbols("a b c e f", integer=True, positive=True)
    A, B = sympy.MatrixSymbol("A", a, b), sympy.MatrixSymbol("B", b, c)
    C, D = sympy.MatrixSymbol("C", c, e), sympy.MatrixSymbol("D", e, f)
    G = sympy.MatrixSymbol("G_Y", a, f)
    loss = sympy.Trace(G.T * A * B * C * D)
    steps: list[Step] = []
    for name, variable, closed in (("G_A", A, G * (B * C * D).T), ("G_B", B, A.T * G * (C * D).T),
                                   ("G_C", C, (A * B).T * G * D.T),
                                   ("G_D", D, (A * B * C).T * G)):
        step = matrix_gradient(f"{name}, symbolic shapes", loss, variable, closed)
        if name == "G_B":
            steps.append(step)
    for dims in ((2, 2, 2, 2, 2),):
        p, q, r, s_, t = dims
        Ae, Be = symbol_matrix("A", p, q), symbol_matrix("B", q, r)
        Ce, De, Ge = symbol_matrix("C", r, s_), symbol_matrix("D", s_, t), symbol_matrix("G", p, t)
        for name, (derived, closed) in _chain_gradients(Ae, Be, Ce, De, Ge).items():
            require_equal(f"{name}, shapes {dims}", derived, closed)
        if dims == (2, 2, 2, 2, 2):
            wrong = Ae.T * Ge * Ce.T * De.T
            residual = (gradient(frobenius_loss(Ge, Ae * Be * Ce * De), Be) - wrong).applyfunc(
                sympy.expand)
            try:
                require_equal("wrong order Aᵀ G_Y Cᵀ Dᵀ", residual, sympy.zeros(2, 2))
            except ProofFailure:
                steps.append(require_true(
                    "the wrong order Aᵀ G_Y Cᵀ Dᵀ is well-shaped at 2×2 but its residual is a "
                    "non-zero polynomial (entry (0,0) shown)",
                    residual[0, 0] != 0,
                    sympy.Ne(residual[0, 0], 0, evaluate=False)))
            else:
                raise ProofFailure("the wrong order Aᵀ G_Y Cᵀ Dᵀ was accepted")
    return steps


@theorem(
    "ffn.backward",
    "Z = O W_up, H = φ(Z), X = H W_down give G_H = G_X W_downᵀ, G_Z = G_H ⊙ φ'(Z), "
    "G_O = G_Z W_upᵀ; gated (SwiGLU-style) H = φ(O W_g) ⊙ (O W_up): the two branches add at O.",
    assumptions=(),
    setting=(
        "O: m×d (rows are tokens), W_up, W_g: d×f, W_down: f×d; φ an arbitrary differentiable "
        "elementwise function; L = Σ G_X ∘ X.",
    ),
    cases="symbolic m, d, f: composed from the linear steps (matrix calculus, the two paths into "
          "O add) and the entrywise steps (one scalar chain rule per entry, independent of the "
          "sizes); example end to end, entry by entry, at (m, d, f) = (1, 2, 3)",
    generality="all sizes",
    source="chain rule on the FFN branch of an HC sublayer (HC arXiv:2409.19606 §2, App. I Alg. 3)",
)
def _ffn_backward() -> list[Step]:
    phi = sympy.Function("phi")
    steps: list[Step] = _ffn_every_size(phi)
    for m, d, f in ((1, 2, 3),):
        tokens, G = symbol_matrix("O", m, d), symbol_matrix("G", m, d)
        W_up, W_g, W_down = symbol_matrix("U", d, f), symbol_matrix("V", d, f), symbol_matrix(
            "D", f, d)
        Z = tokens * W_up
        H = Z.applyfunc(phi)
        loss = frobenius_loss(G, H * W_down)
        G_H = G * W_down.T
        G_Z = G_H.multiply_elementwise(Z.applyfunc(lambda z: derivative_at(phi, z)))
        checks = [
            require_equal(f"G_O, plain FFN, (m,d,f)=({m},{d},{f})", gradient(loss, tokens),
                          G_Z * W_up.T),
            require_equal(f"G_W_down, (m,d,f)=({m},{d},{f})", gradient(loss, W_down), H.T * G),
            require_equal(f"G_W_up, (m,d,f)=({m},{d},{f})", gradient(loss, W_up), tokens.T * G_Z),
        ]
        Z_g, U = tokens * W_g, tokens * W_up
        gated = Z_g.applyfunc(phi).multiply_elementwise(U)
        loss_gated = frobenius_loss(G, gated * W_down)
        G_Hg = G * W_down.T
        via_gate = G_Hg.multiply_elementwise(U).multiply_elementwise(
            Z_g.applyfunc(lambda z: derivative_at(phi, z))) * W_g.T
        via_up = G_Hg.multiply_elementwise(Z_g.applyfunc(phi)) * W_up.T
        checks.append(require_equal(
            f"G_O, gated FFN = gate branch + up branch, (m,d,f)=({m},{d},{f})",
            gradient(loss_gated, tokens), via_gate + via_up))
        del checks  # every check raised if it failed; the symbolic steps are displayed
    return steps


def _ffn_every_size(phi: sympy.Function) -> list[Step]:
    """The FFN backward for symbolic m, d, f as a composition: each linear map's backward by
    matrix calculus on a trace, each entrywise map's backward by a scalar chain rule (entry (a, c)
    of φ(Z) depends on Z_ac alone, so the same one-variable identity holds at every entry)."""
    m, d, f = sympy.symbols("m d f", integer=True, positive=True)
    tokens = sympy.MatrixSymbol("O", m, d)
    W_up, W_g, W_down = (sympy.MatrixSymbol(name, rows, cols) for name, rows, cols in
                         (("W_up", d, f), ("W_g", d, f), ("W_down", f, d)))
    H, G_X = sympy.MatrixSymbol("H", m, f), sympy.MatrixSymbol("G_X", m, d)
    G_Z, G_U = sympy.MatrixSymbol("G_Z", m, f), sympy.MatrixSymbol("G_U", m, f)
    steps = [
        matrix_gradient("down projection X = H W_down, symbolic m, d, f",
                        sympy.Trace(G_X.T * H * W_down), H, G_X * W_down.T),
        matrix_gradient("up projection Z = O W_up, symbolic m, d, f",
                        sympy.Trace(G_Z.T * tokens * W_up), tokens, G_Z * W_up.T),
        matrix_gradient("gated: O feeds Z_g = O W_g and U = O W_up; the two paths add, symbolic "
                        "m, d, f", sympy.Trace(G_Z.T * tokens * W_g + G_U.T * tokens * W_up),
                        tokens, G_Z * W_g.T + G_U * W_up.T),
    ]
    z, u, g = sympy.symbols("z u g", real=True)
    ell = sympy.Function("ell")
    for label, loss, variable, closed in (
            ("entrywise H_ac = φ(Z_ac): G_Z = G_H ⊙ φ'(Z)", ell(phi(z)), z,
             derivative_at(ell, phi(z)) * derivative_at(phi, z)),
            ("gated entry H_ac = φ(Zg_ac) U_ac: G_Zg = G_H ⊙ U ⊙ φ'(Z_g)", g * phi(z) * u, z,
             g * u * derivative_at(phi, z)),
            ("gated entry H_ac = φ(Zg_ac) U_ac: G_U = G_H ⊙ φ(Z_g)", g * phi(z) * u, u,
             g * phi(z))):
        # left unevaluated: the kernel evaluates the derivative (sympy's chain rule would build
        # the closed form itself, a step true by construction)
        derived = sympy.Derivative(loss, variable)
        require_equal(label, derived, closed)
        steps.append((label + " (one entry; L depends on it only through H_ac)",
                      chain(sympy.Derivative(loss, variable), closed)))
    return steps


def linearised_gradient(label: str, output: Callable[[sympy.MatrixSymbol], sympy.MatrixExpr],
                        closed: Callable[[sympy.MatrixSymbol], sympy.MatrixExpr]) -> Step:
    """g_x for symbolic d by matrix calculus: at a point, each map enters the gradient only
    through its Jacobian there (chain rule: the Jacobian of a composition is the product), so
    each map is replaced by its Jacobian acting linearly; ``output(x)`` builds the linearised
    output, L = g_yᵀ output(x), and the derived gradient must equal ``closed(g_y)``."""
    x = sympy.MatrixSymbol("x", D_ANY, 1)
    g = sympy.MatrixSymbol("g_y", D_ANY, 1)
    loss = sympy.Trace(g.T * output(x))
    derived = loss.diff(x)
    require_equal(label, derived, closed(g))
    return (label, chain(sympy.Symbol(r"g_x = \frac{\partial}{\partial x} "
                                      + sympy.latex(loss)), derived, closed(g)))


D_ANY = sympy.Symbol("d", integer=True, positive=True)
J_F = sympy.MatrixSymbol("J_F", D_ANY, D_ANY)
J_N = sympy.MatrixSymbol("J_N", D_ANY, D_ANY)


@theorem(
    "residual.direct_term",
    "Y = X + F(X) gives G_X = J_Fᵀ G_Y + G_Y (per sample: g_x = J_Fᵀ g_y + g_y).",
    assumptions=(),
    setting=(
        "F: R^d → R^d arbitrary and differentiable, applied per sample (row).",
    ),
    cases="symbolic d (matrix calculus, F entering through its Jacobian J_F at the point); "
          "examples with an arbitrary F (undefined functions) at d in {1,2,3,4}",
    generality="all sizes",
    source="He et al. 2016 residual; mHC arXiv:2512.24880 §1 Eq. 1–2 (identity mapping)",
)
def _residual_direct_term() -> list[Step]:
    steps: list[Step] = [linearised_gradient("every d: y = x + F(x)", lambda x: x + J_F * x,
                                             lambda g: J_F.T * g + g)]
    for d in (1, 2, 3, 4):
        x, g = symbol_vector("x", d), symbol_vector("g", d)
        F = generic_map("F", x, d)
        loss = frobenius_loss(g, x + F)
        require_equal(f"g_x, d={d}", gradient(loss, x), F.jacobian(x).T * g + g)
    return steps


def _prenorm_gradients(d: int) -> tuple[sympy.Matrix, sympy.Matrix, sympy.Matrix]:
    x, g, u = symbol_vector("x", d), symbol_vector("g", d), symbol_vector("u", d)
    N = generic_map("N", x, d)
    F_of_u = generic_map("F", u, d)
    at_N = dict(zip(u, N, strict=True))
    J_F = F_of_u.jacobian(u).subs(at_N)
    J_N = N.jacobian(x)
    derived = gradient(frobenius_loss(g, x + F_of_u.subs(at_N)), x)
    return derived, g, J_N.T * J_F.T * g


@theorem(
    "prenorm.direct_term",
    "Pre-norm y = x + F(N(x)) gives g_x = g_y + J_Nᵀ J_Fᵀ g_y: the bare g_y term survives.",
    assumptions=(),
    setting=(
        "N, F: R^d → R^d arbitrary and differentiable (N a normalisation).",
    ),
    cases="symbolic d (matrix calculus, N and F entering through their Jacobians, J_{F∘N} = "
          "J_F J_N); examples with arbitrary N, F (undefined functions) at d in {1,2}",
    generality="all sizes",
    source="HC arXiv:2409.19606 §1 (pre-norm avoids gradient vanishing) and §3.1 Eq. 15",
)
def _prenorm_direct_term() -> list[Step]:
    steps: list[Step] = [linearised_gradient("every d: y = x + F(N(x))",
                                             lambda x: x + J_F * J_N * x,
                                             lambda g: g + J_N.T * J_F.T * g)]
    for d in (1, 2):
        derived, g, through_branch = _prenorm_gradients(d)
        require_equal(f"g_x − g_y, d={d}", derived - g, through_branch)
    return steps


def _postnorm_gradient(d: int) -> tuple[sympy.Matrix, sympy.Matrix]:
    x, g, v = symbol_vector("x", d), symbol_vector("g", d), symbol_vector("v", d)
    F = generic_map("F", x, d)
    N_of_v = generic_map("N", v, d)
    at_sum = dict(zip(v, x + F, strict=True))
    J_N = N_of_v.jacobian(v).subs(at_sum)
    derived = gradient(frobenius_loss(g, N_of_v.subs(at_sum)), x)
    return derived, (sympy.eye(d) + F.jacobian(x)).T * J_N.T * g


def bare_term_counterexample(norm: Callable[[sympy.Matrix], sympy.Matrix]) -> sympy.Matrix:
    """Post-norm gradient g_x at x = (1, 2), F ≡ 0, g_y = x: returns J_Nᵀ x (exactly 0)."""
    x = sympy.Matrix([1, 2])
    xs = symbol_vector("x", 2)
    J_N = norm(xs).jacobian(xs).subs(dict(zip(xs, x, strict=True)))
    return sympy.simplify(J_N.T * x)


@theorem(
    "postnorm.no_bare_direct_term",
    "Post-norm y = N(x + F(x)) gives g_x = (I + J_F)ᵀ J_Nᵀ g_y: every path passes J_N, and with "
    "F ≡ 0 and g_y = x the gradient vanishes (no bare g_y term).",
    assumptions=(),
    setting=(
        "N, F: R^d → R^d arbitrary and differentiable for the general form.",
        "Counterexample: RMSNorm or LayerNorm (no affine, ε = 0), d = 2, x = (1, 2), F ≡ 0.",
    ),
    cases="general form: symbolic d (matrix calculus, N and F entering through their "
          "Jacobians), examples with arbitrary N, F at d in {1,2}; counterexample: d = 2",
    generality="all sizes",
    source="HC arXiv:2409.19606 §1 (post-norm reintroduces gradient vanishing), App. G Eq. 35",
)
def _postnorm_no_bare_direct_term() -> list[Step]:
    steps: list[Step] = [linearised_gradient("every d: y = N(x + F(x))",
                                             lambda x: J_N * (x + J_F * x),
                                             lambda g: (sympy.Identity(D_ANY) + J_F).T * J_N.T * g)]
    for d in (1, 2):
        derived, closed = _postnorm_gradient(d)
        require_equal(f"g_x, d={d}", derived, closed)
    for name, norm in (("RMSNorm", norms.rms_norm), ("LayerNorm", norms.layer_norm)):
        vanished = bare_term_counterexample(norm)
        steps.append(require_true(
            f"{name}, F ≡ 0, x = g_y = (1, 2): g_x = J_Nᵀ g_y = 0 ≠ g_y",
            vanished == sympy.zeros(2, 1),
            sympy.Eq(sympy.Symbol("g_x"), sympy.zeros(2, 1), evaluate=False),
            where={sympy.Symbol("g_x"): vanished}))
    x, g = symbol_vector("x", 2), symbol_vector("g", 2)
    steps.append(require_equal("contrast, pre-norm x + F(N(x)) with F ≡ 0: g_x = g_y",
                               gradient(frobenius_loss(g, x + sympy.zeros(2, 1)), x), g))
    return steps


@theorem(
    "residual.gradient_norm_not_preserved",
    "A residual connection keeps a direct gradient path but does not preserve the gradient "
    "norm: for y = x + F(x) with F(x) = −x/2, g_x = g_y / 2, so ‖g_x‖ = ‖g_y‖ / 2 (and F = x "
    "doubles it).",
    assumptions=(),
    setting=("x, g_y ∈ R^d; the two linear branches F(x) = −x/2 and F(x) = x (the identities "
             "are algebraic: they need no sign or realness).",),
    cases="symbolic d (MatrixSymbol algebra)",
    generality="all sizes",
    source="HC arXiv:2409.19606 §1 (residuals ease gradient vanishing); the seeds' remark that "
           "they do not guarantee a lossless gradient norm",
)
def _residual_gradient_norm() -> list[Step]:
    d = sympy.Symbol("d", integer=True, positive=True)
    x, g = sympy.MatrixSymbol("x", d, 1), sympy.MatrixSymbol("g_y", d, 1)
    steps: list[Step] = []
    for name, branch, factor in (("F(x) = −x/2", -x / 2, sympy.Rational(1, 2)),
                                 ("F(x) = x", x, sympy.Integer(2))):
        loss = sympy.Trace(g.T * (x + branch))
        derived = loss.diff(x)
        require_equal(f"{name}: g_x = {factor} g_y, symbolic d", derived, factor * g)
        steps.append((f"{name}, every d: differentiate L = g_yᵀ (x + F(x)) in x",
                      chain(r"g_x", derived, factor * g)))
    half = sympy.Rational(1, 2) * g
    steps.append(("hence ‖g_x‖² = ‖g_y‖²/4 for the first branch: the direct path alone does "
                  "not make the norm lossless", chain(r"\|g_x\|^2", half.T * half,
                                                      (g.T * g) / 4)))
    return steps
