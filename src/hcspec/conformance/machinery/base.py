"""The run a check works in: :class:`Context`, made of small parts with one job each, and
what the catalogue's modules share (the exceptions, float64 copies; a property itself is declared in
:mod:`hcspec.conformance.machinery.declaration`).

A check is a function ``check(ctx, case) -> None`` declared with
:func:`hcspec.conformance.machinery.declaration.declare`. It builds a fresh impl per case
(``ctx.build``), draws the case's state and branch (``ctx.inputs``), runs and probes the impl
(``ctx.observe``) and compares with ``ctx.record.expect`` (which records the achieved error
and raises :class:`PropertyFailure` beyond the tolerance) and ``ctx.record.require``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from hcspec.conformance.machinery.building import Builder, floating_parameters
from hcspec.conformance.machinery.errors import (
    BranchMisuse,
    FactoryRejected,
    Inconclusive,
    NotApplicable,
    PropertyFailure,
)
from hcspec.conformance.machinery.inputs import CheckedBranch, Inputs
from hcspec.conformance.machinery.observing import Observer
from hcspec.conformance.machinery.recording import Recorder, Worst
from hcspec.conformance.machinery.requirements import Subject
from hcspec.conformance.machinery.setup import Prepared
from hcspec.conformance.profiles import Profile
from hcspec.conformance.protocol import Conventions
from hcspec.conformance.rules import Precision
from hcspec.conformance.seeding import seeded_global_rng


class Context:
    """Everything a check needs about one property run (cheap to create).

    Facts about the run (read-only): ``factory``, ``target_name``, ``kind``, ``conventions``,
    ``capabilities``, ``dtype`` (float64 unless the factory rejects it), ``device``,
    ``profile``, ``seed`` (added to every case's seed by the strategies), ``precision`` (the
    run's dtype chain, :class:`hcspec.conformance.rules.Precision`: ``dtype``, the ``compute``
    dtype and the effective ``output`` dtype every comparison is made in; the one name for
    it, which the recorder applies the rules to), ``weights_precision`` (the same chain with a
    declared ``weights_dtype`` in place of ``output_dtype``: what reported weights are judged
    in where a check says so, else ``precision``), ``prepared`` (what the property's family
    setup hook prepared for the run, :class:`hcspec.conformance.machinery.setup.Prepared`,
    e.g. the parallel family's multi-process run; None when it declared none or there was
    nothing to prepare).

    Parts:
        record: the expectations and the worst error (:class:`Recorder`).
        build: fresh, perturbed impls from the factory (:class:`Builder`).
        inputs: the case's state, tangents and branch (:class:`Inputs`).
        observe: forward, reported weights, probed weights, expected branch input
            (:class:`Observer`).
    """

    def __init__(self, *, factory: Callable[..., Any], target_name: str, kind: str,
                 conventions: Conventions, capabilities: frozenset[str], dtype: torch.dtype,
                 device: str, profile: Profile, seed: int = 0,
                 prepared: Prepared | None = None) -> None:
        self.factory = factory
        self.target_name = target_name
        self.kind = kind
        self.conventions = conventions
        self.capabilities = capabilities
        self.dtype = dtype
        self.device = device
        self.profile = profile
        self.seed = seed
        self.prepared = prepared
        self.precision = Precision.of(dtype, conventions.compute_dtype,
                                      conventions.output_dtype,
                                      conventions.formula.sinkhorn.denominator_eps)
        self.weights_precision = Precision.of(
            dtype, conventions.compute_dtype,
            conventions.weights_dtype or conventions.output_dtype,
            conventions.formula.sinkhorn.denominator_eps)
        self.record = Recorder(self.precision)
        self.build = Builder(factory, dtype, device, oversized=conventions.oversized)
        self.inputs = Inputs(dtype, device, conventions.state_domain == "replicated")
        self.observe = Observer(conventions)

    @property
    def subject(self) -> Subject:
        """The facts requirements are decided on."""
        return Subject(self.kind, self.capabilities, self.dtype, self.conventions, self.device,
                       self.profile, None if self.prepared is None else self.prepared.facts)

    @property
    def replicated(self) -> bool:
        """The impl declares that it accepts only stream-replicated states ``1_n hᵀ``."""
        return self.inputs.replicated

    # the run's records, as the runner and the shrinker read and restore them
    @property
    def worst(self) -> Worst:
        """The worst comparison so far (:attr:`Recorder.worst`: label, error, tolerance; an
        empty label while nothing was compared). Reading and assigning go to ``self.record``;
        the runner and the shrinker save it before a trial case and assign it back after."""
        return self.record.worst

    @worst.setter
    def worst(self, value: Worst) -> None:
        self.record.worst = value

    @property
    def rejected(self) -> list[str]:
        """The messages of the configurations the factory rejected so far, in order
        (:attr:`Builder.rejected`, the same list object: appending to it records a rejection).
        Reading and assigning go to ``self.build``; the shrinker restores it after a trial."""
        return self.build.rejected

    @rejected.setter
    def rejected(self, value: list[str]) -> None:
        self.build.rejected = value

    @property
    def inconclusive(self) -> list[str]:
        """The messages of the cases that could show nothing either way, in order
        (:attr:`Recorder.inconclusive`, the same list object; the runner appends them).
        Reading and assigning go to ``self.record``; the shrinker restores it after a trial."""
        return self.record.inconclusive

    @inconclusive.setter
    def inconclusive(self, value: list[str]) -> None:
        self.record.inconclusive = value


def f64(t: torch.Tensor) -> torch.Tensor:
    """Detached float64 CPU copy."""
    return t.detach().to(device="cpu", dtype=torch.float64)


def np64(t: torch.Tensor) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Detached float64 numpy array (for :mod:`hcspec.spec.numeric`)."""
    return f64(t).numpy()


__all__ = [
    "BranchMisuse",
    "CheckedBranch",
    "Context",
    "FactoryRejected",
    "Inconclusive",
    "NotApplicable",
    "PropertyFailure",
    "f64",
    "floating_parameters",
    "np64",
    "seeded_global_rng",
]
