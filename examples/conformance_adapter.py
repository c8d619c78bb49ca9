"""A complete worked adapter: making a third-party HC layer checkable by the conformance kit.

``FoldedStaticHC`` stands for "someone else's code": it keeps the n residual streams folded
into the batch as ``[B·n, T, d]`` (b-major), stores the paper's ``A_m``, ``B`` and ``A_r``
(HC arXiv:2409.19606 Eq. 1–5, paper layout: ``A_r`` is ``H_resᵀ``) and applies a parameter-free
RMS norm to the aggregate before calling the branch. The adapter translates all of that to the
kit's protocol (``[B, T, n, d]``, row convention) and *declares* the norm instead of hiding it.

Run it:  hc-conformance run examples.conformance_adapter:make --profile quick
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from hcspec.conformance.protocol import Conventions

Branch = Callable[[torch.Tensor], torch.Tensor]


class FoldedStaticHC(nn.Module):
    """The third-party layer: streams folded into the batch, paper-layout weights."""

    def __init__(self, n: int, d: int, layer_index: int) -> None:
        super().__init__()
        self.n = n
        a_m = torch.zeros(n)
        a_m[layer_index % n] = 1.0
        self.A_m = nn.Parameter(a_m)  # [n]: read weights
        self.B = nn.Parameter(torch.ones(n))  # [n]: write weights
        self.A_r = nn.Parameter(torch.eye(n))  # [n, n]: A_r[i, j] = weight of old stream i in new j

    def forward(self, h: torch.Tensor, branch: Branch) -> torch.Tensor:
        bn, t, d = h.shape
        streams = h.view(bn // self.n, self.n, t, d)  # [B, n, T, d]
        x_in = torch.einsum("n,bntd->btd", self.A_m, streams)
        z = branch(x_in * torch.rsqrt(x_in.pow(2).mean(-1, keepdim=True) + 1e-6))
        mixed = torch.einsum("ij,bitd->bjtd", self.A_r, streams)
        out = mixed + self.B.view(1, -1, 1, 1) * z.unsqueeze(1)
        return out.reshape(bn, t, d)


class Adapter(nn.Module):
    """Presents :class:`FoldedStaticHC` as the kit's protocol (hcspec.conformance.protocol)."""

    kind = "hc-static"
    conventions = Conventions(
        branch_input="rms_norm", norm_eps=1e-6,
        notes="streams folded as [B·n, T, d]; A_r = H_resᵀ; RMS norm before the branch",
    )

    def __init__(self, inner: FoldedStaticHC, d: int) -> None:
        super().__init__()
        self.inner, self.n, self.d = inner, inner.n, d

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        b, t, n, d = x.shape  # kit layout [B, T, n, d] -> theirs [B·n, T, d]
        folded = x.permute(0, 2, 1, 3).reshape(b * n, t, d)
        out: torch.Tensor = self.inner(folded, branch)
        return out.view(b, n, t, d).permute(0, 2, 1, 3)

    def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, n, _ = x.shape  # row convention: h_pre = A_m, h_post = Bᵀ, H_res = A_rᵀ
        return (self.inner.A_m.expand(b, t, n), self.inner.B.expand(b, t, n),
                self.inner.A_r.T.expand(b, t, n, n))

    def expand(self, h: torch.Tensor) -> torch.Tensor:
        return h.unsqueeze(-2).expand(*h.shape[:-1], self.n, h.shape[-1]).contiguous()

    def reduce(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=-2)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> Adapter:
    """FoldedStaticHC behind its adapter (TARGET examples.conformance_adapter:make).

    Its first line is the description in the report's header, so it is plain text.
    """
    torch.manual_seed(seed)  # this layer's init is deterministic; seed kept for the protocol
    return Adapter(FoldedStaticHC(n, d, layer_index), d).to(dtype=dtype, device=device)
