"""The HC/mHC connection formulas as sympy matrix expressions: the single source of truth.

Row convention (docs/reference.md, Conventions): for one token the state is ``X ∈ R^{n×d}``
(streams are rows), ``h_pre, h_post ∈ R^{n×1}``, ``H_res ∈ R^{n×n}``, the branch output
``z ∈ R^{d×1}``.

    x_in = Xᵀ h_pre                      (read; HC A_m, mHC H_pre)
    X'   = H_res X + h_post zᵀ           (mix + write back; HC A_rᵀ and Bᵀ, mHC H_res and H_postᵀ)

Backward with upstream ``G = ∂L/∂X'`` and ``g_in = Jᵀ g_z`` (J the branch Jacobian at x_in):

    g_z = Gᵀ h_post,   ∂L/∂X = H_resᵀ G + h_pre g_inᵀ,
    ∂L/∂H_res = G Xᵀ,  ∂L/∂h_post = G z,  ∂L/∂h_pre = X g_in

Sources: HC arXiv:2409.19606 §2 Eq. 1–5 (the (n+1)×(n+1) HC matrix); mHC arXiv:2512.24880 Eq. 3.
The theorems in :mod:`hcspec.spec.theorems` prove these forms (``layout.paper_rows``,
``backward.closed_form``); :mod:`hcspec.spec.numeric` lambdifies exactly these expressions.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

n, d = sympy.symbols("n d", integer=True, positive=True)


@dataclass(frozen=True)
class ConnectionSymbols:
    """Matrix symbols of one HC sublayer at one token, with symbolic or concrete sizes."""

    X: sympy.MatrixSymbol
    h_pre: sympy.MatrixSymbol
    h_post: sympy.MatrixSymbol
    H_res: sympy.MatrixSymbol
    z: sympy.MatrixSymbol
    G: sympy.MatrixSymbol
    g_in: sympy.MatrixSymbol


def connection_symbols(rows: sympy.Expr | int = n, cols: sympy.Expr | int = d) -> ConnectionSymbols:
    """Matrix symbols for an HC sublayer with ``rows`` streams and ``cols`` features.

    Shapes: X, G: rows×cols; h_pre, h_post: rows×1; H_res: rows×rows; z, g_in: cols×1.

    Raises:
        ValueError: if a concrete size is < 1.
    """
    for name, size in (("n", rows), ("d", cols)):
        if isinstance(size, int) and size < 1:
            raise ValueError(f"{name} must be a positive integer, got {size}")
    return ConnectionSymbols(
        X=sympy.MatrixSymbol("X", rows, cols),
        h_pre=sympy.MatrixSymbol("h_pre", rows, 1),
        h_post=sympy.MatrixSymbol("h_post", rows, 1),
        H_res=sympy.MatrixSymbol("H_res", rows, rows),
        z=sympy.MatrixSymbol("z", cols, 1),
        G=sympy.MatrixSymbol("G", rows, cols),
        g_in=sympy.MatrixSymbol("g_in", cols, 1),
    )


def aggregate(s: ConnectionSymbols) -> sympy.MatrixExpr:
    """x_in = Xᵀ h_pre (d×1): the branch input (HC Eq. 3 read with A_m; mHC Eq. 3 H_pre x_l)."""
    return s.X.T * s.h_pre


def forward(s: ConnectionSymbols) -> sympy.MatrixExpr:
    """X' = H_res X + h_post zᵀ (n×d): mix the streams and write the branch output back."""
    return s.H_res * s.X + s.h_post * s.z.T


def branch_cotangent(s: ConnectionSymbols) -> sympy.MatrixExpr:
    """g_z = Gᵀ h_post (d×1): the gradient that reaches the branch output."""
    return s.G.T * s.h_post


def grad_X(s: ConnectionSymbols) -> sympy.MatrixExpr:
    """∂L/∂X = H_resᵀ G + h_pre g_inᵀ (n×d): bypass term plus sublayer term."""
    return s.H_res.T * s.G + s.h_pre * s.g_in.T


def grad_H_res(s: ConnectionSymbols) -> sympy.MatrixExpr:
    """∂L/∂H_res = G Xᵀ (n×n)."""
    return s.G * s.X.T


def grad_h_post(s: ConnectionSymbols) -> sympy.MatrixExpr:
    """∂L/∂h_post = G z (n×1)."""
    return s.G * s.z


def grad_h_pre(s: ConnectionSymbols) -> sympy.MatrixExpr:
    """∂L/∂h_pre = X g_in (n×1)."""
    return s.X * s.g_in
