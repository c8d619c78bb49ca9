"""Factories for hcspec's own reference implementation (``reference:hc-static``,
``reference:hc-dynamic``, ``reference:mhc``).

The reference modules follow the protocol directly (``module(x, branch)``, ``weights``,
``expand``, ``reduce``, ``parameters``, ``n``, ``d``, ``kind``); these factories only build them
reproducibly from ``seed`` and declare their conventions: the branch receives ``x_in`` itself
(pre-norm lives inside the branch), ``reduce`` sums the streams (HC's ``1ᵀ X``), and mHC runs
``sinkhorn_iterations`` column-then-row rounds (rows exact).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch

from conformance.protocol import Conventions, HyperConnectionImpl

REFERENCE_CONVENTIONS = Conventions(
    notes="hcspec reference: branch receives x_in, reduce sums the streams"
)


def _seeded(build: Callable[[], torch.nn.Module], seed: int) -> Any:
    # The reference draws its random init (mHC's φ) from torch's global generator: fork it so
    # the caller's random state is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def make_hc_static(
    n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
    device: str = "cpu", seed: int = 0,
) -> HyperConnectionImpl:
    """``reference.StaticHyperConnection`` (HC §2.2, init Eq. 14); see the module docstring.

    Raises:
        ValueError: as the reference constructor (n, d < 1; layer_index < 0).
    """
    from reference.static import StaticHyperConnection

    module = _seeded(
        lambda: StaticHyperConnection(n, d, layer_index, dtype=dtype, device=device), seed
    )
    module.conventions = REFERENCE_CONVENTIONS
    return cast(HyperConnectionImpl, module)


def make_hc_dynamic(
    n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
    device: str = "cpu", seed: int = 0,
) -> HyperConnectionImpl:
    """``reference.DynamicHyperConnection`` (HC §2.3, Eq. 10–13); see the module docstring.

    Raises:
        ValueError: as the reference constructor.
    """
    from reference.dynamic import DynamicHyperConnection

    module = _seeded(
        lambda: DynamicHyperConnection(n, d, layer_index, dtype=dtype, device=device), seed
    )
    module.conventions = REFERENCE_CONVENTIONS
    return cast(HyperConnectionImpl, module)


def make_mhc(
    n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
    device: str = "cpu", seed: int = 0,
) -> HyperConnectionImpl:
    """``reference.ManifoldHyperConnection`` (mHC §4.2, Eq. 7–9), declaring its Sinkhorn–Knopp
    iteration count; see the module docstring.

    Raises:
        ValueError: as the reference constructor.
    """
    from reference.manifold import ManifoldHyperConnection

    module = _seeded(
        lambda: ManifoldHyperConnection(n, d, layer_index, dtype=dtype, device=device), seed
    )
    module.conventions = Conventions(
        sinkhorn_iterations=int(module.sinkhorn_iterations),
        notes=REFERENCE_CONVENTIONS.notes,
    )
    return cast(HyperConnectionImpl, module)
