"""Mutant: static HC initialised with A_m = h_pre = 1 (all ones) instead of e_{k mod n}
(HC Eq. 14).

Bug class: ranges / init. The branch then reads the sum of the streams, which at init is n
times the pre-norm residual stream: the network is not a pre-norm residual network at init.
Caught by: reduction.static_init and reduction.init_prenorm_stack.
"""

from __future__ import annotations

import torch

from hcspec.reference import StaticHyperConnection
from tests.mutants._base import build

BUG_CLASS = "ranges/init: static init with A_m = ones, not e_(k mod n)"
CAUGHT_BY = ("reduction.static_init", "reduction.init_prenorm_stack")


class OnesInit(StaticHyperConnection):
    def reset_static_parameters(self) -> None:
        super().reset_static_parameters()
        with torch.no_grad():
            self.h_pre.fill_(1.0)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0):  # type: ignore[no-untyped-def]
    return build(OnesInit, n, d, layer_index, dtype, device, seed)
