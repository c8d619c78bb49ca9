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


@theorem(
    "linear.backward",
    "Y = X W + 1 bᵀ gives G_X = G_Y Wᵀ, G_W = Xᵀ G_Y, G_b = G_Yᵀ 1.",
    assumptions=("X: m×k (rows are samples), W: k×p, b ∈ R^p, L = Σ G_Y ∘ Y.",),
    cases="explicit (m, k, p) in {(1,2,3), (2,3,4), (3,1,2), (4,3,2), (2,2,2)}",
    generality="explicit sizes",
    source="chain rule (the linear maps inside an HC branch; HC arXiv:2409.19606 §2)",
)
def _linear_backward() -> list[Step]:
    steps: list[Step] = []
    for m, k, p in ((1, 2, 3), (2, 3, 4), (3, 1, 2), (4, 3, 2), (2, 2, 2)):
        X, W, G = symbol_matrix("X", m, k), symbol_matrix("W", k, p), symbol_matrix("G", m, p)
        b = symbol_vector("b", p)
        loss = frobenius_loss(G, X * W + sympy.ones(m, 1) * b.T)
        found = [
            require_equal(f"G_X, (m,k,p)=({m},{k},{p})", gradient(loss, X), G * W.T),
            require_equal(f"G_W, (m,k,p)=({m},{k},{p})", gradient(loss, W), X.T * G),
            require_equal(f"G_b, (m,k,p)=({m},{k},{p})", gradient(loss, b), G.T * sympy.ones(m, 1)),
        ]
        if (m, k, p) == (1, 2, 3):
            steps += found
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
    assumptions=("Conformable A, B, C, D; L = Σ G_Y ∘ Y.",),
    cases="explicit shapes 2×3·3×1·1×2·2×3 and all-square 2×2 (where the wrong order is "
          "well-shaped)",
    generality="explicit sizes",
    source="chain rule; (CD)ᵀ = DᵀCᵀ",
)
def _matmul_chain_backward() -> list[Step]:
    steps: list[Step] = []
    for dims in ((2, 3, 1, 2, 3), (2, 2, 2, 2, 2)):
        a, b, c, d, e = dims
        A, B = symbol_matrix("A", a, b), symbol_matrix("B", b, c)
        C, D, G = symbol_matrix("C", c, d), symbol_matrix("D", d, e), symbol_matrix("G", a, e)
        for name, (derived, closed) in _chain_gradients(A, B, C, D, G).items():
            step = require_equal(f"{name}, shapes {dims}", derived, closed)
            if name == "G_B" and dims == (2, 2, 2, 2, 2):
                steps.append(step)
        if dims == (2, 2, 2, 2, 2):
            wrong = A.T * G * C.T * D.T
            try:
                require_equal("wrong order Aᵀ G_Y Cᵀ Dᵀ", gradient(frobenius_loss(G, A * B * C * D),
                                                                   B), wrong)
            except ProofFailure:
                residual = (gradient(frobenius_loss(G, A * B * C * D), B) - wrong).applyfunc(
                    sympy.expand)
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
    assumptions=(
        "O: m×d (rows are tokens), W_up, W_g: d×f, W_down: f×d; φ an arbitrary differentiable "
        "elementwise function; L = Σ G_X ∘ X.",
    ),
    cases="explicit (m, d, f) in {(1,2,3), (2,3,2)}",
    generality="explicit sizes",
    source="chain rule on the FFN branch of an HC sublayer (HC arXiv:2409.19606 §2, App. I Alg. 3)",
)
def _ffn_backward() -> list[Step]:
    phi = sympy.Function("phi")
    steps: list[Step] = []
    for m, d, f in ((1, 2, 3), (2, 3, 2)):
        tokens, G = symbol_matrix("O", m, d), symbol_matrix("G", m, d)
        W_up, W_g, W_down = symbol_matrix("U", d, f), symbol_matrix("V", d, f), symbol_matrix(
            "D", f, d)
        Z = tokens * W_up
        H = Z.applyfunc(phi)
        loss = frobenius_loss(G, H * W_down)
        G_H = G * W_down.T
        G_Z = G_H.multiply_elementwise(Z.applyfunc(lambda z: derivative_at(phi, z)))
        found = [
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
        found.append(require_equal(
            f"G_O, gated FFN = gate branch + up branch, (m,d,f)=({m},{d},{f})",
            gradient(loss_gated, tokens), via_gate + via_up))
        if (m, d, f) == (1, 2, 3):
            steps += found[:1] + found[3:]
    return steps


@theorem(
    "residual.direct_term",
    "Y = X + F(X) gives G_X = J_Fᵀ G_Y + G_Y (per sample: g_x = J_Fᵀ g_y + g_y).",
    assumptions=("F: R^d → R^d arbitrary and differentiable, applied per sample (row).",),
    cases="explicit d in {1,2,3,4}",
    generality="explicit sizes",
    source="He et al. 2016 residual; mHC arXiv:2512.24880 §1 Eq. 1–2 (identity mapping)",
)
def _residual_direct_term() -> list[Step]:
    steps: list[Step] = []
    for d in (1, 2, 3, 4):
        x, g = symbol_vector("x", d), symbol_vector("g", d)
        F = generic_map("F", x, d)
        loss = frobenius_loss(g, x + F)
        step = require_equal(f"g_x, d={d}", gradient(loss, x), F.jacobian(x).T * g + g)
        if d == 2:
            steps.append(step)
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
    assumptions=("N, F: R^d → R^d arbitrary and differentiable (N a normalisation).",),
    cases="explicit d in {1,2,3}",
    generality="explicit sizes",
    source="HC arXiv:2409.19606 §1 (pre-norm avoids gradient vanishing) and §3.1 Eq. 15",
)
def _prenorm_direct_term() -> list[Step]:
    steps: list[Step] = []
    for d in (1, 2, 3):
        derived, g, through_branch = _prenorm_gradients(d)
        step = require_equal(f"g_x − g_y, d={d}", derived - g, through_branch)
        if d == 2:
            steps.append(step)
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
    assumptions=(
        "N, F: R^d → R^d arbitrary and differentiable for the general form.",
        "Counterexample: RMSNorm or LayerNorm (no affine, ε = 0), d = 2, x = (1, 2), F ≡ 0.",
    ),
    cases="general form: explicit d in {1,2,3}; counterexample: d = 2",
    generality="explicit sizes",
    source="HC arXiv:2409.19606 §1 (post-norm reintroduces gradient vanishing), App. G Eq. 35",
)
def _postnorm_no_bare_direct_term() -> list[Step]:
    steps: list[Step] = []
    for d in (1, 2, 3):
        derived, closed = _postnorm_gradient(d)
        step = require_equal(f"g_x, d={d}", derived, closed)
        if d == 2:
            steps.append(step)
    for name, norm in (("RMSNorm", norms.rms_norm), ("LayerNorm", norms.layer_norm)):
        vanished = bare_term_counterexample(norm)
        steps.append(require_true(
            f"{name}, F ≡ 0, x = g_y = (1, 2): g_x = J_Nᵀ g_y = 0 ≠ g_y",
            vanished == sympy.zeros(2, 1),
            sympy.Eq(sympy.Symbol("g_x"), vanished, evaluate=False)))
    x, g = symbol_vector("x", 2), symbol_vector("g", 2)
    steps.append(require_equal("contrast, pre-norm x + F(N(x)) with F ≡ 0: g_x = g_y",
                               gradient(frobenius_loss(g, x + sympy.zeros(2, 1)), x), g))
    return steps


@theorem(
    "residual.gradient_norm_not_preserved",
    "A residual connection keeps a direct gradient path but does not preserve the gradient "
    "norm: for y = x + F(x) with F(x) = −x/2, g_x = g_y / 2, so ‖g_x‖ = ‖g_y‖ / 2 (and F = x "
    "doubles it).",
    assumptions=("x, g_y ∈ R^d real; the two linear branches F(x) = −x/2 and F(x) = x.",),
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
        steps.append((f"{name}: differentiate L = g_yᵀ (x + F(x)) in x",
                      chain(r"g_x", derived, factor * g)))
    squared = sympy.Symbol(r"\|g_x\|^2")
    steps.append(("hence ‖g_x‖² = ‖g_y‖²/4 for the first branch: the direct path alone does "
                  "not make the norm lossless", sympy.Eq(squared, sympy.Symbol(r"\|g_y\|^2") / 4,
                                                          evaluate=False)))
    return steps
