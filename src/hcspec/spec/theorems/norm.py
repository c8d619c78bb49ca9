"""The normalisations the HC/mHC papers put around the branch: Jacobians and invariances.

Theorem: ``norm.jacobians``. Sources: HC arXiv:2409.19606 §2.2 Eq. 10 and App. G (post-norm);
mHC arXiv:2512.24880 Eq. 7.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from hcspec.spec import norms
from hcspec.spec.checks import chain, require_equal, symbol_vector
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import Given, assume, hypothesis, prose
from hcspec.spec.sums import split_sums

SIZES_D = (1, 2)
SIZES_D_INVARIANCE = (2,)  # at d = 1 LayerNorm is identically 0 and RMSNorm is sign(x)


def _rms_jacobian_any_d(eps: sympy.Symbol) -> list[Step]:
    """RMSNorm's Jacobian for symbolic d, index by index: N_i = x_i / r, r² = Σ_k x_k²/d + ε."""
    d = sympy.Symbol("d", integer=True, positive=True)
    x = sympy.IndexedBase("x", real=True)
    i, j, k = sympy.symbols("i j k", integer=True, nonnegative=True)
    r = sympy.sqrt(sympy.Sum(x[k] ** 2, (k, 0, d - 1)) / d + eps)
    derived = sympy.diff(x[i] / r, x[j])
    # j is an index, 0 ≤ j ≤ d − 1: the Kronecker sum Σ_k δ_jk x_k is x_j.
    in_range = derived.doit().replace(
        lambda e: isinstance(e, sympy.Piecewise), lambda e: e.args[0].expr)
    closed = (sympy.KroneckerDelta(i, j) - x[i] * x[j] / (d * r**2)) / r
    require_equal("RMSNorm Jacobian entry ∂N_i/∂x_j, symbolic d", in_range, closed)
    R = sympy.Symbol("r", positive=True)
    index = assume("0 ≤ i, j ≤ d − 1", replace={sympy.Le(j, d - 1): True,
                                                sympy.Le(i, d - 1): True})
    name_r = Given("r = √(Σ_k x_k²/d + ε)", ((R, r),))
    euler = sympy.Sum(closed.subs(eps, 0) * x[j], (j, 0, d - 1))
    return [
        ("RMSNorm, every d: N_i = x_i / r with r² = Σ_k x_k² / d + ε; differentiate in x_j "
         "(sympy, symbolic d; Σ_k δ_jk x_k = x_j for an index j)",
         chain(r"\frac{\partial N_i}{\partial x_j}", derived,
               (sympy.KroneckerDelta(i, j) - x[i] * x[j] / (d * R**2)) / R,
               using=[index, name_r])),
        ("RMSNorm, every d, ε = 0: (J x)_i = Σ_j J_ij x_j = 0 (the Jacobian of a degree-0 "
         "homogeneous map annihilates x)", chain(r"(J x)_i", euler, 0, using=[index])),
    ]


_D = sympy.Symbol("d", integer=True, positive=True)
_X = sympy.IndexedBase("x", real=True)
_I, _J, _K, _L = sympy.symbols("i j k l", integer=True, nonnegative=True)


