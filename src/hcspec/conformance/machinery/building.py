"""Building the implementation a case checks: a fresh impl from the factory, perturbed and
scaled as the case says, and parameters copied between impls of different dtypes/devices."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import torch

from hcspec.conformance import salts, strategies
from hcspec.conformance.machinery.errors import FactoryRejected, PropertyFailure
from hcspec.conformance.protocol import HyperConnectionImpl, check_required, has_parameters
from hcspec.conformance.strategies import Case


def floating_parameters(impl: object, trainable: bool = False) -> list[torch.Tensor]:
    """The floating-point tensors of ``impl.parameters()`` (only those that require grad when
    ``trainable``); empty without the ``parameters`` capability."""
    if not has_parameters(impl):
        return []
    return [p for p in impl.parameters() if isinstance(p, torch.Tensor)
            and p.is_floating_point() and (p.requires_grad or not trainable)]


LEFT_OUT: Final = "left out by the declaration: "
"""How :meth:`Builder.make` begins the rejection of a size past the declared
``max_parameters`` (the runner counts these apart in a pass's note)."""


@dataclass
class Builder:
    """Builds impls from the target's factory.

    Attributes:
        factory: the target's factory.
        dtype, device: the run's working dtype and device (the defaults of :meth:`make`).
        rejected: messages of the configurations the factory rejected (and of those the
            declared parameter bound left out before the factory ran).
        oversized: why the target's declaration excludes a size by its parameter count
            (:meth:`hcspec.conformance.protocol.Conventions.oversized`); None: no bound.
    """

    factory: Callable[..., Any]
    dtype: torch.dtype
    device: str
    rejected: list[str] = field(default_factory=list)
    oversized: Callable[[int, int], str | None] | None = None

    def make(
        self, case: Case, *, n: int | None = None, layer_index: int | None = None,
        dtype: torch.dtype | None = None, device: str | None = None, perturb: bool = True,
    ) -> HyperConnectionImpl:
        """A fresh impl for ``case`` (perturbed and scaled as the case says unless
        ``perturb=False``).

        Raises:
            FactoryRejected: the factory raised (the configuration is unsupported), or the
                declared ``max_parameters`` excludes ``(n, d)`` (the factory is not called: a
                size past the target's declared memory is left out, not built).
            PropertyFailure: the result does not satisfy the required protocol, or has
                another ``n``/``d``.
        """
        n = case.n if n is None else n
        reason = None if self.oversized is None else self.oversized(n, case.d)
        if reason is not None:
            message = LEFT_OUT + reason
            self.rejected.append(message)
            raise FactoryRejected(message)
        try:
            impl: HyperConnectionImpl = self.factory(
                n, case.d, layer_index=case.layer_index if layer_index is None else layer_index,
                dtype=dtype or self.dtype, device=device or self.device, seed=case.seed,
            )
        except Exception as exc:  # the factory's own validation: an unsupported configuration
            message = (f"factory(n={n}, d={case.d}, dtype={dtype or self.dtype}) raised "
                       f"{type(exc).__name__}: {exc}")
            self.rejected.append(message)
            raise FactoryRejected(message) from exc
        try:
            check_required(impl)
        except (TypeError, ValueError) as exc:
            raise PropertyFailure(str(exc)) from exc
        if not (impl.n == n and impl.d == case.d):
            raise PropertyFailure(
                f"factory(n={n}, d={case.d}) returned an impl with n={impl.n}, d={impl.d}")
        if perturb and (case.perturb > 0 or case.param_scale != 1.0):
            self.perturb(impl, case)
        return impl

    @staticmethod
    def perturb(impl: HyperConnectionImpl, case: Case) -> None:
        """Add ``N(0, case.perturb²)`` noise to every floating parameter (salt
        :data:`hcspec.conformance.salts.PERTURBATION`), then multiply it by
        ``case.param_scale``, in place (no-op without the ``parameters`` capability)."""
        with torch.no_grad():
            for i, p in enumerate(all_parameters(impl)):
                if not isinstance(p, torch.Tensor) or not p.is_floating_point():
                    continue
                if case.perturb > 0:
                    noise = strategies.gaussian(p.shape, case.seed, salts.PERTURBATION.at(i),
                                                torch.float64, std=case.perturb)
                    p.add_(noise.to(device=p.device, dtype=p.dtype))
                if case.param_scale != 1.0:
                    p.mul_(case.param_scale)

    @staticmethod
    def align(source: HyperConnectionImpl, target: HyperConnectionImpl) -> None:
        """Copy ``source``'s parameters into ``target`` (cast to its dtype/device), so two
        impls built for different dtypes or devices hold the same values — factories need not
        draw the same init in every dtype (torch's ``normal_`` does not). No-op without the
        ``parameters`` capability or when the parameter shapes differ."""
        src, dst = all_parameters(source), all_parameters(target)
        if len(src) != len(dst) or any(a.shape != b.shape for a, b in zip(src, dst, strict=True)):
            return
        with torch.no_grad():
            for a, b in zip(src, dst, strict=True):
                b.copy_(a.detach().to(device=b.device, dtype=b.dtype))


def all_parameters(impl: object) -> list[Any]:
    """Everything ``impl.parameters()`` yields, indexed as the perturbation salts count it."""
    return list(impl.parameters()) if has_parameters(impl) else []
