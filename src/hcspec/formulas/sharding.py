"""How the kit cuts a hyper-connection state across the ranks of a process group: the split
names and each rank's chunk.

A full state ``X [B, T, n, d]`` (and a branch input ``[B, T, d]``) is cut into ``W`` equal
contiguous chunks along the token axis T (``"tokens"``: sequence/context parallel) or along the
hidden axis d, the same columns of every stream (``"hidden"``: tensor parallel); rank ``r`` of
the group holds chunk ``r``.

The layout is written once, here: the kit's ``parallel`` family cuts its inputs with it and the
sharded reference (:mod:`hcspec.reference.sharded`) shards with it, so the kit never takes it
from the reference. Imports only torch.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

import torch

Split = Literal["tokens", "hidden"]
SPLITS: Final[tuple[Split, ...]] = get_args(Split)
"""``tokens``: the token axis T (sequence parallel); ``hidden``: the model axis d."""

_AXIS: Final[dict[str, int]] = {"tokens": 1, "hidden": -1}


def split_axis(split: str) -> int:
    """The axis ``split`` cuts, valid for ``[B, T, n, d]`` states and ``[B, T, d]`` branch
    inputs alike: 1 for ``"tokens"``, -1 for ``"hidden"``.

    Raises:
        ValueError: ``split`` is not one of :data:`SPLITS`.
    """
    if split not in _AXIS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return _AXIS[split]


def local_chunk(full: torch.Tensor, split: str, rank: int, world: int) -> torch.Tensor:
    """Rank ``rank``'s chunk of ``full`` along ``split``'s axis: the ``rank``-th of ``world``
    equal contiguous chunks (a view; any shape whose axis is ``split_axis(split)``).

    Raises:
        ValueError: unknown ``split``, ``rank`` outside ``[0, world)``, or the axis length not
            divisible by ``world`` (the message names both).
    """
    axis = split_axis(split)
    if not 0 <= rank < world:
        raise ValueError(f"rank must lie in [0, {world}), got {rank}")
    size = full.shape[axis]
    if size % world:
        what = "T" if split == "tokens" else "d"
        raise ValueError(f"{what} = {size} is not divisible by the world size {world}")
    step = size // world
    return full.narrow(axis, rank * step, step)
