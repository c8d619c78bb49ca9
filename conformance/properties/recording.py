"""Recording a property run's comparisons: each expectation's error against its tolerance,
the worst one seen, and the failure raised beyond the tolerance."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from hcspec.conformance.properties.errors import Inconclusive, PropertyFailure


@dataclass
class Worst:
    """The largest error/tolerance ratio seen so far in one property's run."""

    label: str = ""
    error: float = 0.0
    tolerance: float = 0.0

    @property
    def ratio(self) -> float:
        """``error / tolerance`` (0 for a zero error, inf for a zero tolerance)."""
        if self.error == 0.0:
            return 0.0
        return math.inf if self.tolerance == 0.0 else self.error / self.tolerance


@dataclass
class Recorder:
    """The expectations of one property run.

    Attributes:
        worst: the comparison closest to (or furthest beyond) its tolerance so far.
        inconclusive: messages of the cases that could show nothing either way (appended by
            the runner).
        series: curves the property measured, ``quantity -> case label -> one value per
            step`` (the depth family: the state norm after each sublayer); the runner copies
            them into the result (``PropertyResult.series``), the HTML report plots them.
    """

    worst: Worst = field(default_factory=Worst)
    inconclusive: list[str] = field(default_factory=list)
    series: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def curve(self, quantity: str, label: str, values: Sequence[float]) -> None:
        """Record one curve of ``quantity`` (what is measured, e.g. ``‖X_l‖ / ‖X_0‖``) for
        the case named ``label``, one value per step (step 0 first). A curve recorded again
        under the same quantity and label replaces the earlier one. Never fails."""
        self.series.setdefault(quantity, {})[label] = [float(v) for v in values]

    def expect(self, label: str, error: float, tolerance: float, detail: str = "",
               hint: str | None = None) -> None:
        """Record ``error`` for ``label`` and fail when it exceeds ``tolerance`` (or is NaN).

        A comparison whose tolerance is not finite (``inf`` or NaN) cannot fail whatever the
        target does, so it demonstrates nothing: the case is inconclusive (not counted; a
        property none of whose cases is conclusive is reported "not demonstrated"), never a
        pass.

        Raises:
            PropertyFailure: ``error > tolerance``, with ``label``, ``error``, ``tolerance``,
                ``detail`` and ``hint`` set (:meth:`PropertyFailure.numeric`).
            Inconclusive: ``tolerance`` is not finite (checked first).
        """
        if not math.isfinite(tolerance):
            extra = f" ({detail})" if detail else ""
            raise Inconclusive(
                f"{label}: the tolerance is {tolerance:g}{extra}, so no error could fail it: "
                "this case cannot demonstrate the property")
        candidate = Worst(label, error, tolerance)
        if math.isnan(error) or candidate.ratio > self.worst.ratio or not self.worst.label:
            self.worst = candidate
        if math.isnan(error) or error > tolerance:
            raise PropertyFailure.numeric(label, error, tolerance, detail, hint)

    def require(self, condition: bool, message: str, hint: str | None = None) -> None:
        """Fail with ``message`` (the failure's label) unless ``condition``.

        Raises:
            PropertyFailure: ``condition`` is false.
        """
        if not condition:
            raise PropertyFailure(message, hint=hint)
