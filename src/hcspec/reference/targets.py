"""Factories in the conformance kit's target form, one per connection kind.

Each is ``make(n, d, *, layer_index=0, dtype=torch.float64, device="cpu", seed=0) -> module``
(the conformance kit's protocol module, ``protocol``); the modules provide ``n``, ``d``,
``kind``, ``forward``, ``weights``, ``expand``, ``reduce`` and ``parameters`` directly, and
mHC also declares ``sinkhorn_iterations``; ``module.stack(L)`` (the kit's ``stack`` capability)
runs L consecutive sublayers with a carried pre-mix, sublayer k being what the factory builds
for ``layer_index + k`` and ``seed + k`` (:mod:`hcspec.reference.stack`). So
``hcspec.reference.targets:hc_static`` (etc.) is a valid TARGET string.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from hcspec.reference.connection import HyperConnection
from hcspec.reference.deepseek_v4 import DeepSeekV4HyperConnection
from hcspec.reference.dynamic import DynamicHyperConnection
from hcspec.reference.gated import qwen4_exp as qwen4_exp
from hcspec.reference.lite import LiteHyperConnection
from hcspec.reference.manifold import Implementation, ManifoldHyperConnection
from hcspec.reference.ortho import OrthoHyperConnection
from hcspec.reference.static import StaticHyperConnection
from hcspec.spec.record import DEFAULT_NEWTON_SCHULZ


def _seeded(build: Callable[[], HyperConnection], seed: int,
            dtype: torch.dtype, device: torch.device | str) -> HyperConnection:
    # Initialise on the CPU under a private seed (leaving the caller's RNG state untouched),
    # then move: the same seed gives the same parameters on every device.
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)  # the CPU generator only: it is forked
        module = build()
    return module.to(dtype=dtype, device=device)


def _successor(factory: Callable[..., HyperConnection], n: int, d: int, layer_index: int,
               dtype: torch.dtype, device: torch.device | str, seed: int, options: dict[str, Any],
               k: int) -> HyperConnection:
    """The module ``k`` sublayers after one built by ``factory`` (``layer_index + k``, seed
    ``seed + k``): what :meth:`HyperConnection.stack` appends."""
    return factory(n, d, layer_index=layer_index + k, dtype=dtype, device=device, seed=seed + k,
                   **options)


def _stackable(module: HyperConnection, factory: Callable[..., HyperConnection], n: int, d: int,
               layer_index: int, dtype: torch.dtype, device: torch.device | str, seed: int,
               **options: Any) -> None:
    """Let ``module.stack(L)`` build its later sublayers with ``factory`` (own parameters)."""
    module.successor = functools.partial(_successor, factory, n, d, layer_index, dtype, device,
                                         seed, options)


def hc_static(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
              device: torch.device | str = "cpu", seed: int = 0) -> StaticHyperConnection:
    """A fresh :class:`StaticHyperConnection` (HC Eq. 14 init; ``seed`` unused: no randomness).

    Raises:
        ValueError: as the constructor.
    """
    module = _seeded(lambda: StaticHyperConnection(n, d, layer_index, dtype=torch.float64),
                     seed, dtype, device)
    assert isinstance(module, StaticHyperConnection)
    _stackable(module, hc_static, n, d, layer_index, dtype, device, seed)
    return module


def hc_dynamic(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
               device: torch.device | str = "cpu", seed: int = 0) -> DynamicHyperConnection:
    """A fresh :class:`DynamicHyperConnection` (W = 0, s = 0.01; ``seed`` unused).

    Raises:
        ValueError: as the constructor.
    """
    module = _seeded(lambda: DynamicHyperConnection(n, d, layer_index, dtype=torch.float64),
                     seed, dtype, device)
    assert isinstance(module, DynamicHyperConnection)
    _stackable(module, hc_dynamic, n, d, layer_index, dtype, device, seed)
    return module


def mhc(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu", seed: int = 0,
        implementation: Implementation = "readable",
        recompute: bool = False) -> ManifoldHyperConnection:
    """A fresh :class:`ManifoldHyperConnection` whose φ are drawn from ``seed``.

    Parameters are drawn in float64 and then cast, so every dtype starts from the same values
    (up to rounding) — and every ``implementation``/``recompute`` choice too, so the same seed
    gives the same module computed another way.

    Raises:
        ValueError: as the constructor.
    """
    module = _seeded(lambda: ManifoldHyperConnection(n, d, layer_index, dtype=torch.float64,
                                                     implementation=implementation,
                                                     recompute=recompute),
                     seed, dtype, device)
    assert isinstance(module, ManifoldHyperConnection)
    _stackable(module, mhc, n, d, layer_index, dtype, device, seed,
               implementation=implementation, recompute=recompute)
    return module


def mhc_fast(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: torch.device | str = "cpu", seed: int = 0) -> ManifoldHyperConnection:
    """:func:`mhc` with ``implementation="fast"``: the same parameters for the same seed,
    computed by :mod:`hcspec.reference.fast`.

    Raises:
        ValueError: as the constructor.
    """
    return mhc(n, d, layer_index=layer_index, dtype=dtype, device=device, seed=seed,
               implementation="fast")


def deepseek_v4(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
                device: torch.device | str = "cpu", seed: int = 0) -> DeepSeekV4HyperConnection:
    """A fresh :class:`~hcspec.reference.deepseek_v4.DeepSeekV4HyperConnection` (DeepSeek-V4's
    published parameterization; ``hc_fn`` drawn from ``seed``).

    Raises:
        ValueError: as the constructor.
    """
    module = _seeded(lambda: DeepSeekV4HyperConnection(n, d, layer_index, dtype=torch.float64),
                     seed, dtype, device)
    assert isinstance(module, DeepSeekV4HyperConnection)
    return module


def mhc_lite(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: torch.device | str = "cpu", seed: int = 0,
             permutations: tuple[tuple[int, ...], ...] | None = None) -> LiteHyperConnection:
    """A fresh :class:`~hcspec.reference.lite.LiteHyperConnection` (mHC-lite: ``H_res`` a
    softmax-weighted sum of all n! permutation matrices, or of ``permutations``; φ from
    ``seed``, drawn in float64 and cast).

    Raises:
        ValueError: as the constructor (n > 8 included).
    """
    module = _seeded(lambda: LiteHyperConnection(n, d, layer_index, permutations=permutations,
                                                 dtype=torch.float64), seed, dtype, device)
    assert isinstance(module, LiteHyperConnection)
    _stackable(module, mhc_lite, n, d, layer_index, dtype, device, seed,
               permutations=permutations)
    return module


def mhc_ortho(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
              device: torch.device | str = "cpu", seed: int = 0,
              iterations: int | None = None) -> OrthoHyperConnection:
    """A fresh :class:`~hcspec.reference.ortho.OrthoHyperConnection` (mHC with an
    orthostochastic ``H_res``: the squared entries of a Newton–Schulz orthogonal factor; φ from
    ``seed``, drawn in float64 and cast). ``iterations``: the Newton–Schulz count run (None: the
    declared 10; another count is what the kit's mutant runs).

    Raises:
        ValueError: as the constructor.
    """
    count = DEFAULT_NEWTON_SCHULZ if iterations is None else iterations
    module = _seeded(lambda: OrthoHyperConnection(n, d, layer_index, iterations=count,
                                                  dtype=torch.float64), seed, dtype, device)
    assert isinstance(module, OrthoHyperConnection)
    _stackable(module, mhc_ortho, n, d, layer_index, dtype, device, seed, iterations=iterations)
    return module


TARGETS: dict[str, Callable[..., HyperConnection]] = {
    "hc-static": hc_static,
    "hc-dynamic": hc_dynamic,
    "mhc": mhc,
}
"""The factories by ``kind`` (the readable implementations; :func:`mhc_fast` is the fast
path of ``mhc``)."""
