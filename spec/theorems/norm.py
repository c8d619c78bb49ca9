"""The normalisations the HC/mHC papers put around the branch: Jacobians and invariances.

Theorem: ``norm.jacobians``. Sources: HC arXiv:2409.19606 §2.2 Eq. 10 and App. G (post-norm);
mHC arXiv:2512.24880 Eq. 7.
"""

from __future__ import annotations

import sympy

from hcspec.spec import norms
from hcspec.spec.checks import chain, require_equal, symbol_vector
from hcspec.spec.registry import Step, theorem

SIZES_D = (1, 2, 3)
SIZES_D_INVARIANCE = (2, 3)  # at d = 1 LayerNorm is identically 0 and RMSNorm is sign(x)


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
    R = sympy.Symbol("r")
    return [
        ("RMSNorm, every d: N_i = x_i / r with r² = Σ_k x_k² / d + ε; differentiate in x_j "
         "(sympy, symbolic d; Σ_k δ_jk x_k = x_j for an index j)",
         chain(r"\frac{\partial N_i}{\partial x_j}", derived,
               (sympy.KroneckerDelta(i, j) - x[i] * x[j] / (d * R**2)) / R)),
    ]


@theorem(
    "norm.jacobians",
    "LayerNorm and RMSNorm (no affine) have Jacobians (I − 11ᵀ/d − x̂x̂ᵀ/d)/s and "
    "(I − xxᵀ/(d r²))/r; both are scale invariant (Norm(cx) = Norm(x), c > 0, ε = 0) and "
    "LayerNorm is shift invariant.",
    assumptions=(
        "x ∈ R^d real; ε ≥ 0 for the Jacobians (a symbol), ε = 0 for the invariances; c > 0.",
        "s = sqrt(σ² + ε), x̂ = (x − μ1)/s for LayerNorm; r = sqrt(‖x‖²/d + ε) for RMSNorm.",
        "No gain or bias (HC's dynamic-weight norm and the absorbed post-norm, App. G Eq. 36).",
    ),
    cases="RMSNorm Jacobian: symbolic d (index form); LayerNorm Jacobian: explicit d in "
          "{1,2,3}; invariances and J x = 0: d in {2,3}",
    generality="explicit sizes",
    source="HC arXiv:2409.19606 §2.2 Eq. 10, App. G Eq. 35–40; mHC arXiv:2512.24880 Eq. 7",
)
def _norm_jacobians() -> list[Step]:
    eps = sympy.Symbol("epsilon", positive=True)
    c = sympy.Symbol("c", positive=True)
    t = sympy.Symbol("t", real=True)
    steps: list[Step] = _rms_jacobian_any_d(eps)
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
    steps.append(("LayerNorm: the Jacobian of (x − μ1)/s equals the closed form entry by entry at "
                  "d = 1, 2, 3 (s = sqrt(σ² + ε), x̂ = (x − μ1)/s)",
                  sympy.Symbol(r"J_{LN} = \frac{1}{s}\left(I - \frac{1}{d}\mathbf{1}\mathbf{1}^T "
                               r"- \frac{1}{d}\hat{x}\hat{x}^T\right)")))
    x = symbol_vector("x", 3)
    steps += [
        ("scale invariance at d = 3, c > 0, ε = 0: the first entry of RMSNorm(c x) (RMSNorm; "
         "LayerNorm likewise)",
         chain(norms.rms_norm(c * x)[0], sympy.simplify(norms.rms_norm(x)[0]))),
        ("LayerNorm shift invariance at d = 3: Norm(x + t1) = Norm(x)",
         sympy.Eq(sympy.Symbol(r"\mathrm{LN}(x + t\mathbf{1})"), sympy.Symbol(r"\mathrm{LN}(x)"),
                  evaluate=False)),
    ]
    return steps
