"""The sharding capability of hcspec's reference targets (``reference:hc-static``,
``reference:hc-dynamic``, ``reference:mhc``, ``reference:mhc-fast``), built on
:mod:`hcspec.reference.sharded`.

Each factory is the built-in one of :mod:`hcspec.conformance.adapters.reference` plus
``shard_splits = ("tokens", "hidden")`` and ``shard(split, group)``. The parameter map: a
parameter indexed by d (mHC's φ rows, dynamic HC's ``W``) is sharded under ``"hidden"`` and its
gradient is complete on its rank (``gradient="target"``: the backward of the weight
generation's all-reduce sums the upstream gradients); every other parameter is replicated and
its gradient is summed over the group by the framework (``gradient="framework"``).

The reference targets' declarations name these factories in ``BuiltinTarget.sharding``
(:mod:`hcspec.conformance.adapters.declarations.reference`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
import torch.distributed as dist

from hcspec.conformance.adapters import reference as adapters
from hcspec.conformance.parallel.protocol import SPLITS, ParameterShard
from hcspec.conformance.protocol import Branch, HyperConnectionImpl
from hcspec.reference.connection import HyperConnection
from hcspec.reference.sharded import ShardedHyperConnection, shard_connection


class ReferenceShard:
    """:class:`~hcspec.conformance.parallel.protocol.ShardedImpl` of a reference
    :class:`~hcspec.reference.sharded.ShardedHyperConnection`."""

    def __init__(self, module: ShardedHyperConnection) -> None:
        self.module = module

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """This rank's chunk of X' (:meth:`ShardedHyperConnection.forward`)."""
        out: torch.Tensor = self.module(x, branch)
        return out

    def parameter_shards(self) -> Sequence[ParameterShard]:
        """Sharded (``gradient="target"``) for the parameters the split cuts, replicated
        (``gradient="framework"``) for the rest."""
        shards = []
        for name, param in self.module.named_parameters():
            if self.module.is_sharded(name):
                shards.append(ParameterShard(
                    name, param, "sharded",
                    functools.partial(self.module.shard_parameter, name), "target"))
            else:
                shards.append(ParameterShard(name, param))
        return shards


def _shard(module: HyperConnection, split: str, group: dist.ProcessGroup) -> ReferenceShard:
    return ReferenceShard(shard_connection(module, split, group))


def with_sharding(impl: HyperConnectionImpl) -> HyperConnectionImpl:
    """Add the sharding capability to a reference module (in place; returned for chaining).

    Raises:
        TypeError: ``impl`` is not a reference connection module.
    """
    if not isinstance(impl, HyperConnection):
        raise TypeError(f"expected a hcspec reference connection, got {type(impl).__name__}")
    module = cast(Any, impl)
    module.shard_splits = SPLITS
    module.shard = functools.partial(_shard, impl)
    return impl


def _sharded(make: Callable[..., Any], name: str) -> Callable[..., HyperConnectionImpl]:
    def factory(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
        return with_sharding(make(n, d, layer_index=layer_index, dtype=dtype, device=device,
                                  seed=seed))
    # named as the module attribute it is bound to below, so that it pickles by reference
    # (spawned ranks receive the factory by pickling)
    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = (f"{name} of hcspec.conformance.adapters.reference with the "
                       "sharding capability (splits tokens and hidden).")
    return factory


make_hc_static = _sharded(adapters.make_hc_static, "make_hc_static")
make_hc_dynamic = _sharded(adapters.make_hc_dynamic, "make_hc_dynamic")
make_mhc = _sharded(adapters.make_mhc, "make_mhc")
make_mhc_fast = _sharded(adapters.make_mhc_fast, "make_mhc_fast")
