"""The named salts of the kit's random streams.

Every tensor the kit draws comes from :func:`hcspec.conformance.strategies.gaussian`
``(shape, seed, salt, ...)``: the case's seed says *which* case, the salt says *which tensor of
the case* (the state, the upstream gradient, a perturbation direction, ...). Two tensors that
must be independent draw with different salts; this module gives every such role a name and a
block of salts of its own, and :func:`all_salts` lets a test check that no two blocks overlap.

A :class:`Salt` is a block ``[start, start + size)``; a role that draws several tensors (one per
parameter, one per direction) indexes into its block with :meth:`Salt.at`, which refuses an
index outside the block instead of silently sharing another role's salts.

>>> UPSTREAM_GRADIENT.at()
31
>>> FD_INPUT_DIRECTION.at(2)
42
>>> PERTURBATION.at(3)
1003
>>> FD_INPUT_DIRECTION.at(3)
Traceback (most recent call last):
...
IndexError: salt block 'finite-difference direction in x' holds indices [0, 3), got (3,)
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Final

MAX_PARAMETERS: Final = 1000
"""Most floating parameter tensors an impl may expose: the per-parameter blocks hold this many
salts per direction."""


@dataclass(frozen=True)
class Salt:
    """A block of salts for one role: ``start + row-major index`` over ``shape``.

    Attributes:
        name: the role, for messages and the distinctness test.
        start: the first salt of the block.
        shape: the index ranges (``()`` for a single salt).
    """

    name: str
    start: int
    shape: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        """How many salts the block holds."""
        return math.prod(self.shape)

    def at(self, *index: int) -> int:
        """The salt for ``index`` (one int per axis of ``shape``; none for a single salt).

        Raises:
            IndexError: wrong number of indices, or one outside its range.
        """
        if len(index) != len(self.shape) or any(
                not 0 <= i < size for i, size in zip(index, self.shape, strict=True)):
            bounds = ", ".join(f"[0, {s})" for s in self.shape) or "no index"
            raise IndexError(f"salt block {self.name!r} holds indices {bounds}, got {index}")
        offset = 0
        for i, size in zip(index, self.shape, strict=True):
            offset = offset * size + i
        return self.start + offset

    def salts(self) -> range:
        """Every salt of the block."""
        return range(self.start, self.start + self.size)


STATE: Final = Salt("stream state", 1)
"""The case's state ``X [B, T, n, d]`` (:func:`hcspec.conformance.strategies.stream_state`)."""
SECOND_STATE: Final = Salt("a second, independent state", 2)
LOGITS: Final = Salt("logits of hypothesis' doubly stochastic strategies", 7)
EXPAND_INPUT: Final = Salt("the input h [B, T, d] of expand", 11)
STACK_INPUT: Final = Salt("the input h of a stack of fresh connections", 13)
OTHER_BATCH_STATE: Final = Salt("the state whose other batch elements differ", 18)
OTHER_TOKENS_STATE: Final = Salt("the state whose other tokens differ", 24)
UPSTREAM_GRADIENT: Final = Salt("the upstream gradient G' of L = <G', X'>", 31)
FD_INPUT_DIRECTION: Final = Salt("finite-difference direction in x", 40, (3,))
SINKHORN_UPSTREAM: Final = Salt("the upstream gradient G of <G, H_res> (variant family)", 77)
DEPTH_STATE: Final = Salt("the input state of a stack of L sublayers (depth family)", 78)
AFFINE_LOGITS_STATE: Final = Salt("state k of the logits-affine check", 91, (3,))
AFFINE_LOGITS_MAP: Final = Salt(
    "the linear map of the logits-affine check's low-precision floor", 94)
BRANCH_CONSTANT: Final = Salt("the constant branch's c", 101)
BRANCH_FIRST_WEIGHT: Final = Salt("the first weight matrix of the mlp/linear branches", 102)
BRANCH_SECOND_WEIGHT: Final = Salt("the second weight matrix of the mlp branch", 103)
WEIGHT_ROUNDING_DRAWS: Final = 8
"""How many moves of the reported weights a low-precision floor draws."""
WEIGHT_ROUNDING: Final = Salt(
    "the low-precision floors' move j of reported weight k within half an ulp", 104,
    (WEIGHT_ROUNDING_DRAWS, 3))
PERTURBATION: Final = Salt("the case's perturbation of parameter i", 1000, (MAX_PARAMETERS,))
FD_PARAMETER_DIRECTION: Final = Salt(
    "finite-difference direction k in parameter i", 2000, (3, MAX_PARAMETERS))
SPAN_PERTURBATION: Final = Salt(
    "the H_post span check's direction k in parameter i", 20_000, (3, MAX_PARAMETERS))


def all_salts() -> tuple[Salt, ...]:
    """Every named block of this module."""
    return tuple(v for v in globals().values() if isinstance(v, Salt))


def overlaps() -> list[tuple[str, str]]:
    """The pairs of blocks that share a salt (empty when every role draws independently)."""
    blocks = sorted(all_salts(), key=lambda s: s.start)
    return [(a.name, b.name) for a, b in itertools.pairwise(blocks)
            if a.start + a.size > b.start]
