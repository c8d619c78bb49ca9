"""Built-in targets for hcspec's own reference implementation (``reference:hc-static``,
``reference:hc-dynamic``, ``reference:mhc``, and ``reference:mhc-fast``, the fast path of mHC).

The reference modules follow the protocol directly (``module(x, branch)``, ``weights``,
``expand``, ``reduce``, ``parameters``, ``n``, ``d``, ``kind``) and :mod:`hcspec.reference.targets`
builds them in the factory form; these wrappers only add the declared conventions: the branch
receives ``x_in`` itself (pre-norm lives inside the branch), ``reduce`` sums the streams (HC's
``1ᵀ X``), and mHC runs ``sinkhorn_iterations`` column-then-row rounds (rows exact).
"""

from __future__ import annotations

from typing import Any, cast

import torch

from hcspec.conformance.protocol import Conventions, HyperConnectionImpl

REFERENCE_CONVENTIONS = Conventions(
    notes="hcspec reference: branch receives x_in, reduce sums the streams"
)


def _declare(module: Any, conventions: Conventions) -> HyperConnectionImpl:
    module.conventions = conventions
    return cast(HyperConnectionImpl, module)


def make_hc_static(
    n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
    device: str = "cpu", seed: int = 0,
) -> HyperConnectionImpl:
    """``hcspec.reference.targets.hc_static`` (HC §2.2, init Eq. 14) with its conventions declared.

    Raises:
        ValueError: as the reference constructor (n, d < 1; layer_index < 0).
    """
    from hcspec.reference import targets

    module = targets.hc_static(n, d, layer_index=layer_index, dtype=dtype, device=device,
                               seed=seed)
    return _declare(module, REFERENCE_CONVENTIONS)


def make_hc_dynamic(
    n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
    device: str = "cpu", seed: int = 0,
) -> HyperConnectionImpl:
    """``hcspec.reference.targets.hc_dynamic`` (HC §2.3, Eq. 10–13) with its conventions declared.

    Raises:
        ValueError: as the reference constructor.
    """
    from hcspec.reference import targets

    module = targets.hc_dynamic(n, d, layer_index=layer_index, dtype=dtype, device=device,
                                seed=seed)
    return _declare(module, REFERENCE_CONVENTIONS)


def make_mhc(
    n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
    device: str = "cpu", seed: int = 0,
) -> HyperConnectionImpl:
    """``hcspec.reference.targets.mhc`` (mHC §4.2, Eq. 7–9), declaring its Sinkhorn–Knopp rounds.

    Raises:
        ValueError: as the reference constructor.
    """
    from hcspec.reference import targets

    module = targets.mhc(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)
    iterations = int(module.sinkhorn_iterations)
    return _declare(module, Conventions(sinkhorn_iterations=iterations,
                                        notes=REFERENCE_CONVENTIONS.notes))


def make_mhc_fast(
    n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
    device: str = "cpu", seed: int = 0,
) -> HyperConnectionImpl:
    """``hcspec.reference.targets.mhc_fast``: mHC computed by ``hcspec.reference.fast`` (same
    parameters as
    ``reference:mhc`` for the same seed), declaring its Sinkhorn–Knopp rounds.

    Raises:
        ValueError: as the reference constructor.
    """
    from hcspec.reference import targets

    module = targets.mhc_fast(n, d, layer_index=layer_index, dtype=dtype, device=device,
                              seed=seed)
    iterations = int(module.sinkhorn_iterations)
    return _declare(module, Conventions(sinkhorn_iterations=iterations,
                                        notes=REFERENCE_CONVENTIONS.notes))
