"""Static hyper-connections (SHC): HC arXiv:2409.19606 §2.1 Eq. 1–5, init Eq. 14 and Alg. 2.

The learnable constants are the blocks of the paper's (n+1)×(n+1) matrix
``HC = [[0, B], [A_m, A_r]]``: ``A_m ∈ R^{n×1}``, ``B ∈ R^{1×n}``, ``A_r ∈ R^{n×n}`` (the corner
is the constant 0, not a parameter). Init for sublayer ``k = layer_index`` (Eq. 14):
``A_m = e_{k mod n}``, ``A_r = I_n``, ``B = 1ᵀ`` — i.e. ``h_pre = e_{k mod n}``, ``H_res = I``,
``h_post = 1``, which makes a stack of fresh SHC layers a pre-norm residual network.

Written independently of ``reference/`` (the conformance kit's false-positive check).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tests.independent._paper_layout import PaperLayoutConnection, check_factory_arguments


def init_static_blocks(
    n: int, layer_index: int, dtype: torch.dtype, device: torch.device
) -> tuple[Tensor, Tensor, Tensor]:
    """Eq. 14 init of the static blocks: ``(A_m [n,1], B [1,n], A_r [n,n])``.

    ``A_m = e_{layer_index mod n}``, ``B = 1ᵀ``, ``A_r = I``; dtype/device as given.
    """
    a_m = torch.zeros(n, 1, dtype=dtype, device=device)
    a_m[layer_index % n, 0] = 1
    b = torch.ones(1, n, dtype=dtype, device=device)
    a_r = torch.eye(n, dtype=dtype, device=device)
    return a_m, b, a_r


def assemble_hc_matrix(a_m: Tensor, b: Tensor, a_r: Tensor) -> Tensor:
    """Stack blocks into ``[[0, B], [A_m, A_r]]`` (HC Eq. 1); blocks expand to the longest lead.

    Shapes: ``a_m [..., n, 1]``, ``b [..., 1, n]``, ``a_r [..., n, n]`` -> ``[..., n+1, n+1]``.
    """
    lead = max((a_m.shape[:-2], b.shape[:-2], a_r.shape[:-2]), key=len)  # expand checks the rest
    n = a_r.shape[-1]
    corner = torch.zeros((*lead, 1, 1), dtype=a_r.dtype, device=a_r.device)
    top = torch.cat([corner, b.expand(*lead, 1, n)], dim=-1)
    bottom = torch.cat([a_m.expand(*lead, n, 1), a_r.expand(*lead, n, n)], dim=-1)
    return torch.cat([top, bottom], dim=-2)


class StaticHyperConnection(PaperLayoutConnection):
    """SHC for one sublayer (attention or FFN); weights do not depend on the input.

    Parameters: ``A_m [n,1]``, ``B [1,n]``, ``A_r [n,n]`` (paper layout). See
    :class:`PaperLayoutConnection` for ``forward``/``weights``/``expand``/``reduce``.
    """

    kind = "hc-static"

    def __init__(self, n: int, d: int, layer_index: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        super().__init__(n, d, dtype, device)
        self.layer_index = layer_index
        a_m, b, a_r = init_static_blocks(n, layer_index, dtype, device)
        self.A_m = nn.Parameter(a_m)
        self.B = nn.Parameter(b)
        self.A_r = nn.Parameter(a_r)

    def hc_matrix(self, x: Tensor) -> Tensor:
        """The constant matrix repeated per token: ``x [B,T,n,d]`` -> ``[B,T,n+1,n+1]``."""
        matrix = assemble_hc_matrix(self.A_m, self.B, self.A_r)
        return matrix.expand(*x.shape[:-2], self.n + 1, self.n + 1)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> StaticHyperConnection:
    """Conformance-kit factory for static HC (the kit's adapter protocol).

    ``seed`` is accepted for the protocol and unused: the Eq. 14 init is deterministic.

    Raises:
        TypeError, ValueError: invalid ``n``, ``d``, ``layer_index``, ``dtype``, ``device``
            or ``seed`` (message names the expected and received value).
    """
    resolved = check_factory_arguments(n, d, layer_index, dtype, device, seed)
    return StaticHyperConnection(n, d, layer_index, dtype, resolved)
