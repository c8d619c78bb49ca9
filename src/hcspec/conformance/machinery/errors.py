"""What a check raises: a failure of the property, or one of the reasons a case or the
property does not count."""

from __future__ import annotations

from hcspec.conformance.outputs.failure import origin as _origin
from hcspec.conformance.outputs.failure import rule_text


class PropertyFailure(AssertionError):
    """A property does not hold for a case.

    Attributes:
        label: the failing check's label (e.g. ``"law: X' vs spec"``); two failures with the
            same exception type and label are the same failure (the shrinker relies on it).
        error: the achieved error of a numeric check, else None.
        tolerance: its tolerance (the rule's allowance), else None.
        rule: the name of the tolerance rule that gave it (:mod:`hcspec.conformance.rules`),
            else None.
        floor: the rule's floor there (what a correct impl of the run's precision errs by),
            else None.
        detail: what was observed, beyond the figures (may be empty).
        hint: a likely cause, when the check can name one, else None.
        origin: where the failing check raised it, ``module:function:line`` — the same for
            every case that fails the same check, whatever figures its label carries ('' until
            it is raised; :func:`hcspec.conformance.outputs.failure.origin`, the kit's one
            definition).

    ``str(failure)`` is the full message: ``label: error E > allowance T [rule R: floor F,
    error = E/F × floor]; detail`` for a numeric check (the bracket when a rule gave the
    allowance), the label (the condition's message) otherwise.

    >>> f = PropertyFailure.numeric("X' vs law", 0.5, 1e-6, "max at token 0")
    >>> str(f)
    "X' vs law: error 0.5 > allowance 1e-06; max at token 0"
    >>> (f.label, f.error, f.tolerance)
    ("X' vs law", 0.5, 1e-06)
    >>> str(PropertyFailure.numeric("sums", 0.5, 0.01, rule="exact_axis", floor=0.0025))
    'sums: error 0.5 > allowance 0.01 [rule exact_axis: floor 0.0025, error = 200 × floor]'

    """

    def __init__(self, message: str, *, label: str | None = None, error: float | None = None,
                 tolerance: float | None = None, detail: str = "",
                 hint: str | None = None,
                 rule: str | None = None, floor: float | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.floor = floor
        self.label = message if label is None else label
        self.error = error
        self.tolerance = tolerance
        self.detail = detail
        self.hint = hint

    @property
    def origin(self) -> str:
        """Where the check raised this failure (see the class docstring)."""
        return _origin(self)

    @classmethod
    def numeric(cls, label: str, error: float, tolerance: float, detail: str = "",
                hint: str | None = None, *, rule: str | None = None,
                floor: float | None = None) -> PropertyFailure:
        """The failure of ``error > tolerance`` (or a NaN error) for the check ``label``,
        naming the ``rule`` that gave the allowance and its ``floor`` when known."""
        extra = f"; {detail}" if detail else ""
        return cls(f"{label}: error {error:.3g} > allowance {tolerance:.3g}"
                   f"{rule_text(rule, error, floor)}{extra}",
                   label=label, error=error, tolerance=tolerance, detail=detail, hint=hint,
                   rule=rule, floor=floor)


class NotApplicable(Exception):
    """The property cannot run on this target, found only while running a case (message:
    why), e.g. the factory rejects the second dtype a comparison needs. What is known before
    any case runs is a declared requirement instead
    (:mod:`hcspec.conformance.machinery.requirements`)."""


class FactoryRejected(Exception):
    """The factory raised for a case's configuration; the case is skipped and recorded."""


class Inconclusive(Exception):
    """The case could not show what the property checks, either way (message: what was
    observed). It is recorded and not counted as evidence: a property none of whose cases was
    conclusive is reported not applicable ("not demonstrated"), never passed."""


class BranchMisuse(PropertyFailure):
    """The impl called the kit's branch with something other than a ``[B, T, d]`` tensor."""


class DeclarationError(ValueError):
    """A declaration breaks a rule of the registry, or a check applies a tolerance rule its
    property does not declare (the message says which)."""
