"""The chunks of x_in are gathered for the branch in reverse rank order (a gather that lists
the ranks the wrong way round): a token-mixing branch sees the sequence shuffled, a
hidden-mixing one the columns. ``parallel.branch_gathered`` catches it and says which chunks
arrived where."""

from __future__ import annotations

import torch

from hcspec.conformance.protocol import HyperConnectionImpl
from hcspec.reference.connection import Branch, apply_connection
from hcspec.reference.sharded import (
    ShardedManifoldHyperConnection,
    all_gather,
    local_chunk,
    split_axis,
)
from tests.mutants._parallel._sharded import make_with

BUG_CLASS = "distributed: shards gathered in the wrong order"
CAUGHT_BY = ("parallel.branch_gathered",)


class ReversedGather(ShardedManifoldHyperConnection):
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        axis = split_axis(self.split)

        def local_branch(x_in: torch.Tensor) -> torch.Tensor:
            chunks = all_gather(x_in, axis, self.group).chunk(self.world, dim=axis)
            gathered = torch.cat(chunks[::-1], dim=axis)  # the bug: reversed rank order
            return local_chunk(branch(gathered), self.split, self.rank, self.world)

        return apply_connection(x, local_branch, *self.weights(x))


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
    return make_with(ReversedGather, n, d, layer_index=layer_index, dtype=dtype,
                     device=device, seed=seed)
