"""LayerNorm and RMSNorm (no affine parameters) as sympy expressions of an explicit vector.

Used by the ``norm.*``, ``reduction.*`` and ``postnorm.*`` theorems. All functions take a d×1
sympy Matrix ``x`` and a nonnegative ``eps`` (a number or a sympy symbol).

    LayerNorm(x) = (x − μ 1) / sqrt(σ² + ε),   μ = 1ᵀx / d,  σ² = ‖x − μ 1‖² / d
    RMSNorm(x)   = x / sqrt(‖x‖² / d + ε)

Sources: HC arXiv:2409.19606 §2.2 Eq. 10 (norm before the dynamic weights) and App. G Eq. 35–40
(post-norm); mHC arXiv:2512.24880 Eq. 7 (RMSNorm of the flattened state).
"""

from __future__ import annotations

from typing import Any

import sympy

from hcspec.spec.checks import require_size


def _check(x: sympy.Matrix) -> int:
    if not isinstance(x, sympy.MatrixBase) or x.shape[1] != 1:
        got = getattr(x, "shape", type(x).__name__)
        raise ValueError(f"expected a d×1 sympy Matrix, got {got}")
    return require_size("d", int(x.shape[0]))


def mean(x: sympy.Matrix) -> Any:
    """μ = 1ᵀx / d (a scalar). Raises ValueError unless ``x`` is d×1 with d ≥ 1."""
    return sum(x, sympy.Integer(0)) / _check(x)


def variance(x: sympy.Matrix) -> Any:
    """Population variance σ² = ‖x − μ 1‖² / d. Raises ValueError unless ``x`` is d×1."""
    mu = mean(x)
    return sum(((xi - mu) ** 2 for xi in x), sympy.Integer(0)) / _check(x)


def mean_square(x: sympy.Matrix) -> Any:
    """‖x‖² / d, the RMSNorm statistic. Raises ValueError unless ``x`` is d×1."""
    return sum((xi**2 for xi in x), sympy.Integer(0)) / _check(x)


def layer_norm(x: sympy.Matrix, eps: Any = 0) -> sympy.Matrix:
    """LayerNorm without gain/bias: (x − μ) / sqrt(σ² + ε) (d×1)."""
    return (x - mean(x) * sympy.ones(_check(x), 1)) / sympy.sqrt(variance(x) + eps)


def rms_norm(x: sympy.Matrix, eps: Any = 0) -> sympy.Matrix:
    """RMSNorm without gain: x / sqrt(‖x‖²/d + ε) (d×1)."""
    _check(x)
    return x / sympy.sqrt(mean_square(x) + eps)


def layer_norm_jacobian(x: sympy.Matrix, eps: Any = 0) -> sympy.Matrix:
    """Closed form J = (I − 11ᵀ/d − x̂ x̂ᵀ/d) / s with s = sqrt(σ² + ε), x̂ = (x − μ)/s (d×d)."""
    d = _check(x)
    s = sympy.sqrt(variance(x) + eps)
    x_hat = (x - mean(x) * sympy.ones(d, 1)) / s
    return (sympy.eye(d) - sympy.ones(d, d) / d - x_hat * x_hat.T / d) / s


def rms_norm_jacobian(x: sympy.Matrix, eps: Any = 0) -> sympy.Matrix:
    """Closed form J = (I − x xᵀ / (d r²)) / r with r = sqrt(‖x‖²/d + ε) (d×d)."""
    d = _check(x)
    r = sympy.sqrt(mean_square(x) + eps)
    return (sympy.eye(d) - x * x.T / (d * r**2)) / r