def _first_piece(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with each Piecewise replaced by its first branch: a Kronecker sum Σ_k δ_jk a_k is
    a_j when j is an index in range, which is the first branch sympy returns."""
    return expr.replace(lambda e: isinstance(e, sympy.Piecewise), lambda e: e.args[0].expr)


def _index_layer_norm(x: sympy.IndexedBase, eps: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr,
                                                                       sympy.Expr]:
    """(N_i, μ, σ²) of LayerNorm in index form for symbolic d: μ = Σ_l x_l / d,
    σ² = Σ_k (x_k − μ)² / d, N_i = (x_i − μ) / sqrt(σ² + ε)."""
    mu = sympy.Sum(x[_L], (_L, 0, _D - 1)) / _D
    var = sympy.Sum((x[_K] - mu) ** 2, (_K, 0, _D - 1)) / _D
    return (x[_I] - mu) / sympy.sqrt(var + eps), mu, var


def _index_rms_norm(x: sympy.IndexedBase, eps: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
    """(N_i, r²) of RMSNorm in index form for symbolic d: r² = Σ_k x_k² / d + ε, N_i = x_i / r."""
    r2 = sympy.Sum(x[_K] ** 2, (_K, 0, _D - 1)) / _D + eps
    return x[_I] / sympy.sqrt(r2), r2


def _layer_norm_jacobian_any_d(eps: sympy.Symbol) -> list[Step]:
    """LayerNorm's Jacobian for symbolic d, index by index: differentiate, name s² = σ² + ε, and
    use Σ_k (x_k − μ) = Σ_k x_k − d μ = 0 (linearity of the sum)."""
    N, mu, var = _index_layer_norm(_X, eps)
    s = sympy.Symbol("s", positive=True)
    derived = _first_piece(sympy.diff(N, _X[_J]).doit()).xreplace({var + eps: s**2})
    total = sympy.Sum(_X[_L], (_L, 0, _D - 1))
    reduced = derived.replace(lambda e: isinstance(e, sympy.Sum) and e.limits[0][0] == _K,
                              lambda e: split_sums(e).doit())
    reduced = reduced.xreplace({sympy.Sum(_X[_K], (_K, 0, _D - 1)): total})
    x_hat = {a: (_X[a] - mu) / s for a in (_I, _J)}
    closed = (sympy.KroneckerDelta(_I, _J) - 1 / _D - x_hat[_I] * x_hat[_J] / _D) / s
    if sympy.simplify(reduced - closed) != 0:
        raise ProofFailure(f"LayerNorm Jacobian entry, symbolic d: {reduced} is not {closed}")
    M, X_hat = sympy.Symbol(r"\mu"), sympy.IndexedBase(r"\hat{x}")
    centred = sympy.Sum(_X[_K] - mu, (_K, 0, _D - 1))
    names = Given("μ = Σ_l x_l / d, x̂_a = (x_a − μ)/s",
                  ((M, mu), (X_hat[_I], x_hat[_I]), (X_hat[_J], x_hat[_J])))
    column_sum = sympy.Sum(closed, (_I, 0, _D - 1))
    index = assume("0 ≤ i, j ≤ d − 1", replace={sympy.Le(_J, _D - 1): True,
                                                sympy.Le(_I, _D - 1): True})
    return [("LayerNorm, every d: the key reduction, the centred entries sum to zero",
             chain(r"\sum_k (x_k - \mu)", centred, split_sums(centred), 0)),
            ("LayerNorm, every d: N_i = (x_i − μ)/s, s² = Σ_k (x_k − μ)²/d + ε; differentiate in "
             "x_j (sympy, symbolic d), use Σ_k (x_k − μ) = 0 and name x̂ = (x − μ)/s",
             chain(r"\frac{\partial N_i}{\partial x_j}",
                   reduced.xreplace({mu: M}),
                   (sympy.KroneckerDelta(_I, _J) - 1 / _D - X_hat[_I] * X_hat[_J] / _D) / s,
                   using=[names])),
            ("LayerNorm, every d: (1ᵀ J)_j = Σ_i J_ij = 0, so J 1 = 0 too (J is symmetric)",
             chain(r"(\mathbf{1}^T J)_j", column_sum, 0, using=[index]))]


def _entries_replaced(expr: sympy.Expr, base: sympy.IndexedBase,
                      entry: Callable[[sympy.Expr], sympy.Expr]) -> sympy.Expr:
    """``expr`` with every ``base[a]`` replaced by ``entry(a)`` (e.g. y_a → c x_a)."""
    return expr.replace(lambda e: isinstance(e, sympy.Indexed) and e.base == base,
                        lambda e: entry(e.indices[0]))


def _invariances_any_d() -> list[Step]:
    """Scale invariance of both norms and shift invariance of LayerNorm for symbolic d (ε = 0),
    in index form: the sums are split by linearity (Σ c a_k = c Σ a_k, Σ t = d t)."""
    c = hypothesis("c > 0", "c", weaker={"real": True}, positive=True)
    t = sympy.Symbol("t", real=True)
    y = sympy.IndexedBase("y", real=True)
    steps: list[Step] = []

    def rms(v: sympy.IndexedBase) -> sympy.Expr:
        return _index_rms_norm(v, 0)[0]

    def layer(v: sympy.IndexedBase) -> sympy.Expr:
        return _index_layer_norm(v, 0)[0]

    def scaled(a: sympy.Expr) -> sympy.Expr:
        return c * _X[a]

    def shifted(a: sympy.Expr) -> sympy.Expr:
        return _X[a] + t

    cases: tuple[tuple[str, Callable[[sympy.IndexedBase], sympy.Expr],
                       Callable[[sympy.Expr], sympy.Expr]], ...] = (
        ("RMSNorm(c x) = RMSNorm(x)", rms, scaled),
        ("LayerNorm(c x) = LayerNorm(x)", layer, scaled),
        ("LayerNorm(x + t 1) = LayerNorm(x)", layer, shifted))
    for name, norm, entry in cases:
        moved = _entries_replaced(norm(y), y, entry)
        reduced = split_sums(moved).doit()
        target = split_sums(norm(_X)).doit()
        steps.append((f"{name}, every d (ε = 0): split the sums (Σ c a_k = c Σ a_k, "
                      "Σ t = d t)", chain(moved, norm(_X), via=(reduced, target))))
    steps.append(prose("differentiating these invariances at c = 1 and t = 0 gives J x = 0 for "
                       "both norms and J 1 = 0 for LayerNorm: shown above for every d where the "
                       "index form reduces (RMSNorm J x, LayerNorm J 1), and at d in {1, 2} for "
                       "LayerNorm J x (below)"))
    return steps


@theorem(
    "norm.jacobians",
    "LayerNorm and RMSNorm (no affine) have Jacobians (I − 11ᵀ/d − x̂x̂ᵀ/d)/s and "
    "(I − xxᵀ/(d r²))/r; both are scale invariant (Norm(cx) = Norm(x), c > 0, ε = 0) and "
    "LayerNorm is shift invariant.",
    assumptions=(
        "c > 0.",
        "Indices 0 ≤ i, j ≤ d − 1.",
    ),
    setting=(
        "x ∈ R^d; ε a symbol for the Jacobians (ε ≥ 0 in practice; the closed forms hold as "
        "written for every ε), ε = 0 for the invariances.",
        "s = sqrt(σ² + ε), x̂ = (x − μ1)/s for LayerNorm; r = sqrt(‖x‖²/d + ε) for RMSNorm.",
        "No gain or bias (HC's dynamic-weight norm and the absorbed post-norm, App. G Eq. 36).",
    ),
    cases="symbolic d (index form: Jacobian entries of both norms, scale and shift invariances; "
          "J x = 0 and J 1 = 0 follow by differentiating them); examples: the matrix closed forms "
          "at d in {1,2}, invariances and J x = 0 at d = 2",
    generality="all sizes",
    source="HC arXiv:2409.19606 §2.2 Eq. 10, App. G Eq. 35–40; mHC arXiv:2512.24880 Eq. 7",
)
def _norm_jacobians() -> list[Step]:
    eps = sympy.Symbol("epsilon", positive=True)
    c = hypothesis("c > 0", "c", weaker={"real": True}, positive=True)
    t = sympy.Symbol("t", real=True)
    steps: list[Step] = [*_rms_jacobian_any_d(eps), *_layer_norm_jacobian_any_d(eps),
                         *_invariances_any_d()]
    for d in SIZES_D:
        x = symbol_vector("x", d)
        ln, rms = norms.layer_norm(x, eps), norms.rms_norm(x, eps)
        require_equal(f"LayerNorm Jacobian, d={d}", ln.jacobian(x),
                      norms.layer_norm_jacobian(x, eps))
        require_equal(f"RMSNorm Jacobian, d={d}", rms.jacobian(x), norms.rms_norm_jacobian(x, eps))
        if d not in SIZES_D_INVARIANCE:
            continue
        require_equal(f"RMSNorm scale invariance, d={d}", norms.rms_norm(c * x), norms.rms_norm(x))
        require_equal(f"LayerNorm scale invariance, d={d}", norms.layer_norm(c * x),
                      norms.layer_norm(x))
        require_equal(f"LayerNorm shift invariance, d={d}",
                      norms.layer_norm(x + t * sympy.ones(d, 1)), norms.layer_norm(x))
        require_equal(f"RMSNorm: J x = 0 at ε = 0 (Euler, degree 0), d={d}",
                      norms.rms_norm_jacobian(x) * x, sympy.zeros(d, 1))
        require_equal(f"LayerNorm: J x = 0 and J 1 = 0 at ε = 0, d={d}",
                      norms.layer_norm_jacobian(x) * sympy.Matrix.hstack(x, sympy.ones(d, 1)),
                      sympy.zeros(d, 2))
    return steps
