"""DeepSeek-V4's hyper-connection, written from its published parameterization.

The module holds the tensors of DeepSeek-V4's layout under their checkpoint names (``hc_fn``,
``hc_scale``, ``hc_base``, :mod:`hcspec.reference.published`) and computes one step from them
with the published formulas (``pre = σ(·) + hc_eps``, ``post = 2σ(·)``, ``comb`` by
Sinkhorn–Knopp from ``softmax + hc_eps`` with ``hc_eps`` in the denominators, ``X' = post ·
F(Σ_i pre_i X_i) + combᵀ X``). In this project's row form ``H_res = combᵀ``, whose rows are
normalised last.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import torch
from torch import nn

from hcspec.reference import published
from hcspec.reference.connection import HyperConnection, Weights

INIT_STD = 0.02
"""Std of ``hc_fn`` at init (DeepSeek-V4's ``initializer_range``); ``hc_base = 0`` and
``hc_scale = 1``, as transformers' ``_init_weights`` does."""


class DeepSeekV4HyperConnection(published.Published, HyperConnection):
    """DeepSeek-V4's mHC around one sublayer (kind ``mhc``).

    Parameters: ``hc_fn [(n+2)n, n·d]`` (``N(0, 0.02)``), ``hc_scale [3]`` (ones), ``hc_base
    [(n+2)n]`` (zeros). Settings: ``hc_eps``, ``norm_eps`` (1e-6 each) and
    ``sinkhorn_iters`` (20).

    Shapes/dtype/device of calls: see :class:`hcspec.reference.connection.HyperConnection`;
    for float16/bfloat16 states the weights are computed in float32 and cast back.

    Raises:
        ValueError: ``n`` or ``d`` not a positive integer; an eps outside [0, 1) or
            ``sinkhorn_iters < 1``.
    """

    kind: ClassVar[str] = "mhc"
    NAMES: ClassVar[published.NameMap] = published.NameMap(
        "deepseek-v4", {"hc_fn": "hc_fn", "hc_scale": "hc_scale", "hc_base": "hc_base"},
        settings={"hc_eps": "hc_eps", "norm_eps": "norm_eps",
                  "sinkhorn_iters": "sinkhorn_iterations"})

    def __init__(self, n: int, d: int, layer_index: int = 0, *, hc_eps: float = 1e-6,
                 norm_eps: float = 1e-6, sinkhorn_iters: int = 20,
                 dtype: torch.dtype | None = None,
                 device: torch.device | str | None = None) -> None:
        super().__init__(n, d)
        del layer_index  # no layer-dependent init
        for name, value in (("hc_eps", hc_eps), ("norm_eps", norm_eps)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must lie in [0, 1), got {value!r}")
        if sinkhorn_iters < 1:
            raise ValueError(f"sinkhorn_iters must be >= 1, got {sinkhorn_iters!r}")
        self.hc_eps, self.norm_eps = float(hc_eps), float(norm_eps)
        self.sinkhorn_iterations = int(sinkhorn_iters)
        mix = (self.n + 2) * self.n
        self.hc_fn = nn.Parameter(torch.empty(mix, self.n * self.d, dtype=dtype, device=device))
        self.hc_scale = nn.Parameter(torch.ones(3, dtype=dtype, device=device))
        self.hc_base = nn.Parameter(torch.zeros(mix, dtype=dtype, device=device))
        with torch.no_grad():
            self.hc_fn.normal_(0.0, INIT_STD)

    @property
    def conventions(self) -> Mapping[str, object]:  # type: ignore[override]
        """The declaration: DeepSeek-V4's Sinkhorn variant and eps, ``published``."""
        return MappingProxyType({
            "branch_input": "x_in", "reduce": "sum", "published": "deepseek-v4",
            "sinkhorn_iterations": self.sinkhorn_iterations, "sinkhorn_variant": "softmax",
            "sinkhorn_iterations_count": "rounds_from_softmax", "sinkhorn_exact_axis": "rows",
            "sinkhorn_additive_eps": self.hc_eps, "sinkhorn_denominator_eps": self.hc_eps,
            "h_pre_eps": self.hc_eps,
            "notes": ("hcspec reference DeepSeek-V4 mHC from hc_fn/hc_scale/hc_base: "
                      "H_res = combᵀ; reduce sums the streams")})

    formula: published.Formula | None = None
    """The step record computed (None: the published one at this module's settings; a test's
    mutant sets another, :func:`hcspec.reference.published.formula` with a field changed)."""

    def _weights(self, x: torch.Tensor) -> Weights:
        # float16/bfloat16 states: the weights are computed in float32 (as DeepSeek-V4 does;
        # hc_eps and the normalisations do not fit those formats) and cast back
        work = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        h_pre, h_post, H_res = published.weights("deepseek-v4", self.published_parameters(),
                                                 work, self.formula)
        return h_pre.to(x.dtype), h_post.to(x.dtype), H_res.to(x.dtype)
