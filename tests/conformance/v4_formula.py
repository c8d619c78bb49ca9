"""Correct DeepSeek-V4-formula targets (the stand-ins of the false-positive soak and of the
finite-difference tests): the module computes, from the flattened state in float32,

* ``mixes = (vec(X) @ hc_fnᵀ) · rsqrt(mean(vec(X)²) + norm_eps)`` (mHC Eq. 7, one projection);
* ``pre = σ(mixes_pre · hc_scale[0] + hc_base_pre) + eps`` (σ + eps);
* ``post = 2 σ(mixes_post · hc_scale[1] + hc_base_post)``;
* ``comb = softmax(mixes_res · hc_scale[2] + hc_base_res, dim=-1) + eps``, one column
  normalisation, then (iters − 1) × (row, column) normalisations with eps in the denominators
  (``comb[i, j]``: input stream i into output stream j);

with float32 parameters whatever the state's dtype (``keep_float32``), and is made a kit target
by :func:`hcspec.conformance.adapters.deepseek_v4_style.v4_style_target` (the caller's
composition ``X'_j = post_j F(Σ_i pre_i X_i) + Σ_i comb[i, j] X_i``).

:func:`make` takes any state dtype (float64 states: the kit's default working dtype);
:func:`make_bfloat16` rounds any state to bfloat16 and returns bfloat16 (the serving-engine
style: bfloat16 residual state, float32 parameters and weights inside).
"""

from __future__ import annotations

import dataclasses
from typing import cast

import torch
from torch import nn

from hcspec.conformance.adapters.deepseek_v4_style import Decomposition, v4_style_target
from hcspec.conformance.protocol import Branch, Conventions, HyperConnectionImpl

EPS = 1e-6
NORM_EPS = 1e-6
ITERATIONS = 20


class V4Formula(nn.Module):
    """The DeepSeek-V4 pre/post/comb of the module docstring; parameters ``hc_fn
    [(2 + n)·n, n·d]``, ``hc_scale [3]``, ``hc_base [(2 + n)·n]``."""

    def __init__(self, n: int, d: int) -> None:
        super().__init__()
        self.n = n
        mixes = (2 + n) * n
        self.hc_fn = nn.Parameter(torch.randn(mixes, n * d) * (n * d) ** -0.5)
        self.hc_scale = nn.Parameter(torch.full((3,), 0.5))
        self.hc_base = nn.Parameter(torch.randn(mixes) * 0.1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x [B, T, n, d]`` (any dtype) -> ``(pre, post [B, T, n], comb [B, T, n, n])``,
        float32."""
        n = self.n
        flat = x.flatten(2).float()
        mixes = (flat @ self.hc_fn.T) * torch.rsqrt(flat.square().mean(-1, keepdim=True)
                                                     + NORM_EPS)
        base = self.hc_base
        pre = torch.sigmoid(mixes[..., :n] * self.hc_scale[0] + base[:n]) + EPS
        post = 2 * torch.sigmoid(mixes[..., n:2 * n] * self.hc_scale[1] + base[n:2 * n])
        logits = (mixes[..., 2 * n:] * self.hc_scale[2] + base[2 * n:]).unflatten(-1, (n, n))
        comb = torch.softmax(logits, dim=-1) + EPS
        comb = comb / (comb.sum(dim=-2, keepdim=True) + EPS)
        for _ in range(ITERATIONS - 1):
            comb = comb / (comb.sum(dim=-1, keepdim=True) + EPS)
            comb = comb / (comb.sum(dim=-2, keepdim=True) + EPS)
        return pre, post, comb


def _decompose(module: V4Formula, x: torch.Tensor) -> Decomposition:
    pre, post, comb = module(x)
    return Decomposition(pre.to(x.dtype), post.to(x.dtype), comb.to(x.dtype))


CONVENTIONS = Conventions(
    sinkhorn_variant="softmax", sinkhorn_iterations=ITERATIONS,
    sinkhorn_iterations_count="rounds_from_softmax", sinkhorn_additive_eps=EPS,
    sinkhorn_denominator_eps=EPS, h_pre_eps=EPS, compute_dtype=torch.float32,
    notes="DeepSeek-V4 formulas (σ + eps, 2σ, softmax + eps Sinkhorn–Knopp), float32 "
          "parameters; comb[i, j]: input i into output j")

_make = v4_style_target(lambda n, d, layer: V4Formula(n, d), _decompose, comb="source_target",
                        conventions=CONVENTIONS, keep_float32=True)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
    """The float32-parameter DeepSeek-V4-formula target for a state of ``dtype``."""
    return _make(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)


class BFloat16State(nn.Module):
    """The target of :func:`make` run on a bfloat16 residual state: any input is rounded to
    bfloat16, composed there (float32 parameters and weights inside) and returned in bfloat16
    (declared ``output_dtype``); the branch receives the bfloat16 aggregate in the input's
    dtype."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.n, self.d, self.kind = inner.n, inner.d, inner.kind
        self.conventions = dataclasses.replace(CONVENTIONS, output_dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """``x [B, T, n, d]`` (any float dtype) -> ``X'`` in bfloat16."""
        def in_input_dtype(z: torch.Tensor) -> torch.Tensor:
            return branch(z.to(x.dtype)).to(torch.bfloat16)

        out: torch.Tensor = self.inner.forward(x.to(torch.bfloat16), in_input_dtype)
        return out

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The weights at the bfloat16-rounded state, in bfloat16."""
        h_pre, h_post, H_res = self.inner.weights(x.to(torch.bfloat16))
        return h_pre, h_post, H_res


def make_bfloat16(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                  device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
    """As :func:`make` on a bfloat16 residual state (the serving-engine style: bfloat16 state,
    float32 parameters and weights inside), for an input of any dtype."""
    del dtype  # the state is bfloat16 whatever the input; the parameters float32
    inner = _make(n, d, layer_index=layer_index, dtype=torch.bfloat16, device=device,
                  seed=seed)
    return cast(HyperConnectionImpl, BFloat16State(cast(nn.Module, inner)))
