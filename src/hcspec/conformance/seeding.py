"""Seeding torch's global RNG for one case, so a target that draws from it (dropout, a random
init) sees the same numbers whenever the case is replayed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def seeded_global_rng(seed: int, device: str) -> Iterator[None]:
    """Run a block with torch's global RNG (CPU, and ``device`` when it is CUDA) seeded with
    ``seed``, restoring the caller's state afterwards (no other generator is touched): the
    report and the reproduction command of a random target do not vary from run to run.

    >>> with seeded_global_rng(3, "cpu"):
    ...     a = torch.rand(2)
    >>> with seeded_global_rng(3, "cpu"):
    ...     b = torch.rand(2)
    >>> torch.equal(a, b)
    True
    """
    cuda = [torch.device(device).index or 0] if torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        # Only the generators forked above: torch.manual_seed would also queue a seed for
        # every other backend (and format a stack trace per backend to do so), and leave the
        # CUDA generators reseeded after a CPU run.
        torch.default_generator.manual_seed(seed)
        for index in cuda:
            torch.cuda.default_generators[index].manual_seed(seed)
        yield
