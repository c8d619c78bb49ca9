"""The independent implementation as conformance-kit targets, with its conventions declared in
the kit's type.

The independent mHC declares its conventions as a plain ``dict`` (plus a
``sinkhorn_iterations`` attribute); the kit's own type is
:class:`hcspec.conformance.protocol.Conventions`. These factories translate the declaration and
change nothing else, except that each offers ``stack(L)``: L independently built sublayers of
the same factory (layer_index + k, seed + k) run one after the other, as a user whose code
carries no state between sublayers offers it
(:func:`hcspec.conformance.adapters._stacking.sequential_stack`)::

    hc-conformance run tests.independent.kit_adapter:make_mhc
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from hcspec.conformance.adapters._stacking import sequential_stack
from hcspec.conformance.protocol import Conventions
from tests.independent import hc_dynamic, hc_static, mhc

_FIELDS = ("branch_input", "reduce", "sinkhorn_exact_axis")


def as_conventions(impl: Any) -> Conventions:
    """``impl.conventions`` (a mapping) and ``impl.sinkhorn_iterations`` as a Conventions.

    ``internal_dtype = "input"`` means "computes in the input's dtype or finer": no
    ``compute_dtype`` to declare.

    Raises:
        ValueError: an ``internal_dtype`` other than ``"input"``, or a value Conventions
            rejects.
    """
    declared: Mapping[str, str] = getattr(impl, "conventions", {}) or {}
    internal = declared.get("internal_dtype", "input")
    if internal != "input":
        raise ValueError(f"internal_dtype: expected 'input', got {internal!r}")
    fields: dict[str, Any] = {k: declared[k] for k in _FIELDS if k in declared}
    iterations = getattr(impl, "sinkhorn_iterations", None)
    return Conventions(**fields, sinkhorn_iterations=iterations,
                       notes="independent implementation (tests/independent), paper layout")


def _target(make: Callable[..., Any], n: int, d: int, layer_index: int, dtype: torch.dtype,
            device: str, seed: int) -> Any:
    """``make(...)`` with its conventions as the kit's type and ``stack(L)``: this impl, then
    what ``make`` builds for ``layer_index + k``, ``seed + k`` (k = 1 … L − 1)."""
    impl = make(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed)
    impl.conventions = as_conventions(impl)

    def stack(layers: int) -> Any:
        later = [_target(make, n, d, layer_index + k, dtype, device, seed + k)
                 for k in range(1, layers)]
        return sequential_stack([impl, *later])

    impl.stack = stack
    return impl


def make_hc_static(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                   device: str = "cpu", seed: int = 0) -> Any:
    """:func:`tests.independent.hc_static.make` with the kit's Conventions."""
    return _target(hc_static.make, n, d, layer_index, dtype, device, seed)


def make_hc_dynamic(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                    device: str = "cpu", seed: int = 0) -> Any:
    """:func:`tests.independent.hc_dynamic.make` with the kit's Conventions."""
    return _target(hc_dynamic.make, n, d, layer_index, dtype, device, seed)


def make_mhc(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0) -> Any:
    """:func:`tests.independent.mhc.make` with its dict declaration as the kit's Conventions."""
    return _target(mhc.make, n, d, layer_index, dtype, device, seed)


FACTORIES = {"hc-static": make_hc_static, "hc-dynamic": make_hc_dynamic, "mhc": make_mhc}
"""The three targets by kind."""
