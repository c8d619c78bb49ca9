"""Dynamic hyper-connections (DHC): the static weights plus small input-dependent terms.

HC arXiv:2409.19606 §2, Eq. 10–13 (and Alg. 2), in paper layout for one token with
``H ∈ R^{n×d}``::

    H̄      = norm(H)                          per-stream LayerNorm, no learnable parameters
    B(H)   = s_β · tanh(H̄ W_β)ᵀ + B           W_β: d×1   -> 1×n
    A_m(H) = s_α · tanh(H̄ W_m)  + A_m         W_m: d×1   -> n×1
    A_r(H) = s_α · tanh(H̄ W_r)  + A_r         W_r: d×n   -> n×n, row i computed from stream i

and in this project's row form ``h_pre = A_m``, ``h_post = Bᵀ``, ``H_res = A_rᵀ``, i.e.
``H_res(X)[j, i] = s_α · tanh(X̄_i · W_r[:, j]) + H_res[j, i]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from hcspec.reference import published
from hcspec.reference.connection import HyperConnection, Weights
from hcspec.reference.static import StaticHyperConnection

SCALE_INIT = 0.01
"""Initial ``s_α`` and ``s_β`` (HC Eq. 10–13 / Alg. 2: small scales, dynamic part W = 0)."""


class DynamicHyperConnection(StaticHyperConnection):
    """Dynamic HC around one sublayer: static weights + ``s · tanh(norm(X) W)`` per token.

    Parameters: the static part ``h_pre [n]``, ``h_post [n]``, ``H_res [n, n]`` (as
    :class:`~hcspec.reference.static.StaticHyperConnection`, same init), and the dynamic part
    ``W_pre [d]`` (HC ``W_m``), ``W_post [d]`` (HC ``W_β``), ``W_res [d, n]`` (HC ``W_r``, paper
    layout: column j gives entry ``A_r[i, j]`` from stream i), and the scalars ``s_alpha``
    (shared by ``A_m`` and ``A_r``) and ``s_beta``. Init: ``W = 0``, ``s_α = s_β = 0.01``, so at
    init DHC equals SHC exactly. Parameter count ``(n + 2) d + n² + 2n + 2``.

    Args:
        n, d, layer_index, dtype, device: as for the static connection.
        norm_eps: ε of the parameter-free per-stream LayerNorm.
        scale_init: initial value of ``s_α`` and ``s_β``.

    Shapes/dtype/device of calls: see :class:`hcspec.reference.connection.HyperConnection`;
    :meth:`weights` returns per-token weights that depend on ``x``.

    Raises:
        ValueError: as the static connection; ``norm_eps`` not positive.
    """

    kind: ClassVar[str] = "hc-dynamic"
    conventions: ClassVar[Mapping[str, object]] = MappingProxyType({
        **HyperConnection.conventions, "published": "hc-dynamic"})
    """The reference's declaration, and its published layout (HC Eq. 10-13 names)."""
    NAMES: ClassVar[published.NameMap] = published.NameMap(
        "hc-dynamic", {"B": "h_post", "A_m": "h_pre", "A_r": "H_res", "W_beta": "W_post",
                       "W_m": "W_pre", "W_r": "W_res", "s_alpha": "s_alpha",
                       "s_beta": "s_beta"}, frozenset({"A_r"}), {"norm_eps": "norm_eps"})

    def __init__(
        self,
        n: int,
        d: int,
        layer_index: int,
        *,
        norm_eps: float = 1e-5,
        scale_init: float = SCALE_INIT,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(n, d, layer_index, dtype=dtype, device=device)
        if not norm_eps > 0:
            raise ValueError(f"norm_eps must be > 0, got {norm_eps!r}")
        self.norm_eps = float(norm_eps)
        self.W_pre = nn.Parameter(torch.zeros(self.d, dtype=dtype, device=device))
        self.W_post = nn.Parameter(torch.zeros(self.d, dtype=dtype, device=device))
        self.W_res = nn.Parameter(torch.zeros(self.d, self.n, dtype=dtype, device=device))
        self.s_alpha = nn.Parameter(torch.full((), float(scale_init), dtype=dtype, device=device))
        self.s_beta = nn.Parameter(torch.full((), float(scale_init), dtype=dtype, device=device))

    def _weights(self, x: torch.Tensor) -> Weights:
        h_pre, h_post, H_res = self._static_weights(x)
        x_bar = F.layer_norm(x, (self.d,), eps=self.norm_eps)  # [B, T, n, d], per stream
        dyn_pre = self.s_alpha * torch.tanh(x_bar @ self.W_pre)  # [B, T, n]
        dyn_post = self.s_beta * torch.tanh(x_bar @ self.W_post)  # [B, T, n]
        dyn_A_r = self.s_alpha * torch.tanh(x_bar @ self.W_res)  # [B, T, n, n], paper A_r layout
        return h_pre + dyn_pre, h_post + dyn_post, H_res + dyn_A_r.transpose(-1, -2)
