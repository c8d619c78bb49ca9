"""Shared piece of the parallel mutants: the reference mHC target whose ``shard`` builds a
given (wrong) sharded class."""

from __future__ import annotations

import functools
from typing import Any, cast

import torch
import torch.distributed as dist

from hcspec.conformance.parallel.reference_targets import ReferenceShard
from hcspec.conformance.parallel.reference_targets import make_mhc as make_sharded_mhc
from hcspec.conformance.protocol import HyperConnectionImpl
from hcspec.reference.connection import HyperConnection
from hcspec.reference.sharded import ShardedHyperConnection


def _shard(cls: type[ShardedHyperConnection], shard_type: type[ReferenceShard],
           module: HyperConnection, split: str, group: dist.ProcessGroup) -> ReferenceShard:
    return shard_type(cls(module, split, group))


def make_with(cls: type[ShardedHyperConnection], n: int, d: int, *, layer_index: int = 0,
              dtype: torch.dtype = torch.float64, device: str = "cpu", seed: int = 0,
              shard_type: type[ReferenceShard] = ReferenceShard) -> HyperConnectionImpl:
    """``reference:mhc`` with the sharding capability, sharding by ``cls`` (and declaring its
    parameters by ``shard_type``)."""
    impl = make_sharded_mhc(n, d, layer_index=layer_index, dtype=dtype, device=device,
                            seed=seed)
    cast(Any, impl).shard = functools.partial(_shard, cls, shard_type, impl)
    return impl
