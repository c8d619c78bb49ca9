"""This rank's chunk is picked by its *global* rank (``dist.get_rank()``) instead of its rank
in the group it was given (``dist.get_rank(group)``). On a group of ranks ``[0, k)`` the two
agree, so every other parallel property passes; on a group that does not start at rank 0
(rank 1 of 2, ranks 2–3 of 4) the index falls outside the group.
``parallel.subgroups`` catches it."""

from __future__ import annotations

import torch
import torch.distributed as dist

from hcspec.conformance.protocol import HyperConnectionImpl
from hcspec.reference.sharded import ShardedManifoldHyperConnection
from tests.mutants._parallel._sharded import make_with

BUG_CLASS = "distributed: chunk picked by the global rank, not the rank in the group"
CAUGHT_BY = ("parallel.subgroups",)


class GlobalRank(ShardedManifoldHyperConnection):
    @property  # type: ignore[override]
    def rank(self) -> int:
        return dist.get_rank()  # the bug: meant dist.get_rank(self.group)

    @rank.setter
    def rank(self, value: int) -> None:
        del value  # the group rank the base class computes is ignored


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
    return make_with(GlobalRank, n, d, layer_index=layer_index, dtype=dtype, device=device,
                     seed=seed)
