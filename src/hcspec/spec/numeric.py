"""Numeric callables (numpy, float64) lambdified from the spec's own sympy expressions.

The reference and the conformance kit compare against these, never against a re-typed formula.
Every function takes per-token arrays and also broadcasts over any leading batch axes
(``[..., n, d]`` states, ``[..., n]`` vectors, ``[..., n, n]`` matrices, ``[..., d]`` branch
vectors). Inputs are converted to float64 numpy arrays (torch tensors: call ``.detach().cpu()``
first, or pass anything ``numpy.asarray`` accepts).

Raises:
    ValueError: when shapes are inconsistent; the message names expected and received shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy
from numpy.typing import ArrayLike, NDArray

from hcspec.spec import formulas, network

Array = NDArray[np.float64]

_S = formulas.connection_symbols()


def _lambdify(args: list[sympy.MatrixSymbol], expr: sympy.MatrixExpr) -> Callable[..., Any]:
    return sympy.lambdify(args, expr, "numpy")  # type: ignore[no-any-return]


_aggregate = _lambdify([_S.X, _S.h_pre], formulas.aggregate(_S))
_forward = _lambdify([_S.X, _S.h_post, _S.H_res, _S.z], formulas.forward(_S))
_g_z = _lambdify([_S.G, _S.h_post], formulas.branch_cotangent(_S))
_grad_X = _lambdify([_S.G, _S.h_pre, _S.H_res, _S.g_in], formulas.grad_X(_S))
_grad_H_res = _lambdify([_S.G, _S.X], formulas.grad_H_res(_S))
_grad_h_post = _lambdify([_S.G, _S.z], formulas.grad_h_post(_S))
_grad_h_pre = _lambdify([_S.X, _S.g_in], formulas.grad_h_pre(_S))


def _col(v: Array) -> Array:
    return v.reshape(-1, 1)


def _f64(name: str, value: ArrayLike, min_ndim: int) -> Array:
    array = np.asarray(value, dtype=np.float64)
    if array.ndim < min_ndim:
        raise ValueError(f"{name}: expected at least {min_ndim} axes, got shape {array.shape}")
    return array


def _check(name: str, got: tuple[int, ...], expected: tuple[int, ...]) -> None:
    if got != expected:
        raise ValueError(f"{name}: expected trailing shape {expected}, got {got}")


def _sizes(name: str, n: int, d: int | None = None) -> None:
    """Reject empty stream or feature axes (n >= 1 and d >= 1 are required)."""
    if n < 1:
        raise ValueError(f"{name}: expected n >= 1 streams on axis -2, got n = {n}")
    if d is not None and d < 1:
        raise ValueError(f"{name}: expected d >= 1 features on axis -1, got d = {d}")


def _batch(**arrays: tuple[Array, int]) -> None:
    """Require the leading (batch) axes of every input to broadcast together.

    Each keyword maps a name to (array, number of trailing core axes).
    """
    batches = {name: a.shape[: a.ndim - core] for name, (a, core) in arrays.items()}
    try:
        np.broadcast_shapes(*batches.values())
    except ValueError:
        listed = ", ".join(f"{name} {shape}" for name, shape in batches.items())
        raise ValueError(f"leading batch axes must broadcast together, got {listed}") from None


def aggregate(X: ArrayLike, h_pre: ArrayLike) -> Array:
    """Branch input ``x_in = h_preᵀ X``.

    Shapes: X ``[..., n, d]``, h_pre ``[..., n]`` -> ``[..., d]``.
    Source: HC arXiv:2409.19606 Eq. 3 (A_m); mHC arXiv:2512.24880 Eq. 3 (H_pre).
    """
    Xa, hp = _f64("X", X, 2), _f64("h_pre", h_pre, 1)
    n, d = Xa.shape[-2:]
    _sizes("X", n, d)
    _check("h_pre", hp.shape[-1:], (n,))
    _batch(X=(Xa, 2), h_pre=(hp, 1))
    fn = np.vectorize(lambda x, h: _aggregate(x, _col(h))[:, 0], signature="(n,d),(n)->(d)")
    return np.asarray(fn(Xa, hp), dtype=np.float64)


def forward(X: ArrayLike, h_post: ArrayLike, H_res: ArrayLike, z: ArrayLike) -> Array:
    """New state ``X' = H_res X + h_post zᵀ`` given the branch output ``z = F(x_in)``.

    Shapes: X ``[..., n, d]``, h_post ``[..., n]``, H_res ``[..., n, n]``, z ``[..., d]`` ->
    ``[..., n, d]``. Source: HC Eq. 4–5 (A_r, B); mHC Eq. 3.
    """
    Xa, hq, H, za = (_f64("X", X, 2), _f64("h_post", h_post, 1), _f64("H_res", H_res, 2),
                     _f64("z", z, 1))
    n, d = Xa.shape[-2:]
    _sizes("X", n, d)
    _check("h_post", hq.shape[-1:], (n,))
    _check("H_res", H.shape[-2:], (n, n))
    _check("z", za.shape[-1:], (d,))
    _batch(X=(Xa, 2), h_post=(hq, 1), H_res=(H, 2), z=(za, 1))
    fn = np.vectorize(lambda x, hq_, h, z_: _forward(x, _col(hq_), h, _col(z_)),
                      signature="(n,d),(n),(n,n),(d)->(n,d)")
    return np.asarray(fn(Xa, hq, H, za), dtype=np.float64)


def branch_cotangent(G: ArrayLike, h_post: ArrayLike) -> Array:
    """Gradient reaching the branch output, ``g_z = Gᵀ h_post``.

    Shapes: G ``[..., n, d]``, h_post ``[..., n]`` -> ``[..., d]``.
    """
    Ga, hq = _f64("G", G, 2), _f64("h_post", h_post, 1)
    _sizes("G", *Ga.shape[-2:])
    _check("h_post", hq.shape[-1:], Ga.shape[-2:-1])
    _batch(G=(Ga, 2), h_post=(hq, 1))
    fn = np.vectorize(lambda g, h: _g_z(g, _col(h))[:, 0], signature="(n,d),(n)->(d)")
    return np.asarray(fn(Ga, hq), dtype=np.float64)


@dataclass(frozen=True)
class ConnectionGrads:
    """Closed-form gradients of one HC sublayer (shapes as the variables they belong to)."""

    X: Array
    h_pre: Array
    h_post: Array
    H_res: Array


def backward(
    G: ArrayLike,
    X: ArrayLike,
    h_pre: ArrayLike,
    h_post: ArrayLike,
    H_res: ArrayLike,
    z: ArrayLike,
    g_in: ArrayLike,
) -> ConnectionGrads:
    """Closed-form backward of one HC sublayer.

    ``g_in = Jᵀ g_z`` is the branch's vector-Jacobian product at x_in applied to
    :func:`branch_cotangent` (the spec cannot know the branch; the caller supplies it).

    Shapes: G, X ``[..., n, d]``; h_pre, h_post ``[..., n]``; H_res ``[..., n, n]``;
    z, g_in ``[..., d]``. Returns gradients w.r.t. X ``[..., n, d]``, h_pre ``[..., n]``,
    h_post ``[..., n]``, H_res ``[..., n, n]``.
    Source: the chain rule on HC Eq. 3–5; proven as ``backward.closed_form``.
    """
    Ga, Xa = _f64("G", G, 2), _f64("X", X, 2)
    hp, hq, H = _f64("h_pre", h_pre, 1), _f64("h_post", h_post, 1), _f64("H_res", H_res, 2)
    za, gi = _f64("z", z, 1), _f64("g_in", g_in, 1)
    n, d = Xa.shape[-2:]
    _sizes("X", n, d)
    _check("G", Ga.shape[-2:], (n, d))
    _check("h_pre", hp.shape[-1:], (n,))
    _check("h_post", hq.shape[-1:], (n,))
    _check("H_res", H.shape[-2:], (n, n))
    _check("z", za.shape[-1:], (d,))
    _check("g_in", gi.shape[-1:], (d,))
    _batch(G=(Ga, 2), X=(Xa, 2), h_pre=(hp, 1), h_post=(hq, 1), H_res=(H, 2), z=(za, 1),
           g_in=(gi, 1))
    gX = np.vectorize(lambda g, h_, H_, gi_: _grad_X(g, _col(h_), H_, _col(gi_)),
                      signature="(n,d),(n),(n,n),(d)->(n,d)")(Ga, hp, H, gi)
    gH = np.vectorize(_grad_H_res, signature="(n,d),(n,d)->(n,n)")(Ga, Xa)
    gpost = np.vectorize(lambda g, z_: _grad_h_post(g, _col(z_))[:, 0],
                         signature="(n,d),(d)->(n)")(Ga, za)
    gpre = np.vectorize(lambda x, gi_: _grad_h_pre(x, _col(gi_))[:, 0],
                        signature="(n,d),(d)->(n)")(Xa, gi)
    return ConnectionGrads(
        X=np.asarray(gX, dtype=np.float64),
        h_pre=np.asarray(gpre, dtype=np.float64),
        h_post=np.asarray(gpost, dtype=np.float64),
        H_res=np.asarray(gH, dtype=np.float64),
    )


def connection_weights(h_pre: ArrayLike, h_post: ArrayLike, H_res: ArrayLike) -> Array:
    """The unrolled cross-layer weights of a stack of L sublayers, per token: entry ``(k, j)``
    is ``w_{j,k}``, the coefficient of node j's output in node k's input (node 0: the
    embedding ``h₀`` of ``X₀ = 1_n h₀ᵀ``; 1 … L: the sublayers; L + 1: the stream sum)::

        w_{0,k} = h_pre,kᵀ H_res,k-1 ⋯ H_res,1 1_n
        w_{j,k} = h_pre,kᵀ H_res,k-1 ⋯ H_res,j+1 h_post,j      (1 ≤ j < k)

    evaluated by the spec's own :func:`hcspec.spec.network.connection_weights` (theorem
    ``unroll.connection_weights``) on each token's weights, in exact arithmetic on their float64
    values.

    Shapes: h_pre, h_post ``[..., L, n]`` and H_res ``[..., L, n, n]`` (sublayer 1 first) ->
    ``[..., L + 2, L + 2]``, strictly lower triangular.
    Source: HC arXiv:2409.19606 §4.5 Eq. 20, App. F Eq. 27; mHC arXiv:2512.24880 Eq. 4.

    Raises:
        ValueError: shapes that do not match, or no sublayer (L = 0).
    """
    hp, hq, H = _f64("h_pre", h_pre, 2), _f64("h_post", h_post, 2), _f64("H_res", H_res, 3)
    layers, n = hp.shape[-2:]
    _sizes("h_pre", n)
    if layers < 1:
        raise ValueError("h_pre: expected at least one sublayer on axis -2, got L = 0")
    _check("h_post", hq.shape[-2:], (layers, n))
    _check("H_res", H.shape[-3:], (layers, n, n))
    _batch(h_pre=(hp, 2), h_post=(hq, 2), H_res=(H, 3))

    def unroll(p: Array, q: Array, r: Array) -> Array:
        weights = [network.ConnectionWeights(sympy.Matrix(p[k].tolist()).reshape(n, 1),
                                             sympy.Matrix(q[k].tolist()).reshape(n, 1),
                                             sympy.Matrix(r[k].tolist()))
                   for k in range(layers)]
        return np.asarray(network.connection_weights(weights).tolist(), dtype=np.float64)

    fn = np.vectorize(unroll, signature="(l,n),(l,n),(l,n,n)->(m,m)")
    return np.asarray(fn(hp, hq, H), dtype=np.float64)


def _last_axis(name: str, x: ArrayLike, eps: float) -> Array:
    xa = _f64(name, x, 1)
    if xa.shape[-1] < 1:
        raise ValueError(f"{name}: expected d >= 1 features on axis -1, got d = {xa.shape[-1]}")
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    return xa


def rms_norm(x: ArrayLike, eps: float = 0.0) -> Array:
    """RMSNorm without gain over the last axis: ``x / sqrt(‖x‖²/d + ε)``.

    Shapes: ``[..., d]`` -> ``[..., d]`` (float64). The formula of
    :func:`hcspec.spec.norms.rms_norm` (checked against it in the tests); mHC arXiv:2512.24880
    Eq. 7 applies it to vec(X).

    Raises:
        ValueError: ``x`` has no axis or an empty last axis, or ``eps`` < 0.
    """
    xa = _last_axis("x", x, eps)
    return np.asarray(xa / np.sqrt(np.mean(xa * xa, axis=-1, keepdims=True) + eps),
                      dtype=np.float64)


def layer_norm(x: ArrayLike, eps: float = 0.0) -> Array:
    """LayerNorm without affine over the last axis: ``(x − μ) / sqrt(σ² + ε)`` with the
    population variance σ².

    Shapes: ``[..., d]`` -> ``[..., d]`` (float64). The formula of
    :func:`hcspec.spec.norms.layer_norm` (checked against it in the tests); HC arXiv:2409.19606
    Eq. 10 applies it per stream before the dynamic projections.

    Raises:
        ValueError: ``x`` has no axis or an empty last axis, or ``eps`` < 0.
    """
    xa = _last_axis("x", x, eps)
    centred = xa - np.mean(xa, axis=-1, keepdims=True)
    return np.asarray(centred / np.sqrt(np.mean(centred * centred, axis=-1, keepdims=True) + eps),
                      dtype=np.float64)
