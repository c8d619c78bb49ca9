"""The array frameworks the bridge ships: MLX (:func:`mlx_framework`) and JAX
(:func:`jax_framework`), each importing its framework only when called."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hcspec.conformance.bridge.crossing import (
    Framework,
)


class _Mlx:
    """MLX (``mlx.core``) as a :class:`Framework`: ``mx.vjp``; arrays through NumPy."""

    name = "mlx"

    def __init__(self) -> None:
        # the framework is imported here, when a target is built
        self.mx: Any = importlib.import_module("mlx.core")

    def asarray(self, value: np.ndarray, dtype: str) -> Any:
        target = getattr(self.mx, dtype)
        return self.mx.array(value, dtype=self.mx.float32 if dtype == "bfloat16" else target
                             ).astype(target)

    def to_numpy(self, array: Any) -> np.ndarray:
        if array.dtype == self.mx.bfloat16:
            array = array.astype(self.mx.float32)
        return np.array(array)

    def dtype_name(self, array: Any) -> str:
        return str(array.dtype).removeprefix("mlx.core.")

    def call(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any]) -> Sequence[Any]:
        outputs = list(fn(*primals))
        self.mx.eval(outputs)
        return outputs

    def vjp(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any],
            cotangents: Sequence[Any]) -> Sequence[Any]:
        _, grads = self.mx.vjp(lambda *a: list(fn(*a)), list(primals), list(cotangents))
        self.mx.eval(grads)
        return list(grads)


class _Jax:
    """JAX as a :class:`Framework`: ``jax.vjp``; arrays through NumPy. Turns on
    ``jax_enable_x64`` (JAX's switch for float64, off by default: a float64 state would
    otherwise cross as float32)."""

    name = "jax"

    def __init__(self) -> None:
        # the framework is imported here, when a target is built
        self.jax: Any = importlib.import_module("jax")
        self.jax.config.update("jax_enable_x64", True)
        self.jnp: Any = importlib.import_module("jax.numpy")

    def asarray(self, value: np.ndarray, dtype: str) -> Any:
        return self.jnp.asarray(value).astype(self.jnp.dtype(dtype))

    def to_numpy(self, array: Any) -> np.ndarray:
        if array.dtype == self.jnp.bfloat16:
            array = array.astype(self.jnp.float32)
        return np.asarray(array)

    def dtype_name(self, array: Any) -> str:
        return str(array.dtype)

    def call(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any]) -> Sequence[Any]:
        return list(fn(*primals))

    def vjp(self, fn: Callable[..., Sequence[Any]], primals: Sequence[Any],
            cotangents: Sequence[Any]) -> Sequence[Any]:
        _, pull = self.jax.vjp(lambda *a: tuple(fn(*a)), *primals)
        return list(pull(tuple(cotangents)))

    def clear_caches(self) -> None:
        """Drop every compiled executable (``jax.clear_caches``): a bridged target with
        ``max_cached_shapes`` calls it, bounding the memory mappings each compiled shape
        keeps (``vm.max_map_count``)."""
        self.jax.clear_caches()


def mlx_framework() -> Framework:
    """MLX as a :class:`Framework` (imports ``mlx.core``).

    Raises:
        ImportError: mlx is not installed.
    """
    return _Mlx()


def jax_framework() -> Framework:
    """JAX as a :class:`Framework` (imports ``jax`` and turns on ``jax_enable_x64``).

    Raises:
        ImportError: jax is not installed.
    """
    return _Jax()
