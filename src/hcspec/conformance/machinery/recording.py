"""Recording a property run's comparisons: each expectation's error against the allowance of
the property's declared tolerance rule (:mod:`hcspec.conformance.rules`, applied here, never
by the check), the worst one seen, the rules applied, and the failure raised beyond the
allowance."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from hcspec.conformance import rules
from hcspec.conformance.machinery.errors import DeclarationError, Inconclusive, PropertyFailure
from hcspec.conformance.rules import Precision, Rule


@dataclass
class Worst:
    """The largest error/allowance ratio seen so far in one property's run.

    Attributes:
        label, error: the comparison and its error.
        tolerance: its allowance.
        rule: the name of the rule that gave the allowance ('' when none was recorded).
        floor: what a correct impl of the run's precision errs by there (the rule's floor).
    """

    label: str = ""
    error: float = 0.0
    tolerance: float = 0.0
    rule: str = ""
    floor: float = 0.0

    @property
    def ratio(self) -> float:
        """``error / tolerance`` (0 for a zero error, inf for a zero tolerance)."""
        if self.error == 0.0:
            return 0.0
        return math.inf if self.tolerance == 0.0 else self.error / self.tolerance

    @property
    def floor_ratio(self) -> float:
        """``error / floor`` (0 for a zero error, inf for a zero floor)."""
        return rules.ratio(self.error, self.floor)


@dataclass
class Recorder:
    """The expectations of one property run.

    Attributes:
        precision: the run's dtype chain (the rules' input).
        declared: the property's rules, the primary first (set by
            :meth:`hcspec.conformance.machinery.declaration.Property.run`); a comparison
            under any other rule is a kit bug.
        worst: the comparison closest to (or furthest beyond) its allowance so far.
        applied: the names of the rules applied so far (the meta-test reads them).
        inconclusive: messages of the cases that could show nothing either way (appended by
            the runner).
        series: curves the property measured, ``quantity -> case label -> one value per
            step`` (the depth family: the state norm after each sublayer); the runner copies
            them into the result (``PropertyResult.series``), the HTML report plots them.
    """

    precision: Precision = field(
        default_factory=lambda: Precision(torch.float64, torch.float64, torch.float64))
    declared: tuple[Rule, ...] = (rules.EXACT,)
    worst: Worst = field(default_factory=Worst)
    applied: set[str] = field(default_factory=set)
    inconclusive: list[str] = field(default_factory=list)
    series: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def curve(self, quantity: str, label: str, values: Sequence[float]) -> None:
        """Record one curve of ``quantity`` (what is measured, e.g. ``‖X_l‖ / ‖X_0‖``) for
        the case named ``label``, one value per step (step 0 first). A curve recorded again
        under the same quantity and label replaces the earlier one. Never fails."""
        self.series.setdefault(quantity, {})[label] = [float(v) for v in values]

    @contextmanager
    def judged_in(self, precision: Precision) -> Iterator[None]:
        """Within the block, :meth:`allowance` and :meth:`expect` apply the rules in
        ``precision`` instead of the run's (a check of reported weights under a declared
        ``weights_dtype``, ``Context.weights_precision``); restored on leaving."""
        saved = self.precision
        self.precision = precision
        try:
            yield
        finally:
            self.precision = saved

    def allowance(self, rule: Rule | None = None, **given: Any) -> rules.Allowance:
        """The allowance ``rule`` (default: the declared primary rule) gives in the run's
        precision with the check's inputs ``given``, without comparing anything (for a check
        that picks its worst token by the allowance before it records it).

        Raises:
            DeclarationError: ``rule`` is not among the property's declared rules.
            TypeError: ``given`` does not fit the rule (:meth:`Rule.apply`).
        """
        chosen = self._rule(rule)
        return chosen.apply(self.precision, **given)

    def _rule(self, rule: Rule | None) -> Rule:
        chosen = self.declared[0] if rule is None else rule
        if chosen not in self.declared:
            raise DeclarationError(
                f"a check applied the rule {chosen.name!r}, which its property does not "
                f"declare (declared: {', '.join(r.name for r in self.declared)})")
        return chosen

    def expect(self, label: str, error: float, *, detail: str = "", hint: str | None = None,
               rule: Rule | None = None, **given: Any) -> None:
        """Record ``error`` for ``label`` and fail when it exceeds the allowance (or is NaN).

        The allowance is that of ``rule`` (default: the property's declared rule; a
        secondary rule must be declared too) applied to the run's precision with ``given``
        (:meth:`Rule.apply`); the check never passes an allowance of its own.

        A comparison whose allowance is not finite (``inf`` or NaN) cannot fail whatever the
        target does, so it demonstrates nothing: the case is inconclusive (not counted; a
        property none of whose cases is conclusive is reported "not demonstrated"), never a
        pass.

        Raises:
            PropertyFailure: ``error > allowance``, with ``label``, ``error``, ``tolerance``
                (the allowance), ``rule``, ``floor``, ``detail`` and ``hint`` set
                (:meth:`PropertyFailure.numeric`).
            Inconclusive: the allowance is not finite (checked first).
            DeclarationError, TypeError: as :meth:`allowance`.
        """
        chosen = self._rule(rule)
        verdict = chosen.apply(self.precision, **given)
        self.applied.add(chosen.name)
        allowed = verdict.allowance
        if not math.isfinite(allowed):
            extra = f" ({detail})" if detail else ""
            raise Inconclusive(
                f"{label}: the allowance is {allowed:g} (rule {chosen.name}){extra}, so no "
                "error could fail it: this case cannot demonstrate the property")
        candidate = Worst(label, error, allowed, chosen.name, verdict.floor)
        if math.isnan(error) or candidate.ratio > self.worst.ratio or not self.worst.label:
            self.worst = candidate
        if math.isnan(error) or error > allowed:
            raise PropertyFailure.numeric(label, error, allowed, detail, hint,
                                          rule=chosen.name, floor=verdict.floor)

    def require(self, condition: bool, message: str, hint: str | None = None) -> None:
        """Fail with ``message`` (the failure's label) unless ``condition``.

        Raises:
            PropertyFailure: ``condition`` is false.
        """
        if not condition:
            raise PropertyFailure(message, hint=hint)
