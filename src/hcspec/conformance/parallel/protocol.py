"""The sharding capability of the adapter protocol (optional; the ``parallel`` family needs it).

An impl (:class:`hcspec.conformance.protocol.HyperConnectionImpl`) that can run sharded across
the ranks of a ``torch.distributed`` process group offers two attributes:

* ``shard_splits`` — the splits it supports, a subset of :data:`SPLITS`: ``"tokens"`` (the
  token axis T, sequence/context parallel) and ``"hidden"`` (the model axis d);
* ``shard(split, group) -> ShardedImpl`` — called on every rank of ``group`` with an impl the
  factory built from the same arguments (the same seed) on every rank, it returns this rank's
  sharded impl (:class:`ShardedImpl`).

The layout the kit uses: the full state ``X [B, T, n, d]`` is cut into ``W`` equal contiguous
chunks along T (``"tokens"``) or along d, the same columns of every stream (``"hidden"``);
rank r of the group holds chunk r. ``ShardedImpl.forward(x_local, branch)`` maps this rank's
chunk of X to its chunk of X'. ``branch`` is the whole sublayer ``F`` as a function of the full
``[B, T, d]`` input, the same callable on every rank: the impl calls it exactly once, on its
chunk of ``x_in = h_preᵀ X`` gathered across the group (the whole sequence in order, or the
whole hidden vector), and keeps its own chunk of the output. (An implementation whose sublayer
runs sharded inside — Megatron-LM's tensor-parallel attention — adapts by gathering in its
adapter: the kit checks the connection, not the sublayer's parallelism.)

``ShardedImpl.parameter_shards()`` says how every parameter of the unsharded impl (by its name
in ``named_parameters()``) lives on this rank (:class:`ParameterShard`): replicated, or sharded
with an indexing function from the full tensor to the local one; and who completes its
gradient across ranks: the target itself (its backward's collectives, or a gradient that is
complete locally) or the training framework — the kit then does what the framework does, a
sum all-reduce over the group (DDP and Megatron-LM's gradient all-reduce; they average because
their per-rank losses are means, the kit's loss is one sum), and the report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable

import torch
import torch.distributed as dist

from hcspec.conformance.protocol import Branch

# The layout is the kit's (one statement, see that module); re-exported here.
from hcspec.formulas.sharding import SPLITS as SPLITS
from hcspec.formulas.sharding import Split as Split
from hcspec.formulas.sharding import local_chunk as local_chunk
from hcspec.formulas.sharding import split_axis as split_axis

Placement = Literal["replicated", "sharded"]
PLACEMENTS: Final[tuple[Placement, ...]] = ("replicated", "sharded")
GradientOwner = Literal["target", "framework"]
GRADIENT_OWNERS: Final[tuple[GradientOwner, ...]] = ("target", "framework")

SHARDING: Final = "sharding"
"""The capability's name in reports (next to :data:`hcspec.conformance.protocol.CAPABILITIES`)."""


class ShardingError(TypeError):
    """An impl's sharding declaration cannot be used (the message names what is wrong)."""


@dataclass(frozen=True)
class ParameterShard:
    """How one parameter of the unsharded impl lives on this rank.

    Attributes:
        name: the parameter's name in the unsharded impl's ``named_parameters()``.
        local: the tensor the sharded forward uses on this rank (a leaf; the kit reads its
            ``.grad`` after backward).
        placement: ``"replicated"`` (``local`` equals the full parameter) or ``"sharded"``
            (``local == shard(full)``).
        shard: for ``"sharded"``: full tensor -> this rank's part, by indexing only (slicing,
            ``reshape``, ``permute``; no arithmetic), so the kit can apply it to an index
            tensor to learn which entries this rank holds. None for ``"replicated"``.
        gradient: ``"target"`` — after the sharded backward ``local.grad`` is already this
            rank's part of the full gradient; ``"framework"`` — it is this rank's share and
            the framework sums it over the group (the kit does that all-reduce).

    Raises:
        ShardingError: on construction, for a value outside the ones above, a sharded
            parameter without ``shard`` or a replicated one with it.
    """

    name: str
    local: torch.Tensor
    placement: Placement = "replicated"
    shard: Callable[[torch.Tensor], torch.Tensor] | None = None
    gradient: GradientOwner = "framework"

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ShardingError(f"parameter {self.name!r}: placement must be one of "
                                f"{PLACEMENTS}, got {self.placement!r}")
        if self.gradient not in GRADIENT_OWNERS:
            raise ShardingError(f"parameter {self.name!r}: gradient must be one of "
                                f"{GRADIENT_OWNERS}, got {self.gradient!r}")
        if (self.placement == "sharded") != (self.shard is not None):
            raise ShardingError(f"parameter {self.name!r}: a sharded parameter needs shard, a "
                                "replicated one must not have it")
        if not isinstance(self.local, torch.Tensor):
            raise ShardingError(f"parameter {self.name!r}: local must be a tensor")


@runtime_checkable
class ShardedImpl(Protocol):
    """This rank's part of a sharded hyper-connected sublayer."""

    def forward(self, x: torch.Tensor, branch: Branch) -> torch.Tensor:
        """This rank's chunk of X' from its chunk of X (see the module docstring)."""
        ...

    def parameter_shards(self) -> Sequence[ParameterShard]:
        """One entry per parameter of the unsharded impl."""
        ...


@runtime_checkable
class SupportsSharding(Protocol):
    """Optional: the impl runs sharded across a process group."""

    shard_splits: Sequence[str]

    def shard(self, split: str, group: dist.ProcessGroup) -> ShardedImpl:
        """This rank's :class:`ShardedImpl` for ``split`` over ``group``."""
        ...


def sharding_splits(impl: object) -> tuple[Split, ...]:
    """The splits ``impl`` declares, in :data:`SPLITS` order; ``()`` when it has no sharding
    capability (no callable ``shard`` or no ``shard_splits``).

    Raises:
        ShardingError: ``shard_splits`` is not a sequence of known split names, or empty.
    """
    declared = getattr(impl, "shard_splits", None)
    if declared is None or not callable(getattr(impl, "shard", None)):
        return ()
    if isinstance(declared, str) or not isinstance(declared, Sequence):
        raise ShardingError(f"impl.shard_splits: expected a sequence of {SPLITS}, "
                            f"got {declared!r}")
    unknown = [s for s in declared if s not in SPLITS]
    if unknown or not declared:
        raise ShardingError(f"impl.shard_splits: expected a non-empty subset of {SPLITS}, "
                            f"got {list(declared)!r}")
    return tuple(s for s in SPLITS if s in declared)


def check_sharded(sharded: object) -> ShardedImpl:
    """``sharded`` as a :class:`ShardedImpl`.

    Raises:
        ShardingError: ``shard`` returned something without ``forward`` or
            ``parameter_shards``.
    """
    if not callable(getattr(sharded, "forward", None)) or not callable(
            getattr(sharded, "parameter_shards", None)):
        raise ShardingError(f"impl.shard returned a {type(sharded).__name__} without forward "
                            "and parameter_shards (see hcspec.conformance.parallel.protocol)")
    assert isinstance(sharded, ShardedImpl)
    return sharded
