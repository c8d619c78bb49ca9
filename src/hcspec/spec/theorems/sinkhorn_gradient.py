"""The gradient of the Sinkhorn–Knopp limit by implicit differentiation at the fixed point.

Theorem: ``sinkhorn.implicit_gradient``. Source: mHC arXiv:2512.24880 §4.2 Eq. 9 (the limit
of the alternating normalisations is the doubly stochastic scaling ``diag(u) exp(H̃) diag(v)``,
Sinkhorn 1967); an implicit backward (as in DeepSeek's TileKernels) differentiates that limit,
not the truncated iterate.
"""

from __future__ import annotations

import sympy

from hcspec.spec.checks import require_equal, symbol_matrix
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import assume

S = sympy.Symbol("s", real=True)


def sigmoid(x: sympy.Expr) -> sympy.Expr:
    """σ(x) = 1 / (1 + e^{−x})."""
    return 1 / (1 + sympy.exp(-x))


def implicit_vjp(P: sympy.Matrix, G: sympy.Matrix) -> sympy.Matrix:
    """``P ⊙ (G − α 1ᵀ − 1 βᵀ)`` with ``α + P β = (P ⊙ G) 1``, ``Pᵀ α + β = (P ⊙ G)ᵀ 1``,
    solved in the gauge ``β_{n−1} = 0`` (the system has the null direction ``(1, −1)``).

    Raises:
        ProofFailure: the system has no solution in that gauge.
    """
    n = P.shape[0]
    R = P.multiply_elementwise(G)
    r = R * sympy.ones(n, 1)
    c = R.T * sympy.ones(n, 1)
    alpha = sympy.Matrix(sympy.symbols(f"alpha0:{n}"))
    beta = sympy.Matrix([*sympy.symbols(f"beta0:{n - 1}"), 0])
    equations = list(alpha + P * beta - r) + list(P.T * alpha + beta - c)
    unknowns = [*alpha, *beta[: n - 1]]
    solutions = sympy.solve(equations, unknowns, dict=True)
    if len(solutions) != 1:
        raise ProofFailure(f"the fixed-point system has {len(solutions)} solutions in the gauge")
    a = alpha.subs(solutions[0])
    b = beta.subs(solutions[0])
    return sympy.Matrix(n, n, lambda i, j: P[i, j] * (G[i, j] - a[i] - b[j]))


@theorem(
    "sinkhorn.implicit_gradient",
    "The Sinkhorn–Knopp limit P(H̃) = diag(u) exp(H̃) diag(v) (doubly stochastic) has the "
    "vector–Jacobian product ∂⟨G, P⟩/∂H̃ = P ⊙ (G − α1ᵀ − 1βᵀ), where α + Pβ = (P⊙G)1 and "
    "Pᵀα + β = (P⊙G)ᵀ1 (implicit differentiation of the fixed point); for n = 2, where "
    "P = [[p, 1 − p], [1 − p, p]] with p = σ((H̃₁₁ + H̃₂₂ − H̃₁₂ − H̃₂₁)/2), it equals the "
    "derivative of that closed form. A truncated forward's gradient differs from it by the "
    "iterate's distance to the limit.",
    assumptions=(
        "exp(H̃) > 0 has a unique doubly stochastic scaling (Sinkhorn 1967), the limit of the "
        "alternating normalisations (mHC Eq. 9).",
    ),
    setting=(
        "H̃ ∈ R^{n×n} any real logits.",
        "G ∈ R^{n×n} any upstream gradient.",
    ),
    cases="n = 2: symbolic logits and upstream gradient",
    generality="explicit sizes",
    source="mHC arXiv:2512.24880 §4.2 Eq. 9; Sinkhorn 1967 (uniqueness of the scaling)",
)
def _implicit_gradient() -> list[Step]:
    L = symbol_matrix("h", 2, 2)
    G = symbol_matrix("g", 2, 2)
    s = (L[0, 0] + L[1, 1] - L[0, 1] - L[1, 0]) / 2
    p = sigmoid(s)
    P = sympy.Matrix([[p, 1 - p], [1 - p, p]])
    K = L.applyfunc(sympy.exp)
    # P is *the* limit only because the scaling is unique: a cited theorem, not proven here
    assume("a unique doubly stochastic scaling (Sinkhorn 1967)")
    steps: list[Step] = [
        require_equal("P is doubly stochastic: P1 = 1 and Pᵀ1 = 1",
                      (P * sympy.ones(2, 1)).col_join(P.T * sympy.ones(2, 1)),
                      sympy.ones(4, 1)),
        require_equal("P has the cross ratio of exp(H̃), which diagonal scalings keep, so P is "
                      "its doubly stochastic scaling: P₁₁P₂₂/(P₁₂P₂₁) = K₁₁K₂₂/(K₁₂K₂₁)",
                      P[0, 0] * P[1, 1] / (P[0, 1] * P[1, 0]),
                      K[0, 0] * K[1, 1] / (K[0, 1] * K[1, 0])),
    ]
    direct = sympy.Matrix(2, 2, lambda i, j: sum(
        G[k, m] * sympy.diff(P[k, m], L[i, j]) for k in range(2) for m in range(2)))
    implicit = implicit_vjp(P, G)
    steps.append(require_equal("∂⟨G, P⟩/∂H̃ of the closed form = P ⊙ (G − α1ᵀ − 1βᵀ)",
                               implicit, direct))
    steps.append(require_equal("the fixed-point gradient has zero row sums (H̃ + a1ᵀ has the "
                               "same limit)", implicit * sympy.ones(2, 1), sympy.zeros(2, 1),
                               show=(sympy.Symbol(r"\nabla_{\tilde{H}} \mathbf{1}"),
                                     sympy.zeros(2, 1)),
                               where={sympy.Symbol(r"\nabla_{\tilde{H}} \mathbf{1}"):
                                      implicit * sympy.ones(2, 1)}))
    return steps
