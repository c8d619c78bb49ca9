"""One failure, explained once: :class:`Failure` and the lines every output renders from it.

A property that fails (or errors, or runs past its time limit) yields one :class:`Failure`,
built here from the exception and the case it was raised on (:func:`from_exception`). The
terminal (:mod:`hcspec.conformance.outputs.terminal`), the Markdown and JSON reports
(:mod:`hcspec.conformance.outputs.report`), JUnit (:mod:`hcspec.conformance.outputs.junit`) and
pytest (:mod:`hcspec.conformance.pytest_plugin`) all print :func:`explain` of the same object, so
they show the same figures: the error and tolerance of the case that is printed as the
counterexample, never those of another case.

A :class:`~hcspec.conformance.machinery.base.PropertyFailure` carries structured attributes
(``label``, ``error``, ``tolerance``, ``rule``, ``floor``, ``detail``, ``hint``); they are read
as they are, never re-parsed from the message, so an exception without them (an impl's own
``RuntimeError``) is explained from its type, message and traceback alone.

Where a failure comes from (:func:`origin`) has one definition, used by the failure record, by
``PropertyFailure.origin`` and by the shrinker's :func:`signature`: the innermost frame of the
exception's traceback outside the kit's raising helpers (:data:`KIT_INTERNAL`).
"""

from __future__ import annotations

import dataclasses
import math
import traceback as tb
from dataclasses import dataclass
from typing import Any, Final

KIT_INTERNAL: Final = frozenset({
    "hcspec.conformance.outputs.failure",
    "hcspec.conformance.probes",
    "hcspec.conformance.machinery.base",
    "hcspec.conformance.machinery.errors",
    "hcspec.conformance.machinery.recording",
})
"""Modules of the kit whose frames are never a failure's origin: they raise for their caller
(``Context.require``, ``Recorder.expect``, ``PropertyFailure.numeric``, the probes)."""


@dataclass(frozen=True)
class Failure:
    """Why one property failed, for one case.

    Attributes:
        kind: ``failed`` (the property does not hold), ``error`` (an unexpected exception) or
            ``timeout`` (the property ran past its time limit).
        exception: the exception's type name (``PropertyFailure``, ``RuntimeError``, …).
        message: the one-line message (the exception's text; ``Type: text`` for an error).
        label: the failing comparison's label (``X' vs the law``), None when the check
            raised without one.
        origin: ``file:line`` of the check that raised (the innermost frame outside the
            kit's helpers), '' when unknown.
        error, tolerance: the failing comparison's figures (None when it is not numeric);
            ``tolerance`` is the allowance of its rule.
        rule: the tolerance rule that gave the allowance (:mod:`hcspec.conformance.rules`),
            None when not numeric or not known.
        floor: the rule's floor on that comparison (what a correct impl of the run's
            precision errs by), None when not known.
        detail: what the check added (e.g. where the difference is), '' if nothing.
        hint: a likely cause, when one is known (from the check or the run's diagnostics).
        counterexample: the case that fails, as JSON (``--case`` reads it back).
        shrunk_from: the explicit example it was shrunk from (JSON), None when not shrunk.
        shrink_runs: how many re-runs the shrinking took.
        shrunk_from_figures: the failing comparison's figures at ``shrunk_from`` (``error E >
            allowance T [rule R: floor F, error = E/F × floor]``, :func:`comparison_figures`),
            where the failure is usually more severe than at the shrunk case ('' when not
            shrunk or not numeric).
        reproduce: the one-line command that replays ``counterexample``.
        traceback: the traceback of an error, or of the target's exception a failure was
            raised from (:func:`target_traceback`); None for a plain comparison.
    """

    kind: str
    exception: str
    message: str
    label: str | None = None
    origin: str = ""
    error: float | None = None
    tolerance: float | None = None
    rule: str | None = None
    floor: float | None = None
    detail: str = ""
    hint: str | None = None
    counterexample: str | None = None
    shrunk_from: str | None = None
    shrink_runs: int = 0
    shrunk_from_figures: str = ""
    reproduce: str | None = None
    traceback: str | None = None

    @property
    def figures(self) -> str:
        """``label: error E, allowance T`` plus, when known, the rule and its floor
        (``, rule R, floor F, error = E/F × floor``); '' when the failure is not a numeric
        comparison."""
        if self.error is None or self.tolerance is None:
            return ""
        text = f"{self.label or 'error'}: error {self.error:.3g}, allowance {self.tolerance:.3g}"
        if self.rule:
            text += f", rule {self.rule}"
            if self.floor is not None and self.floor > 0:
                text += (f", floor {self.floor:.3g}, error = "
                         f"{self.error / self.floor:.3g} × floor")
        return text

    def with_changes(self, **changes: Any) -> Failure:
        """A copy with ``changes`` applied (e.g. the reproduction command, a hint)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (every field; NaN/inf errors as strings so the JSON stays valid)."""
        data = dataclasses.asdict(self)
        for key in ("error", "tolerance", "floor"):
            value = data[key]
            if isinstance(value, float) and not math.isfinite(value):
                data[key] = str(value)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Failure:
        """Read :meth:`to_dict` back (unknown keys are ignored).

        Raises:
            ValueError: ``kind``, ``exception`` or ``message`` is missing.
        """
        missing = [k for k in ("kind", "exception", "message") if k not in data]
        if missing:
            raise ValueError(f"not a failure: missing keys {missing}")
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        for key in ("error", "tolerance", "floor"):
            if isinstance(values.get(key), str):
                values[key] = float(values[key])
        return cls(**values)


