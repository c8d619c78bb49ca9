"""Sharded conformance: the ``parallel`` family, run across ``torch.distributed`` ranks.

:func:`check_parallel` (Python), :func:`assert_parallel_conforms` (pytest) and
``hc-conformance run TARGET --world-size N`` (the CLI) start N ranks on this machine (gloo on
the CPU, NCCL on CUDA), run the target sharded by tokens and by the hidden axis, and compare
with the same target run unsharded in one process. The capability an adapter offers is
described in :mod:`.protocol`; the properties in :mod:`.properties`; docs/conformance.md
("Sharded conformance") has a worked adapter.
"""

from hcspec.conformance.parallel.harness import (
    DEFAULT_TIMEOUT,
    assert_parallel_conforms,
    check_parallel,
)
from hcspec.conformance.parallel.properties import PROPERTIES, ParallelProperty
from hcspec.conformance.parallel.protocol import (
    SPLITS,
    ParameterShard,
    ShardedImpl,
    ShardingError,
    SupportsSharding,
    sharding_splits,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "PROPERTIES",
    "SPLITS",
    "ParallelProperty",
    "ParameterShard",
    "ShardedImpl",
    "ShardingError",
    "SupportsSharding",
    "assert_parallel_conforms",
    "check_parallel",
    "sharding_splits",
]
