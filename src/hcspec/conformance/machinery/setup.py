"""A family's setup hook: what the session gives it once per run (:class:`SetupRequest`), what
it prepares for the checks (:class:`Prepared`, read as ``ctx.prepared``) and its type
(:data:`FamilySetup`), declared with ``declare(..., setup=hook)``
(:mod:`hcspec.conformance.machinery.declaration`). The parallel family's multi-process run is
one (:mod:`hcspec.conformance.parallel.harness`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hcspec.conformance.machinery.requirements import Distributed

if TYPE_CHECKING:
    import torch

    from hcspec.conformance.outputs.report import Report


class SetupTarget(Protocol):
    """What a setup hook reads of the resolved target (the session passes its
    :class:`hcspec.conformance.subjects.targets.Target`, which has these and more)."""

    @property
    def name(self) -> str:
        """The TARGET string (or the factory's qualified name)."""
        ...

    @property
    def factory(self) -> Callable[..., Any]:
        """The factory."""
        ...

    @property
    def sharding_factory(self) -> Callable[..., Any]:
        """The factory the ``parallel`` family runs (the declared sharding factory, else
        ``factory``)."""
        ...


class Prepared(Protocol):
    """What a family's setup hook (:data:`FamilySetup`) prepared for the run: the checks of the
    properties that declared the hook read it as ``ctx.prepared``."""

    @property
    def facts(self) -> Distributed | None:
        """The facts of the run that applicability is decided on
        (:attr:`hcspec.conformance.machinery.requirements.Subject.distributed`), or None."""
        ...

    def annotate(self, report: Report) -> None:
        """Add what the setup learned to the report's header (conventions, capabilities)."""
        ...


@dataclass(frozen=True)
class SetupRequest:
    """What the session gives a family's setup hook, once per run, before any property runs.

    Attributes:
        target: the resolved target. device, dtype, seed: the run's (dtype: the inspected
            working dtype). world_size: the ranks of a multi-process run, None: one process.
        timeout: the per-property limit in seconds (None: none), the setup's deadline too.
        applies: whether one of the selected properties that declared the hook applies,
            given what the hook prepared (its facts); a hook does its costly part only then.
    """

    target: SetupTarget
    device: str
    dtype: torch.dtype
    seed: int
    world_size: int | None
    timeout: float | None
    applies: Callable[[Prepared], bool]


FamilySetup = Callable[[SetupRequest], "Prepared | None"]
"""A per-family setup hook (``declare(..., setup=hook)``): called once per run by the session
when a selected property declared it, before any property runs; returns what the checks read
as ``ctx.prepared`` (None: nothing to prepare for this run). ``KeyboardInterrupt`` propagates
and stops the run."""
