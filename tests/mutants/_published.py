"""Shared piece of the published-parameterization mutants: the reference DeepSeek-V4 module
computing one published variant (the published record,
:func:`hcspec.reference.published.formula`, with a departure) while declaring, and offering
the tensors of, the published DeepSeek-V4 layout — an implementation that loads a DeepSeek-V4
checkpoint and computes another network from it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch

from hcspec.conformance.protocol import HyperConnectionImpl
from hcspec.reference import published
from hcspec.reference.deepseek_v4 import DeepSeekV4HyperConnection

Departure = Callable[[published.Formula], published.Formula]
"""A change of DeepSeek-V4's published record (``dataclasses.replace`` of one field)."""


def make_divergent(departure: Departure | None, n: int, d: int, layer_index: int,
                   dtype: torch.dtype, device: str, seed: int,
                   hc_eps: float = 1e-6,
                   cls: type[DeepSeekV4HyperConnection] = DeepSeekV4HyperConnection,
                   ) -> HyperConnectionImpl:
    """``cls`` (the reference :class:`DeepSeekV4HyperConnection`) computing the published
    record at ``hc_eps`` changed by ``departure`` (None: the published record), built under
    ``seed`` in float64 on the CPU, then moved to ``dtype``/``device``.

    ``hc_eps`` is DeepSeek-V4's published 1e-6 by default (a setting of the layout, read by
    the oracle, and declared as the Sinkhorn–Knopp additive and denominator eps): the
    constraints allow the deviation from unit sums that the declared eps implies
    (:func:`hcspec.conformance.rules.sinkhorn_eps_deviation`), so each mutant is caught for
    its own bug. (Before that allowance these mutants used 1e-15 to avoid the constraints'
    false positive.)"""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module: Any = cls(n, d, layer_index, hc_eps=hc_eps, dtype=torch.float64)
    if departure is not None:
        module.formula = departure(published.formula("deepseek-v4", {"hc_eps": hc_eps}))
    return cast(HyperConnectionImpl, module.to(dtype=dtype, device=device))
