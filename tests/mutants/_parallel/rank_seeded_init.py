"""Every rank seeds its initialisation with ``seed + rank`` (a per-rank seed meant for dropout
that also seeds the parameters): the replicated φ differ between ranks, and from the unsharded
impl built from the same seed. ``parallel.replicated_init`` catches it."""

from __future__ import annotations

import torch
import torch.distributed as dist

from hcspec.conformance.parallel.reference_targets import make_mhc as make_sharded_mhc
from hcspec.conformance.protocol import HyperConnectionImpl

BUG_CLASS = "distributed: rank-dependent initialisation of replicated parameters"
CAUGHT_BY = ("parallel.replicated_init",)


def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
         device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
    rank = dist.get_rank() if dist.is_initialized() else 0
    return make_sharded_mhc(n, d, layer_index=layer_index, dtype=dtype, device=device,
                            seed=seed + rank)
