"""Parameter and FLOP counts of the three connection kinds (:mod:`hcspec.spec.kinds`): sympy
closed forms and plain integer functions built from them (``sympy.lambdify``), so callers never
re-type a formula.

Per connection module (one per attention and one per FFN sublayer, so 2L per network):

    |θ_hc-static|  = n (B) + n(n+1) (A_m, A_r)             = n(n+2)          HC App. B Eq. 21
    |θ_hc-dynamic| = |θ_norm| + d(n+2) + n(n+2) + 2                           HC App. B Eq. 25
    |θ_mhc|        = nd(n²+2n) (φ) + (n²+2n) (b) + 3 (α)                      mHC Eq. 7, 10–13
    P_extra = |θ| × 2 × L                                                     HC App. B Eq. 22, 26

FLOPs per token per module, forward pass, a multiply-add counted as 2 FLOPs:

    hc-static:  width connection [A_m, A_r]ᵀ X: 2n(n+1)d; depth connection h_post zᵀ + H': 2nd
                → 2nd(n+2)
    hc-dynamic: hc-static + per-stream LayerNorm 5nd + 4n + projections X̄ [W_β, W_m, W_r]:
                2nd(n+2) + tanh, scale and static add 3n(n+2)
                → 4nd(n+2) + 5nd + 4n + 3n(n+2)
    mhc:        read, mix, write back 2nd(n+2) + projection vec(X) φ: 2nd(n²+2n)
                + RMS of vec(X): 2nd + 3 + ÷RMS, ×α, +b: 3(n²+2n) + σ, 2σ: 3n
                + Sinkhorn–Knopp: exp n², then t rounds of column and row sums and divisions 4tn²

The FLOP convention is this project's (the HC paper prints Table 8 without its counting rule);
``counts.flops`` records where the printed figures and these formulas agree and disagree, and
checks every formula against an operation-by-operation count of an explicit forward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy

from hcspec.spec.formulas import d, n
from hcspec.spec.kinds import HC_DYNAMIC, HC_STATIC, KINDS, MHC, Kind, require_kind

L = sympy.Symbol("L", integer=True, positive=True)
"""Number of transformer layers (each has an attention and an FFN sublayer)."""

t = sympy.Symbol("t", integer=True, positive=True)
"""Sinkhorn–Knopp rounds of mHC (t_max, 20 in mHC arXiv:2512.24880 §4.2)."""

theta_norm = sympy.Symbol(r"\theta_{norm}", integer=True, nonnegative=True)
"""Parameters of the norm before the dynamic projections (0 for LayerNorm without affine)."""

MODULES_PER_LAYER = 2

SINKHORN_ROUNDS = 20
"""t_max of mHC arXiv:2512.24880 §4.2, the default of the mHC FLOP count."""

SHC_PARAMS = n * (n + 2)
DHC_PARAMS = theta_norm + d * (n + 2) + n * (n + 2) + 2
MHC_PARAMS = n * d * (n**2 + 2 * n) + (n**2 + 2 * n) + 3

SHC_FLOPS = 2 * n * d * (n + 2)
DHC_FLOPS = 4 * n * d * (n + 2) + 5 * n * d + 4 * n + 3 * n * (n + 2)
MHC_FLOPS = (2 * n * d * (n + 2) + 2 * n * d * (n**2 + 2 * n) + (2 * n * d + 3)
             + 3 * (n**2 + 2 * n) + 3 * n + n**2 + 4 * t * n**2)

PARAMS: dict[Kind, sympy.Expr] = {HC_STATIC: SHC_PARAMS, HC_DYNAMIC: DHC_PARAMS, MHC: MHC_PARAMS}
"""Parameters per module, by kind (sympy, in n, d and θ_norm)."""

FLOPS: dict[Kind, sympy.Expr] = {HC_STATIC: SHC_FLOPS, HC_DYNAMIC: DHC_FLOPS, MHC: MHC_FLOPS}
"""Forward FLOPs per token per module, by kind (sympy, in n, d and, for mHC, t)."""


def extra(per_module: sympy.Expr) -> sympy.Expr:
    """P_extra = per-module count × 2 × L (HC App. B Eq. 22, 26)."""
    return per_module * MODULES_PER_LAYER * L


def _integer_function(expr: sympy.Expr) -> Callable[..., Any]:
    return sympy.lambdify([n, d, L, theta_norm, t], expr, "math")  # type: ignore[no-any-return]


_FUNCTIONS = {(kind, what): _integer_function(table[kind])
              for what, table in (("params", PARAMS), ("flops", FLOPS)) for kind in KINDS}


def _check(kind: str, sizes: dict[str, tuple[object, int]]) -> Kind:
    known = require_kind(kind)
    for name, (value, minimum) in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return known


def params_per_module(kind: str, n: int, d: int, norm_params: int = 0) -> int:
    """Parameters of one connection module: ``kind`` in :data:`hcspec.spec.kinds.KINDS`,
    expansion rate ``n``, hidden size ``d``, and (hc-dynamic only) ``norm_params`` learnable
    parameters of the norm before the projections.

    Raises:
        ValueError: if ``kind`` is unknown or a size is not a positive integer.
    """
    known = _check(kind, {"n": (n, 1), "d": (d, 1), "norm_params": (norm_params, 0)})
    return int(_FUNCTIONS[(known, "params")](n, d, 1, norm_params, 1))


def extra_params(kind: str, n: int, d: int, layers: int, norm_params: int = 0) -> int:
    """P_extra = params_per_module × 2 × layers (HC App. B Eq. 22, 26).

    Raises:
        ValueError: if ``kind`` is unknown or a size is not a positive integer.
    """
    _check(kind, {"layers": (layers, 1)})
    return params_per_module(kind, n, d, norm_params) * MODULES_PER_LAYER * layers


def flops_per_module(kind: str, n: int, d: int, rounds: int = SINKHORN_ROUNDS) -> int:
    """Forward FLOPs per token of one connection module of ``kind`` (``rounds``: Sinkhorn–Knopp
    rounds, used by ``mhc`` only).

    Raises:
        ValueError: if ``kind`` is unknown or a size is not a positive integer.
    """
    known = _check(kind, {"n": (n, 1), "d": (d, 1), "rounds": (rounds, 1)})
    return int(_FUNCTIONS[(known, "flops")](n, d, 1, 0, rounds))


def extra_flops(kind: str, n: int, d: int, layers: int, rounds: int = SINKHORN_ROUNDS) -> int:
    """Forward FLOPs per token of all 2 × layers connection modules.

    Raises:
        ValueError: as :func:`flops_per_module`, or if ``layers`` < 1.
    """
    _check(kind, {"layers": (layers, 1)})
    return flops_per_module(kind, n, d, rounds) * MODULES_PER_LAYER * layers
