"""A NumPy-only stand-in "framework" for the bridge's tests: a pure NumPy mHC sublayer whose
functions carry hand-written vjps, so CI without mlx or jax still checks
:mod:`hcspec.conformance.bridge` end to end.

The sublayer (mHC arXiv:2512.24880 Eq. 3, 7–9, in the kit's row form): per token,
``l = vec(X) W + b`` split into ``l_pre [n]``, ``l_post [n]``, ``l_res [n, n]``;
``h_pre = σ(l_pre)``, ``h_post = 2σ(l_post)``, ``H_res`` = ``ITERATIONS`` Sinkhorn–Knopp rounds of
``exp(l_res)`` (columns, then rows: rows exact); ``x_in = h_preᵀ X``;
``X' = H_res X + h_post zᵀ``. Nothing here imports torch or the kit's reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

ITERATIONS = 6
"""Sinkhorn–Knopp rounds of the stand-in (declared to the kit)."""


def _sigmoid(v: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-v))
    return out


def _split(params: Mapping[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, ...]:
    n = x.shape[-2]
    flat = x.reshape(*x.shape[:2], -1)
    logits = flat @ params["W"] + params["b"]
    return flat, logits[..., :n], logits[..., n:2 * n], logits[..., 2 * n:].reshape(
        *x.shape[:2], n, n)


def _sinkhorn(l_res: np.ndarray) -> tuple[np.ndarray, list[tuple[np.ndarray, int]]]:
    """``H_res`` and the tape (each normalised matrix's input and axis) for the vjp."""
    m = np.exp(l_res - l_res.max(axis=(-2, -1), keepdims=True))
    tape = []
    for _ in range(ITERATIONS):
        for axis in (-2, -1):
            tape.append((m, axis))
            m = m / m.sum(axis=axis, keepdims=True)
    return m, tape


def _sinkhorn_vjp(h_res: np.ndarray, tape: list[tuple[np.ndarray, int]],
                  g: np.ndarray) -> np.ndarray:
    """``∂/∂l_res`` from ``g = ∂/∂H_res`` (M' = M / s: ``∂M = (g − Σ_axis g M') / s``)."""
    out = h_res
    for m, axis in reversed(tape):
        s = m.sum(axis=axis, keepdims=True)
        g = (g - (g * out).sum(axis=axis, keepdims=True)) / s
        out = m
    return g * out  # through exp (the max shift leaves the normalised result unchanged)


def coefficients(params: Mapping[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(h_pre, h_post, H_res)`` at ``x [B, T, n, d]``."""
    _, l_pre, l_post, l_res = _split(params, x)
    return _sigmoid(l_pre), 2.0 * _sigmoid(l_post), _sinkhorn(l_res)[0]


def coefficients_vjp(params: Mapping[str, np.ndarray], x: np.ndarray, g_pre: np.ndarray,
                     g_post: np.ndarray, g_res: np.ndarray,
                     wrong: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``(∂/∂params, ∂/∂x)`` of the coefficients for their cotangents. ``wrong`` plants a bug
    (the sigmoid's derivative without its ``1 − σ`` factor) for the break-once test."""
    flat, l_pre, l_post, l_res = _split(params, x)
    s_pre, s_post = _sigmoid(l_pre), _sigmoid(l_post)
    h_res, tape = _sinkhorn(l_res)
    d_pre = g_pre * s_pre * (1.0 if wrong else (1.0 - s_pre))
    d_post = g_post * 2.0 * s_post * (1.0 - s_post)
    d_res = _sinkhorn_vjp(h_res, tape, g_res).reshape(*x.shape[:2], -1)
    d_logits = np.concatenate([d_pre, d_post, d_res], axis=-1)
    grads = {"W": np.einsum("bti,btj->ij", flat, d_logits), "b": d_logits.sum(axis=(0, 1))}
    g_x = (d_logits @ params["W"].T).reshape(x.shape)
    return grads, g_x


class VjpFunction:
    """A stand-in function ``fn(params, *arrays)`` with its hand-written vjp
    ``vjp(params, arrays, cotangents) -> (param grads by name, *array grads)``."""

    def __init__(self, fn: Callable[..., Any], vjp: Callable[..., Any]) -> None:
        self.fn, self._vjp = fn, vjp

    def __call__(self, params: Mapping[str, np.ndarray], *arrays: np.ndarray) -> Any:
        return self.fn(params, *arrays)

    def vjp(self, params: Mapping[str, np.ndarray], arrays: Sequence[np.ndarray],
            cotangents: Sequence[np.ndarray]) -> Any:
        return self._vjp(params, arrays, cotangents)


def _read(params: Mapping[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, ...]:
    h_pre, h_post, h_res = coefficients(params, x)
    return np.einsum("btn,btnd->btd", h_pre, x), h_post, h_res


def make_read(wrong: bool = False) -> VjpFunction:
    """``read(params, x) -> (x_in, h_post, H_res)`` with its vjp (``wrong``: see
    :func:`coefficients_vjp`)."""
    def vjp(params: Mapping[str, np.ndarray], arrays: Sequence[np.ndarray],
            cot: Sequence[np.ndarray]) -> tuple[Any, ...]:
        (x,) = arrays
        g_in, g_post, g_res = cot
        h_pre = coefficients(params, x)[0]
        g_pre = np.einsum("btd,btnd->btn", g_in, x)
        grads, g_x = coefficients_vjp(params, x, g_pre, g_post, g_res, wrong)
        return grads, g_x + h_pre[..., None] * g_in[..., None, :]
    return VjpFunction(_read, vjp)


def _write(params: Mapping[str, np.ndarray], x: np.ndarray, z: np.ndarray, h_post: np.ndarray,
           h_res: np.ndarray) -> np.ndarray:
    out: np.ndarray = h_res @ x + h_post[..., None] * z[..., None, :]
    return out


def _write_vjp(params: Mapping[str, np.ndarray], arrays: Sequence[np.ndarray],
               cot: Sequence[np.ndarray]) -> tuple[Any, ...]:
    x, z, h_post, h_res = arrays
    (g,) = cot
    zeros = {k: np.zeros_like(v) for k, v in params.items()}
    return (zeros, np.swapaxes(h_res, -1, -2) @ g, np.einsum("btn,btnd->btd", h_post, g),
            np.einsum("btnd,btd->btn", g, z), g @ np.swapaxes(x, -1, -2))


def _weights_vjp(params: Mapping[str, np.ndarray], arrays: Sequence[np.ndarray],
                 cot: Sequence[np.ndarray]) -> tuple[Any, ...]:
    (x,) = arrays
    return coefficients_vjp(params, x, *cot)


WRITE = VjpFunction(_write, _write_vjp)
WEIGHTS = VjpFunction(coefficients, _weights_vjp)


def init(n: int, d: int, seed: int) -> dict[str, np.ndarray]:
    """The stand-in's parameters: ``W ~ N(0, 0.1²)`` [n·d, 2n + n²], ``b ~ N(0, 0.5²)``."""
    rng = np.random.default_rng(seed)
    width = 2 * n + n * n
    return {"W": rng.normal(0.0, 0.1, (n * d, width)), "b": rng.normal(0.0, 0.5, width)}


class NumpyFramework:
    """The stand-in framework: NumPy arrays; its vjp is the functions' hand-written one
    (through the bridge's :class:`~hcspec.conformance.bridge.FlatFunction`)."""

    name = "numpy-standin"

    def __init__(self) -> None:
        self.calls = 0

    def asarray(self, value: np.ndarray, dtype: str) -> np.ndarray:
        return np.asarray(value, dtype="float32" if dtype == "bfloat16" else dtype)

    def to_numpy(self, array: np.ndarray) -> np.ndarray:
        return array

    def dtype_name(self, array: np.ndarray) -> str:
        return str(array.dtype)

    def call(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any]) -> Sequence[Any]:
        self.calls += 1
        return list(fn(*primals))

    def vjp(self, fn: Any, primals: Sequence[Any],
            cotangents: Sequence[Any]) -> Sequence[Any]:
        count = len(fn.names)
        params = dict(zip(fn.names, primals[:count], strict=True))
        param_grads, *array_grads = fn.fn.vjp(params, primals[count:], cotangents)
        return [param_grads[k] for k in fn.names] + list(array_grads)
