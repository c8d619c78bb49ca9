"""A worked adapter for an mHC sublayer written in JAX, checked by the kit through the framework
bridge (:mod:`hcspec.conformance.bridge`).

``read`` and ``write`` below stand for "someone else's JAX code", split at the branch call (mHC
arXiv:2512.24880 Eq. 3, 7–9, in the kit's row form): per token, the logits are
``α · (RMSNorm(vec(X)) φ) + b`` (Eq. 7), ``h_pre = σ(·)``, ``h_post = 2σ(·)`` (Eq. 8),
``H_res`` = 20 Sinkhorn–Knopp rounds of ``exp(·)``, columns then rows (Eq. 9, computed in
the log domain); ``x_in = h_preᵀ X`` goes to the branch, and ``X' = H_res X + h_post zᵀ``.
The bridge runs them in JAX (``jax.vjp`` for the backward; it turns on ``jax_enable_x64`` for
float64), calls the kit's torch branch once in between, and exposes φ, α and b as torch
tensors for the gradient properties.

Needs jax (recent jax needs Python >= 3.12) next to torch and hcspec. Run it:

    hc-conformance run examples.jax_mhc_adapter:make --profile quick
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hcspec.conformance.bridge import Built, Sublayer, bridged_target, jax_framework
from hcspec.conformance.protocol import Conventions

ITERATIONS = 20
"""Sinkhorn–Knopp rounds (t_max of mHC Eq. 9)."""

MAX_CACHED_SHAPES = 16
"""Distinct state shapes after which the bridge calls ``jax.clear_caches()`` (each compiled
shape keeps its executables and their memory mappings; docs/conformance.md has the figures)."""


def _jax() -> Any:
    import jax
    return jax


def coefficients(params: Any, x: Any) -> tuple[Any, Any, Any]:
    """``(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])`` at ``x [B,T,n,d]`` (row form)."""
    jax = _jax()
    jnp, nn = jax.numpy, jax.nn
    n = x.shape[-2]
    flat = x.reshape(*x.shape[:2], -1)
    # the mean square in float32 at least: in float16 a sum of n·d squares overflows (or
    # loses its low bits) long before the state itself does
    wide = flat.astype(jnp.promote_types(flat.dtype, jnp.float32))
    scale = jax.lax.rsqrt(jnp.mean(wide * wide, axis=-1, keepdims=True) + 1e-6)
    flat = flat * scale.astype(flat.dtype)
    logits = params["alpha"] * (flat @ params["phi"]) + params["b"]
    h_pre = nn.sigmoid(logits[..., :n])
    h_post = 2.0 * nn.sigmoid(logits[..., n:2 * n])
    # Sinkhorn–Knopp in the log domain (the same rounds as exp then normalisations, without
    # the 0/0 of a plain exp at large logits)
    # (one round in a jax.lax.fori_loop, as JAX code writes a fixed loop: XLA compiles the
    # round once, where a Python loop would unroll all 20 into the graph, ~20 s per shape)
    def round_(_: Any, log_m: Any) -> Any:
        log_m = log_m - nn.logsumexp(log_m, axis=-2, keepdims=True)  # columns,
        return log_m - nn.logsumexp(log_m, axis=-1, keepdims=True)  # then rows: H_res 1 = 1

    log_m = logits[..., 2 * n:].reshape(*x.shape[:2], n, n)
    log_m = jax.lax.fori_loop(0, ITERATIONS, round_, log_m)
    return h_pre, h_post, jnp.exp(log_m)


def read(params: Any, x: Any) -> tuple[Any, Any, Any]:
    """The branch input ``h_preᵀ X [B,T,d]`` and what ``write`` needs."""
    h_pre, h_post, h_res = coefficients(params, x)
    return _jax().numpy.einsum("btn,btnd->btd", h_pre, x), h_post, h_res


def write(params: Any, x: Any, z: Any, h_post: Any, h_res: Any) -> Any:
    """``X' = H_res X + h_post zᵀ`` per token."""
    del params
    return h_res @ x + h_post[..., None] * z[..., None, :]


def build(n: int, d: int, layer_index: int, seed: int) -> Built:
    """φ ~ N(0, 1/(n·d)), α = 0.1, b with ``h_pre`` favouring stream ``layer_index mod n`` and
    ``H_res`` near the identity (randomness from ``seed`` only). ``read``, ``write`` and
    ``coefficients`` are jitted (``jax.jit``), as JAX code runs in practice: XLA compiles each once
    per new input shape (and ``jax.vjp`` of a jitted function compiles its backward too)."""
    jit = _jax().jit
    rng = np.random.default_rng(seed)
    width = 2 * n + n * n
    b = np.zeros(width)
    b[layer_index % n] = 2.0
    b[2 * n:] = 4.0 * np.eye(n).reshape(-1)
    params = {"phi": rng.normal(0.0, (n * d) ** -0.5, (n * d, width)),
              "alpha": np.array(0.1), "b": b}
    return Built(params, Sublayer(read=jit(read), write=jit(write), weights=jit(coefficients)))


make = bridged_target(jax_framework, build, compute_dtype=None,
                      conventions=Conventions(sinkhorn_iterations=ITERATIONS,
                                              notes="examples/jax_mhc_adapter.py"),
                      bucket_tokens=True, max_cached_shapes=MAX_CACHED_SHAPES)
"""The kit target: ``make(n, d, *, layer_index=0, dtype=torch.float64, device="cpu",
seed=0)``."""