def rule_text(rule: str | None, error: float, floor: float | None) -> str:
    """`` [rule R: floor F, error = E/F × floor]`` (`` [rule R]`` without a positive floor;
    '' without a rule): what a failure message, the shrunk-from line and a report add after
    the allowance."""
    if rule is None:
        return ""
    if floor is None or not floor > 0:
        return f" [rule {rule}]"
    return f" [rule {rule}: floor {floor:.3g}, error = {error / floor:.3g} × floor]"


def comparison_figures(exc: BaseException) -> str:
    """``error E > allowance T [rule R: floor F, error = E/F × floor]`` of a numeric failure
    (its ``error``, ``tolerance``, ``rule`` and ``floor`` attributes, as
    :func:`rule_text`), '' when ``exc`` carries no error and tolerance: the figures the
    shrunk-from line shows for the explicit example (:attr:`Failure.shrunk_from_figures`)."""
    error, tolerance = _number(getattr(exc, "error", None)), _number(
        getattr(exc, "tolerance", None))
    if error is None or tolerance is None:
        return ""
    rule = getattr(exc, "rule", None)
    floor = _number(getattr(exc, "floor", None))
    return (f"error {error:.3g} > allowance {tolerance:.3g}"
            f"{rule_text(str(rule) if rule else None, error, floor)}")


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def origin(exc: BaseException) -> str:
    """``module:function:line`` of the innermost frame of ``exc``'s traceback outside
    :data:`KIT_INTERNAL` (so a failure raised by ``Context.require`` or ``Recorder.expect``
    points at the check that called it, the same for every case that fails that check whatever
    its figures); the innermost frame when every frame is the kit's; '' when ``exc`` has not
    been raised (no traceback)."""
    frames = []
    entry = exc.__traceback__
    while entry is not None:
        frames.append((entry.tb_frame, entry.tb_lineno))
        entry = entry.tb_next
    if not frames:
        return ""
    outside = [f for f in frames if f[0].f_globals.get("__name__") not in KIT_INTERNAL]
    frame, line = (outside or frames)[-1]
    return f"{frame.f_globals.get('__name__', '?')}:{frame.f_code.co_name}:{line}"


