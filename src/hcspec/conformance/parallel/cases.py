"""The cases of the ``parallel`` family and what each rank and the unsharded run share: the
inputs, the upstream gradient, the branch and the parameter perturbation, all drawn from the
case's seed so that every process builds the same ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch

from hcspec.conformance.parallel.protocol import Split

if TYPE_CHECKING:  # imported on use: the registry imports the parallel family, which imports this
    from hcspec.conformance.strategies import Case

PERTURB_STD = 0.1
"""Noise added to every parameter before the forward (moves dynamic HC's ``W`` off zero, so
the hidden split's projections are exercised)."""


@dataclass(frozen=True)
class ParallelCase:
    """One configuration: ``split``, expansion rate ``n``, hidden size ``d``, ``batch``,
    ``tokens``, ``layer_index`` and ``seed``."""

    index: int
    split: Split
    n: int
    d: int
    batch: int
    tokens: int
    layer_index: int
    seed: int

    def describe(self) -> str:
        """``split=hidden n=4 d=8 B=2 T=4 seed=3`` (for messages)."""
        return (f"split={self.split} n={self.n} d={self.d} B={self.batch} T={self.tokens} "
                f"layer_index={self.layer_index} seed={self.seed}")

    def as_case(self) -> Case:
        """The case as the runner's :class:`~hcspec.conformance.strategies.Case` (its shape,
        layer index and seed; the split and the index are recovered from the seed, which is
        distinct for every case of a run: :meth:`DistributedRun.case_of
        <hcspec.conformance.parallel.harness.DistributedRun.case_of>`)."""
        from hcspec.conformance.strategies import Case

        return Case(batch=self.batch, tokens=self.tokens, n=self.n, d=self.d,
                    layer_index=self.layer_index, seed=self.seed)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (for JSON)."""
        return asdict(self)


_SHAPES = ((4, 2, 2, 2), (2, 3, 1, 3), (1, 1, 1, 1))
"""(n, d per rank, batch, tokens per rank) of the cases, for each split."""


def make_cases(world_size: int, splits: tuple[Split, ...], seed: int = 0) -> list[ParallelCase]:
    """The cases for ``world_size`` ranks: for each split, three tiny shapes (n = 4, 2, 1)
    whose T and d divide by ``world_size`` and by its half (the world-size property reruns on
    half the ranks).

    Raises:
        ValueError: ``world_size`` < 1.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    cases: list[ParallelCase] = []
    for split in splits:
        for n, d_per, batch, t_per in _SHAPES:
            index = len(cases)
            cases.append(ParallelCase(index, split, n, d_per * world_size, batch,
                                      t_per * world_size, layer_index=index % 3,
                                      seed=seed + 101 * (index + 1)))
    return cases


def _normal(shape: tuple[int, ...], seed: int, std: float = 1.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float64) * std


@dataclass(frozen=True)
class CaseData:
    """The full state ``x [B, T, n, d]``, the upstream gradient ``grad_out`` (same shape) and
    the branch's mixing matrix ``mixing [d, d]`` of a case."""

    x: torch.Tensor
    grad_out: torch.Tensor
    mixing: torch.Tensor


def case_data(case: ParallelCase, dtype: torch.dtype, device: str) -> CaseData:
    """Draw a case's tensors from its seed (on the CPU in float64, then moved), identical in
    every process."""
    shape = (case.batch, case.tokens, case.n, case.d)
    x = _normal(shape, case.seed)
    grad_out = _normal(shape, case.seed + 1)
    mixing = _normal((case.d, case.d), case.seed + 2, std=case.d ** -0.5)
    return CaseData(*(t.to(dtype=dtype, device=device) for t in (x, grad_out, mixing)))


class MixingBranch:
    """The injected sublayer: ``z = tanh(prefix_mean_T(x)) M`` on ``x [B, T, d]``.

    The causal prefix mean mixes tokens (as attention does) and ``M`` mixes the hidden axis, so
    a branch called on one rank's chunk instead of the gathered tensor, or on chunks in the
    wrong order, gives a different output. Every call's input is recorded (detached).
    """

    def __init__(self, mixing: torch.Tensor) -> None:
        self.mixing = mixing
        self.inputs: list[torch.Tensor] = []

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.inputs.append(x.detach().clone())
        if x.dim() != 3 or x.shape[-1] != self.mixing.shape[0]:
            raise ValueError(f"the branch expects [B, T, d] with d={self.mixing.shape[0]}, "
                             f"got {tuple(x.shape)}")
        counts = torch.arange(1, x.shape[1] + 1, dtype=x.dtype, device=x.device)
        prefix_mean = x.cumsum(dim=1) / counts.view(1, -1, 1)
        return torch.tanh(prefix_mean) @ self.mixing.to(dtype=x.dtype, device=x.device)


def named_parameters(impl: object) -> Iterator[tuple[str, torch.Tensor]]:
    """``impl.named_parameters()`` when the impl has it (else nothing)."""
    named = getattr(impl, "named_parameters", None)
    if callable(named):
        yield from named()


def perturb(impl: object, case: ParallelCase) -> None:
    """Add ``N(0, PERTURB_STD²)`` noise, drawn from the case's seed and the parameter's
    position, to every floating parameter of ``impl`` in place (the same in every process)."""
    with torch.no_grad():
        for i, (_, param) in enumerate(named_parameters(impl)):
            if param.is_floating_point():
                noise = _normal(tuple(param.shape), case.seed + 1000 + i, PERTURB_STD)
                param.add_(noise.to(dtype=param.dtype, device=param.device))
