"""The machinery of the ``parallel`` family (:mod:`hcspec.conformance.families.parallel`): the
sharding capability an adapter offers (:mod:`.protocol`), the cases (:mod:`.cases`), the ranks
(:mod:`.worker`), spawned here (:mod:`.harness`) or those of a torch.distributed launcher
(:mod:`.launcher`), and the reference targets' sharding (:mod:`.reference_targets`).

The family runs through the common runner: ``hc-conformance run TARGET --world-size N`` (the
catalogue and the family in one report), ``torchrun --nproc-per-node N -m hcspec.conformance
run TARGET --only parallel``, or :func:`check_parallel` (Python) and
:func:`assert_parallel_conforms` (pytest). docs/conformance.md ("Sharded conformance") has a
worked adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hcspec.conformance.outputs import report as rp
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
    "assert_parallel_conforms",
    "check_parallel",
    "local_chunk",
    "sharding_splits",
    "split_axis",
]


def check_parallel(target: str | Callable[..., Any] | None = None, *, world_size: int = 2,
                   only: Sequence[str] | None = None, **options: Any) -> rp.Report:
    """:func:`hcspec.conformance.run.session.check_implementation` on ``world_size`` ranks, by
    default only the ``parallel`` family (``only``); ``options`` as ``check_implementation``
    takes them (``device``, ``seed``, ``skip``, ``timeout``, ``profile``, ...).

    Raises:
        As ``check_implementation``; ValueError: ``world_size`` < 1.
    """
    # the front end, not a dependency
    from hcspec.conformance.run.session import check_implementation

    return check_implementation(target, world_size=world_size,
                                only=list(only) if only else ["parallel"], **options)


def assert_parallel_conforms(target: str | Callable[..., Any] | None = None, *,
                             world_size: int = 2, **options: Any) -> rp.Report:
    """:func:`check_parallel`, for pytest: returns the report when nothing failed
    unexpectedly, else raises ``AssertionError`` with every failure (property, message).

    Raises:
        AssertionError: a property failed or errored, or the setup failed.
        As :func:`check_parallel` for bad arguments.
    """
    report = check_parallel(target, world_size=world_size, **options)
    if report.ok:
        return report
    lines = [f"{report.target} on {world_size} ranks: the parallel family failed"]
    if report.setup_error:
        lines.append(f"setup: {report.setup_error}")
    lines += [f"{r.id} {r.status}: {r.message}" for r in report.results
              if r.status in rp.UNEXPECTED]
    raise AssertionError("\n".join(lines))