def from_exception(exc: BaseException, *, failed: bool, counterexample: str | None = None,
                   hint: str | None = None) -> Failure:
    """The :class:`Failure` for ``exc`` raised on the case ``counterexample`` (JSON).

    ``failed`` says the exception means "the property does not hold" (a ``PropertyFailure``);
    otherwise it is an unexpected error and its traceback is kept. A failure keeps the
    traceback of the target's exception it was raised from (:func:`target_traceback`).
    The structured attributes
    of the exception (``label``, ``error``, ``tolerance``, ``rule``, ``floor``, ``detail``,
    ``hint``) are used when present; the message is never parsed for them. ``hint`` is used
    when the exception brings none.
    """
    text = str(exc)
    label = getattr(exc, "label", None)
    rule = getattr(exc, "rule", None)
    detail = getattr(exc, "detail", None)
    own_hint = getattr(exc, "hint", None)
    return Failure(
        kind="failed" if failed else "error",
        exception=type(exc).__name__,
        message=text if failed else f"{type(exc).__name__}: {text}",
        label=str(label) if label is not None else None,
        origin=origin(exc),
        error=_number(getattr(exc, "error", None)),
        tolerance=_number(getattr(exc, "tolerance", None)),
        rule=str(rule) if rule else None, floor=_number(getattr(exc, "floor", None)),
        detail=str(detail) if detail else "",
        hint=str(own_hint) if own_hint else hint,
        counterexample=counterexample,
        traceback=target_traceback(exc, failed=failed),
    )


KIT_EXCEPTIONS: Final = frozenset({"PropertyFailure", "FactoryRejected", "NotApplicable",
                                   "Inconclusive", "ConventionsError", "TimedOut"})
"""The kit's own exception types: a failure they carry is the kit's verdict, not the
target's exception; their cause, when there is one, is."""


def target_traceback(exc: BaseException, *, failed: bool) -> str | None:
    """The traceback worth showing for ``exc``: for an unexpected error, its own (with the
    chain); for a failure (``failed``), that of the first exception in its chain
    (``__cause__``) raised by anything but the kit (:data:`KIT_EXCEPTIONS`):
    the target's own exception, e.g. a factory or forward that raised, which the kit turned
    into a failure (``raise PropertyFailure(...) from exc``; only explicit causes are
    followed, so an exception the kit handled itself is never shown). None when the chain
    holds none (a comparison beyond its allowance)."""
    if not failed:
        return "".join(tb.format_exception(exc))
    seen: set[int] = {id(exc)}
    current: BaseException | None = exc.__cause__  # the failure itself is the kit's verdict
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ not in KIT_EXCEPTIONS:
            return "".join(tb.format_exception(current, chain=False))
        current = current.__cause__
    return None


def signature(exc: BaseException) -> tuple[str, str]:
    """What "failing the same way" means to the shrinker: the exception's type and the
    failing comparison's label — or, for a failed condition (a label but no error figure: its
    label is its message, figures and all) or an exception without a label, its
    :func:`origin`. The numbers in the message play no part."""
    label = getattr(exc, "label", None)
    if label is None or (getattr(exc, "error", None) is None and hasattr(exc, "error")):
        return type(exc).__name__, f"origin {origin(exc)}"
    return type(exc).__name__, f"label {label}"


def explain(failure: Failure, *, traceback: bool = False) -> list[tuple[str, str]]:
    """The explanation every output prints, as ``(field, text)`` lines in a fixed order:
    message, the failing comparison's figures (unless the message starts with them), hint,
    minimal counterexample, shrunk-from,
    reproduce, and (with ``traceback``) the traceback of an error. Renderers format each
    line their own way (``field: text``, a Markdown item, a JUnit text line)."""
    lines = [("message", failure.message)]
    if failure.figures and not failure.message.startswith(f"{failure.label}: error "):
        lines.append(("error", failure.figures))
    if failure.hint:
        lines.append(("hint", failure.hint))
    if failure.counterexample:
        lines.append(("minimal counterexample", failure.counterexample))
    if failure.shrunk_from:
        there = (f", where it fails with {failure.shrunk_from_figures}"
                 if failure.shrunk_from_figures else "")
        lines.append(("shrunk from", f"the explicit example {failure.shrunk_from} "
                                     f"in {failure.shrink_runs} re-runs{there}"))
    if failure.reproduce:
        lines.append(("reproduce", failure.reproduce))
    if traceback and failure.traceback:
        lines.append(("traceback", failure.traceback.rstrip()))
    return lines


def explain_text(failure: Failure, *, traceback: bool = False) -> str:
    """:func:`explain` as plain text, one ``field: text`` per line (JUnit, pytest)."""
    return "\n".join(f"{key}: {text}" for key, text in explain(failure, traceback=traceback))
