"""The machinery of the ``parallel`` family (:mod:`hcspec.conformance.families.parallel`): the
sharding capability an adapter offers (:mod:`.protocol`), the cases (:mod:`.cases`), the ranks
(:mod:`.worker`), spawned here (:mod:`.harness`) or those of a torch.distributed launcher
(:mod:`.launcher`), and the reference targets' sharding (:mod:`.reference_targets`).

The family runs through the common runner: ``hc-conformance run TARGET --world-size N`` (the
catalogue and the family in one report), ``torchrun --nproc-per-node N -m hcspec.conformance
run TARGET --only parallel``, or ``hcspec.conformance.check_parallel`` (Python) and
``hcspec.conformance.assert_parallel_conforms`` (pytest), front ends over the session
(:mod:`hcspec.conformance.run.session`). docs/conformance.md ("Sharded conformance") has a
worked adapter.
"""

from __future__ import annotations

from hcspec.conformance.parallel.protocol import (
    SPLITS,
    ParameterShard,
    ShardedImpl,
    ShardingError,
    SupportsSharding,
    local_chunk,
    sharding_splits,
    split_axis,
)

__all__ = [
    "SPLITS",
    "ParameterShard",
    "ShardedImpl",
    "ShardingError",
    "SupportsSharding",
    "local_chunk",
    "sharding_splits",
    "split_axis",
]
