"""A stack of independent sublayers (no carried state), for adapters whose package has
consecutive layers but no single pass: the kit's ``stack`` capability
(:class:`hcspec.conformance.protocol.Stack`) from L impls run one after the other.

Each sublayer computes its own coefficients from its own input, so the ``stack.*`` family
checks how the package's consecutive layers compose (the unrolled weights, the stream sum, the
gradients through L sublayers) rather than a carried state; an adapter for a package that does
carry state (DeepSeek-V4.1's fused pre of the next sublayer) writes its own ``Stack`` instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from hcspec.conformance.protocol import (
    Branch,
    HyperConnectionImpl,
    Weights,
    has_parameters,
    has_weights,
)


class SequentialStack:
    """``layers`` impls run in order: ``X_{k+1} = sublayers[k].forward(X_k, branches[k])``.

    Attributes ``n``, ``d``, ``layers`` and the methods follow
    :class:`hcspec.conformance.protocol.Stack`, without ``weights`` (the kit detects a
    capability by presence): :class:`WeightedSequentialStack` adds it, and
    :func:`sequential_stack` picks the class.

    Args:
        sublayers: the impls in order (sublayer 0 first), sharing ``n`` and ``d``.

    Raises:
        ValueError: no sublayer, or sublayers that differ in ``n`` or ``d``.
    """

    def __init__(self, sublayers: Sequence[HyperConnectionImpl]) -> None:
        if not sublayers:
            raise ValueError("a stack needs at least one sublayer, got none")
        first = sublayers[0]
        for k, sub in enumerate(sublayers):
            if (sub.n, sub.d) != (first.n, first.d):
                raise ValueError(f"sublayer {k} has n={sub.n}, d={sub.d}; sublayer 0 has "
                                 f"n={first.n}, d={first.d}")
        self._sublayers = list(sublayers)
        self.n, self.d, self.layers = first.n, first.d, len(self._sublayers)
        self.kind: str = first.kind

    def forward(self, x: torch.Tensor, branches: Sequence[Branch]) -> torch.Tensor:
        """``X_L`` from ``x [B,T,n,d]``; ``branches[k]`` is called once, by sublayer k.

        Raises:
            ValueError: ``branches`` does not hold one branch per sublayer; whatever a
                sublayer raises.
        """
        return self._run(x, branches, record=False)[0]

    def sublayer(self, k: int) -> HyperConnectionImpl:
        """Sublayer ``k`` (the impl itself).

        Raises:
            IndexError: ``k`` is not in ``0 … layers − 1``.
        """
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < self.layers:
            raise IndexError(f"sublayer {k!r}: expected an int in 0 … {self.layers - 1}")
        return self._sublayers[k]

    def parameters(self) -> Iterator[torch.Tensor]:
        """Every sublayer's parameters, sublayer 0 first (each tensor once)."""
        seen: set[int] = set()
        for sub in self._sublayers:
            if has_parameters(sub):
                for p in sub.parameters():
                    if id(p) not in seen:
                        seen.add(id(p))
                        yield p

    def _run(self, x: torch.Tensor, branches: Sequence[Branch],
             record: bool) -> tuple[torch.Tensor, list[Weights]]:
        if len(branches) != self.layers:
            raise ValueError(f"expected one branch per sublayer ({self.layers}), got "
                             f"{len(branches)}")
        used: list[Weights] = []
        for sub, branch in zip(self._sublayers, branches, strict=True):
            if record and has_weights(sub):
                used.append(sub.weights(x))
            x = sub.forward(x, branch)
        return x, used


class WeightedSequentialStack(SequentialStack):
    """A :class:`SequentialStack` of sublayers that all offer ``weights(x)``."""

    def weights(self, x: torch.Tensor, branches: Sequence[Branch]) -> list[Weights]:
        """Each sublayer's ``weights`` at the state entering it, in order (runs the stack,
        each branch called once)."""
        return self._run(x, branches, record=True)[1]


def sequential_stack(sublayers: Sequence[HyperConnectionImpl]) -> SequentialStack:
    """A :class:`WeightedSequentialStack` when every sublayer offers ``weights(x)``, else a
    :class:`SequentialStack`.

    Raises:
        ValueError: as :class:`SequentialStack`.
    """
    if all(has_weights(s) for s in sublayers):
        return WeightedSequentialStack(sublayers)
    return SequentialStack(sublayers)
