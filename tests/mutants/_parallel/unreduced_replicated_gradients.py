"""The replicated parameters are declared ``gradient="target"`` (the target says it sums their
gradients over the group itself) but nothing does: each rank keeps the gradient of its own
share of the loss. The forward is right; ``parallel.parameter_gradients`` catches it."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from hcspec.conformance.parallel.protocol import ParameterShard
from hcspec.conformance.parallel.reference_targets import ReferenceShard
from hcspec.conformance.protocol import HyperConnectionImpl
from hcspec.reference.sharded import ShardedManifoldHyperConnection
from tests.mutants._parallel._sharded import make_with

BUG_CLASS = "distributed: gradients of replicated parameters never reduced"
CAUGHT_BY = ("parallel.parameter_gradients",)


class ClaimsToReduce(ReferenceShard):
    def parameter_shards(self) -> Sequence[ParameterShard]:
        return [ParameterShard(s.name, s.local, s.placement, s.shard, "target")
                for s in super().parameter_shards()]


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
    return make_with(ShardedManifoldHyperConnection, n, d, layer_index=layer_index,
                     dtype=dtype, device=device, seed=seed, shard_type=ClaimsToReduce)
