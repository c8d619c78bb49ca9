"""Static hyper-connections (SHC): learned constant h_pre, h_post, H_res.

HC arXiv:2409.19606 §2 (Eq. 1–5) and the initialisation of Eq. 14 / Alg. 2, in the row form
of docs/reference.md (``h_pre = A_m``, ``h_post = Bᵀ``, ``H_res = A_rᵀ``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import torch
from torch import nn

from hcspec.reference import _checks, published
from hcspec.reference.connection import HyperConnection, Weights


class StaticHyperConnection(published.Published, HyperConnection):
    """Static HC around one sublayer: ``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` with constants.

    Parameters (row form): ``h_pre [n]`` (HC ``A_m``), ``h_post [n]`` (HC ``Bᵀ``),
    ``H_res [n, n]`` (HC ``A_rᵀ``). Initialisation for sublayer ``layer_index = k`` (0-based,
    attention and FFN counted separately; HC Eq. 14): ``h_pre = e_{k mod n}``, ``H_res = I``,
    ``h_post = 1`` — so a stack of freshly built SHCs equals a pre-norm residual network.

    Args:
        n: expansion rate (number of residual streams), ≥ 1.
        d: hidden size, ≥ 1.
        layer_index: index k of the sublayer in the network, ≥ 0.
        dtype, device: of the parameters (torch's defaults when None).

    Shapes/dtype/device of calls: see :class:`hcspec.reference.connection.HyperConnection`.
    :meth:`weights` returns the three parameters broadcast to ``[B, T, ...]``.

    Raises:
        ValueError: ``n`` or ``d`` not a positive integer, ``layer_index`` negative.
    """

    kind: ClassVar[str] = "hc-static"
    conventions: ClassVar[Mapping[str, object]] = MappingProxyType({
        **HyperConnection.conventions, "published": "hc-static"})
    """The reference's declaration, and its published layout: HC's ``B = h_post``,
    ``A_m = h_pre``, ``A_r = H_resᵀ`` (:mod:`hcspec.reference.published`)."""
    NAMES: ClassVar[published.NameMap] = published.NameMap(
        "hc-static", {"B": "h_post", "A_m": "h_pre", "A_r": "H_res"}, frozenset({"A_r"}))

    def __init__(
        self,
        n: int,
        d: int,
        layer_index: int,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(n, d)
        self.layer_index = _checks.non_negative_int("layer_index", layer_index)
        self.h_pre = nn.Parameter(torch.empty(self.n, dtype=dtype, device=device))
        self.h_post = nn.Parameter(torch.empty(self.n, dtype=dtype, device=device))
        self.H_res = nn.Parameter(torch.empty(self.n, self.n, dtype=dtype, device=device))
        self.reset_static_parameters()

    def reset_static_parameters(self) -> None:
        """Set the HC Eq. 14 init: ``h_pre = e_{k mod n}``, ``H_res = I``, ``h_post = 1``."""
        with torch.no_grad():
            self.h_pre.zero_()
            self.h_pre[self.layer_index % self.n] = 1.0
            self.h_post.fill_(1.0)
            self.H_res.copy_(torch.eye(self.n, dtype=self.H_res.dtype, device=self.H_res.device))

    def _static_weights(self, x: torch.Tensor) -> Weights:
        batch, tokens = x.shape[:2]
        n = self.n
        return (
            self.h_pre.expand(batch, tokens, n),
            self.h_post.expand(batch, tokens, n),
            self.H_res.expand(batch, tokens, n, n),
        )

    def _weights(self, x: torch.Tensor) -> Weights:
        return self._static_weights(x)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, layer_index={self.layer_index}"
