"""Parameter and FLOP counts of HC, DHC and mHC connections: sympy closed forms and plain
integer functions built from them (``sympy.lambdify``), so callers never re-type a formula.

Per connection module (one per attention and one per FFN sublayer, so 2L per network):

    |θ_SHC| = n (B) + n(n+1) (A_m, A_r)              = n(n+2)                 HC App. B Eq. 21
    |θ_DHC| = |θ_norm| + d(n+2) + n(n+2) + 2                                 HC App. B Eq. 25
    |θ_mHC| = nd(n²+2n) (φ) + (n²+2n) (b) + 3 (α)                            mHC Eq. 7, 10–13
    P_extra = |θ| × 2 × L                                                    HC App. B Eq. 22, 26

FLOPs per token per module, forward pass, a multiply-add counted as 2 FLOPs:

    SHC: width connection [A_m, A_r]ᵀ X: 2n(n+1)d; depth connection h_post zᵀ + H': 2nd
         → 2nd(n+2)
    DHC: SHC + per-stream LayerNorm 5nd + dynamic projections X̄ [W_β, W_m, W_r]: 2nd(n+2)
         + tanh, scale and static add 3n(n+2)   → 4nd(n+2) + 5nd + 3n(n+2)

The FLOP convention is this project's (the HC paper prints Table 8 without its counting rule);
``counts.flops`` records where the printed figures and these formulas disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy

from hcspec.spec.formulas import d, n

L = sympy.Symbol("L", integer=True, positive=True)
"""Number of transformer layers (each has an attention and an FFN sublayer)."""

theta_norm = sympy.Symbol(r"\theta_{norm}", integer=True, nonnegative=True)
"""Parameters of the norm before the dynamic projections (0 for LayerNorm without affine)."""

MODULES_PER_LAYER = 2

SHC_PARAMS = n * (n + 2)
DHC_PARAMS = theta_norm + d * (n + 2) + n * (n + 2) + 2
MHC_PARAMS = n * d * (n**2 + 2 * n) + (n**2 + 2 * n) + 3

SHC_FLOPS = 2 * n * d * (n + 2)
DHC_FLOPS = 4 * n * d * (n + 2) + 5 * n * d + 3 * n * (n + 2)


def extra(per_module: sympy.Expr) -> sympy.Expr:
    """P_extra = per-module count × 2 × L (HC App. B Eq. 22, 26)."""
    return per_module * MODULES_PER_LAYER * L


def _integer_function(expr: sympy.Expr) -> Callable[..., Any]:
    return sympy.lambdify([n, d, L, theta_norm], expr, "math")  # type: ignore[no-any-return]


_FUNCTIONS = {
    ("shc", "params"): _integer_function(SHC_PARAMS),
    ("dhc", "params"): _integer_function(DHC_PARAMS),
    ("mhc", "params"): _integer_function(MHC_PARAMS),
    ("shc", "flops"): _integer_function(SHC_FLOPS),
    ("dhc", "flops"): _integer_function(DHC_FLOPS),
}
KINDS = ("shc", "dhc", "mhc")


def _check(kind: str, n_: int, d_: int, layers: int, norm_params: int) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    for name, value, minimum in (("n", n_, 1), ("d", d_, 1), ("layers", layers, 1),
                                 ("norm_params", norm_params, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def params_per_module(kind: str, n: int, d: int, norm_params: int = 0) -> int:
    """Parameters of one connection module: ``kind`` in {"shc", "dhc", "mhc"}, expansion rate
    ``n``, hidden size ``d``, and (DHC only) ``norm_params`` learnable norm parameters.

    Raises:
        ValueError: if ``kind`` is unknown or a size is not a positive integer.
    """
    _check(kind, n, d, 1, norm_params)
    return int(_FUNCTIONS[(kind, "params")](n, d, 1, norm_params))


def extra_params(kind: str, n: int, d: int, layers: int, norm_params: int = 0) -> int:
    """P_extra = params_per_module × 2 × layers (HC App. B Eq. 22, 26).

    Raises:
        ValueError: if ``kind`` is unknown or a size is not a positive integer.
    """
    _check(kind, n, d, layers, norm_params)
    return params_per_module(kind, n, d, norm_params) * MODULES_PER_LAYER * layers


def flops_per_module(kind: str, n: int, d: int) -> int:
    """Forward FLOPs per token of one connection module (``kind`` in {"shc", "dhc"}).

    Raises:
        ValueError: if ``kind`` is not "shc" or "dhc" or a size is not a positive integer.
    """
    _check(kind, n, d, 1, 0)
    if kind == "mhc":
        raise ValueError("flops_per_module: kind must be 'shc' or 'dhc' (no mHC FLOP formula)")
    return int(_FUNCTIONS[(kind, "flops")](n, d, 1, 0))


def extra_flops(kind: str, n: int, d: int, layers: int) -> int:
    """Forward FLOPs per token of all 2 × layers connection modules.

    Raises:
        ValueError: as :func:`flops_per_module`, or if ``layers`` < 1.
    """
    _check(kind, n, d, layers, 0)
    return flops_per_module(kind, n, d) * MODULES_PER_LAYER * layers
