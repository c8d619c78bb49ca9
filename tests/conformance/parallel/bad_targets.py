"""Targets that misbehave on one rank, for the harness's failure handling: one raises in its
sharded forward on rank 1, one waits on rank 1 for a message its peers never send."""

from __future__ import annotations

import functools
from typing import Any, cast

import torch
import torch.distributed as dist

from hcspec.conformance.parallel.reference_targets import ReferenceShard
from hcspec.conformance.parallel.reference_targets import make_mhc as make_sharded_mhc
from hcspec.conformance.protocol import Branch, HyperConnectionImpl
from hcspec.reference.connection import HyperConnection
from hcspec.reference.sharded import shard_connection


class RaisesOnRank1(ReferenceShard):
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        if self.module.rank == 1:
            raise RuntimeError("boom on rank 1")
        return super().forward(x, branch)


class HangsOnRank1(ReferenceShard):
    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        if self.module.rank == 1:
            dist.recv(torch.zeros(1, dtype=x.dtype), src=0)  # never sent
        return super().forward(x, branch)


def _shard(cls: type[ReferenceShard], module: HyperConnection, split: str,
           group: dist.ProcessGroup) -> ReferenceShard:
    return cls(shard_connection(module, split, group))


def _make(cls: type[ReferenceShard], n: int, d: int, **kwargs: Any) -> HyperConnectionImpl:
    impl = make_sharded_mhc(n, d, **kwargs)
    cast(Any, impl).shard = functools.partial(_shard, cls, impl)
    return impl


make_raising = functools.partial(_make, RaisesOnRank1)
make_hanging = functools.partial(_make, HangsOnRank1)


def make_unsharded_raising(n: int, d: int, **kwargs: Any) -> HyperConnectionImpl:
    """Builds, but its unsharded forward raises (the sample impl is only built, not run)."""
    impl = make_sharded_mhc(n, d, **kwargs)

    def forward(x: torch.Tensor, branch: Branch) -> torch.Tensor:
        raise ValueError("unsharded forward refused")

    cast(Any, impl).forward = forward
    return impl
