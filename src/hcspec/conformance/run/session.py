"""One run of the catalogue against a target: :func:`check_implementation`.

For each property, in catalogue order: not applicable if the target's kind or capabilities do
not fit (with the reason, even when a prerequisite failed); blocked if a prerequisite failed;
otherwise the explicit examples run first, then hypothesis explores with the profile's
settings (:mod:`hcspec.conformance.run.execution`). Every case builds a fresh impl, so no property
sees another's changes. An unexpected exception is reported as ``error`` with its traceback
and the run goes on; ``KeyboardInterrupt`` stops the run and returns the partial report
(``interrupted``). What the run is told is one :class:`Options`; what it tells as it goes goes
to one :class:`Listener` (as unittest's ``TestResult`` and pytest's hooks are told).
pytest (:mod:`hcspec.conformance.pytest_plugin`) and the CLI (:mod:`hcspec.conformance.cli`)
are thin layers over this module.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from hcspec.conformance import families as catalogue
from hcspec.conformance.machinery.declaration import Property
from hcspec.conformance.machinery.setup import FamilySetup, Prepared, SetupRequest
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.protocol import Factory
from hcspec.conformance.run.execution import evaluate_property, not_applicable_reason
from hcspec.conformance.run.inspection import RunSetup, prepare
from hcspec.conformance.run.timeouts import Terminated as Terminated  # re-exported: the API's
from hcspec.conformance.run.timeouts import interrupt_name
from hcspec.conformance.strategies import Case
from hcspec.conformance.subjects.targets import importable_folders


@dataclass(frozen=True)
class Options:
    """What one run is asked to do (every field as :func:`check_implementation` documents its
    keyword of the same name).

    Attributes:
        profile: ``quick``, ``ci`` (derandomized) or ``thorough``.
        device: ``cpu``, ``cuda`` or ``auto``.
        only, skip: property ids, family names or globs (prerequisites are added); None: all.
        seed: added to every case's seed and to each property's hypothesis seed.
        expected_failures: property id -> reason (a failure is ``xfail``, a pass ``xpass``).
        case: replay exactly this case (:func:`as_case`'s forms), None: explore.
        stop_on_failure: stop after the first unexpected failure.
        timeout: seconds per property (None: the profile's; 0: none).
        world_size: the ranks of a multi-process run; None: one process.
        finished: results of an earlier run taken as they are (``--resume``).
        max_examples: hypothesis examples per property (None: the profile's).
    """

    profile: str = "ci"
    device: str = "auto"
    only: Sequence[str] | None = None
    skip: Sequence[str] | None = None
    seed: int = 0
    expected_failures: Mapping[str, str] = field(default_factory=dict)
    case: Case | str | Mapping[str, object] | None = None
    stop_on_failure: bool = False
    timeout: float | None = None
    world_size: int | None = None
    finished: Sequence[rp.PropertyResult] = ()
    max_examples: int | None = None

    def __post_init__(self) -> None:
        for name in ("only", "skip"):  # any iterable of names, kept as a tuple
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        object.__setattr__(self, "finished", tuple(self.finished))
        object.__setattr__(self, "expected_failures", dict(self.expected_failures or {}))


class Listener:
    """What a run tells its caller as it goes; every method does nothing here: a front end
    overrides the ones it needs (as unittest's ``TestResult`` or pytest's hooks). Each is
    called in the calling thread; an exception raised by one propagates out of the run."""

    def on_resolved(self, header: rp.Report) -> None:
        """The target is resolved, before any factory or forward runs: ``header`` holds the
        part of the report's header known by then (so a CLI prints it before a hang)."""

    def on_status(self, text: str) -> None:
        """What is being built or called during the setup, told before it is."""

    def on_setup(self, header: rp.Report) -> None:
        """The target is inspected and the families set up, before any property runs:
        ``header`` is the report holding only its header."""

    def on_start(self, prop: Property, index: int, total: int) -> None:
        """``prop`` (the ``index``-th of ``total`` selected) starts (not called for results
        resumed from an earlier run)."""

    def on_result(self, result: rp.PropertyResult) -> None:
        """``result`` is final (not called for results resumed from an earlier run)."""


class _Callbacks(Listener):
    """A :class:`Listener` calling the keyword callbacks ``check_implementation`` takes."""

    def __init__(self, callbacks: Mapping[str, Callable[..., None] | None]) -> None:
        self.callbacks = callbacks

    def _call(self, name: str, *args: object) -> None:
        callback = self.callbacks.get(name)
        if callback is not None:
            callback(*args)

    def on_resolved(self, header: rp.Report) -> None:
        self._call("on_resolved", header)

    def on_status(self, text: str) -> None:
        self._call("on_status", text)

    def on_setup(self, header: rp.Report) -> None:
        self._call("on_setup", header)

    def on_start(self, prop: Property, index: int, total: int) -> None:
        self._call("on_start", prop, index, total)

    def on_result(self, result: rp.PropertyResult) -> None:
        self._call("on_result", result)


CALLBACKS = ("on_resolved", "on_status", "on_setup", "on_start", "on_result")
"""The keyword callbacks :func:`check_implementation` takes in place of a :class:`Listener`."""

CASE_FORMS = ("a hcspec.conformance.strategies.Case, its JSON text (as the reproduce line "
              "prints after --case) or a dict of its fields")
"""The forms ``check_implementation(case=...)`` accepts, as its errors name them."""


def as_case(case: Case | str | Mapping[str, object] | None) -> Case | None:
    """``case`` as a :class:`~hcspec.conformance.strategies.Case`: a ``Case`` as it is, its
    JSON text (:meth:`Case.from_json`, what a failure's reproduce line prints after
    ``--case``) parsed, a mapping of its fields built (missing fields take their defaults);
    None stays None.

    >>> as_case('{"n": 2, "d": 5}') == Case(n=2, d=5)
    True
    >>> as_case({"n": 2, "d": 5}) == Case(n=2, d=5)
    True
    >>> as_case("""'{"n": 2, "d": 5}'""") == Case(n=2, d=5)
    True

    Raises:
        ValueError: text that is not a case's JSON object, or a mapping with an unknown field
            or an invalid value (one line, naming the expected fields or forms).
        TypeError: any other value (one line naming :data:`CASE_FORMS`).
    """
    if case is None or isinstance(case, Case):
        return case
    if isinstance(case, str):
        text = case.strip()
        if text.startswith("'"):  # copied with the reproduce line's shell quotes
            text = "".join(shlex.split(text))
        return Case.from_json(text)
    if isinstance(case, Mapping):
        known = {f.name for f in fields(Case)}
        unknown = sorted(str(k) for k in case if k not in known)
        if unknown:
            raise ValueError(f"case: unknown fields {unknown}; expected some of {sorted(known)}")
        try:
            fields_: dict[str, Any] = {str(k): v for k, v in case.items()}
            return Case(**fields_)
        except TypeError as exc:
            raise ValueError(f"case: {exc}; expected {CASE_FORMS}") from None
    raise TypeError(f"case: got {type(case).__name__}; expected {CASE_FORMS}")


def check_implementation(
    target: str | Factory | None = None, options: Options | None = None,
    listener: Listener | None = None, **keywords: Any,
) -> rp.Report:
    """Run the conformance properties against ``target`` and return the structured report.

    The current folder is importable for the whole call (a factory may import its project's
    modules when it likes; ``sys.path`` is put back after). Every property (and the
    inspection of a sample impl) runs in a worker thread limited to the run's ``timeout``
    seconds, and within :func:`hcspec.conformance.run.isolation.watch`: what the target changes
    in torch's global state is recorded (``global_state_changes``) and restored, so the
    caller's process is left as it was found.

    Args:
        target: a TARGET string (``reference:mhc``, ``package.module:factory``), a factory, or
            None to read ``HC_CONFORMANCE_TARGET``.
        options: what to run (:class:`Options`; None: the defaults).
        listener: told of the run's progress (:class:`Listener`; None: nobody).
        **keywords: the documented keyword form, in place of ``options`` and ``listener``:
            any field of :class:`Options` and the callbacks :data:`CALLBACKS`
            (``on_resolved(header)``, ``on_status(text)``, ``on_setup(header)``,
            ``on_start(prop, index, total)``, ``on_result(result)``: the :class:`Listener`
            methods of the same names). The fields:

            - profile: ``quick``, ``ci`` (derandomized) or ``thorough``.
            - device: ``cpu``, ``cuda`` or ``auto``.
            - only, skip: property ids, family names or globs (prerequisites are added).
            - seed: added to every case's seed and to each property's hypothesis seed
              (:func:`hcspec.conformance.run.execution.exploration_seed`).
            - expected_failures: property id -> reason; such a failure is ``xfail``, a pass
              ``xpass``.
            - case: replay exactly this case for the selected properties (no hypothesis): a
              :class:`~hcspec.conformance.strategies.Case`, its JSON text (what a failure's
              reproduce line prints after ``--case``) or a dict of its fields
              (:func:`as_case`).
            - stop_on_failure: stop after the first property that fails unexpectedly
              (failed, error, timeout, xpass); the ids left are listed in ``not_run``.
            - timeout: seconds per property (None: the profile's default,
              :data:`hcspec.conformance.run.timeouts.DEFAULT_TIMEOUTS`; 0: no limit). A property
              past it is reported ``timeout`` and the run goes on.
            - world_size: run on this many ranks too: the selected properties' family setup
              hooks get it (the ``parallel`` family's,
              :func:`hcspec.conformance.parallel.harness.setup_run`, starts the ranks here or
              joins the launcher's group; its deadline is ``timeout``). None: one process,
              where the multi-process properties are not applicable.
            - max_examples: hypothesis examples per property after the explicit ones, in
              place of the profile's (recorded in the report); None: the profile's.
            - finished: results of an earlier run of the same target (``--resume``): taken
              as they are, in place of running their properties again (the listener is not
              told of them); their statuses block dependants as their own would.

    Returns:
        The :class:`hcspec.conformance.outputs.report.Report`. ``KeyboardInterrupt`` (Ctrl-C) or
        :class:`Terminated` (SIGTERM, where the caller turns it into one) during the
        inspection or the run returns the partial report: ``interrupted`` set,
        ``interrupted_by`` the signal, ``running`` what was running and ``not_run`` the ids
        that did not finish.

    Raises:
        hcspec.conformance.subjects.targets.TargetError: the target cannot be resolved or
            imported, or its sample impl declares an unknown ``kind`` or unreadable conventions.
        hcspec.conformance.families.SelectionError: ``only``/``skip`` name no property.
        ValueError: unknown profile or device, or an expected failure with an unknown id;
            a ``case`` text or dict that is not a case.
        TypeError: ``case`` is none of the forms above; an unknown keyword; keywords given
            with ``options`` or ``listener``.
    """
    if keywords:
        if options is not None or listener is not None:
            raise TypeError("check_implementation: give options and listener, or keywords, "
                            "not both")
        known = {f.name for f in fields(Options)}
        unknown = sorted(set(keywords) - known - set(CALLBACKS))
        if unknown:
            raise TypeError(f"check_implementation() got an unexpected keyword argument "
                            f"{unknown[0]!r}")
        options = Options(**{k: v for k, v in keywords.items() if k in known})
        listener = _Callbacks({k: v for k, v in keywords.items() if k in CALLBACKS})
    with importable_folders():
        return _run(target, options or Options(), listener or Listener())


def check_parallel(target: str | Callable[..., Any] | None = None, *, world_size: int = 2,
                   only: Sequence[str] | None = None, **options: Any) -> rp.Report:
    """:func:`hcspec.conformance.run.session.check_implementation` on ``world_size`` ranks, by
    default only the ``parallel`` family (``only``); ``options`` as ``check_implementation``
    takes them (``device``, ``seed``, ``skip``, ``timeout``, ``profile``, ...).

    Raises:
        As ``check_implementation``; ValueError: ``world_size`` < 1.
    """
    return check_implementation(target, world_size=world_size,
                                only=list(only) if only else ["parallel"], **options)


def assert_parallel_conforms(target: str | Callable[..., Any] | None = None, *,
                             world_size: int = 2, **options: Any) -> rp.Report:
    """:func:`check_parallel`, for pytest: returns the report when nothing failed
    unexpectedly, else raises ``AssertionError`` with every failure (property, message).

    Raises:
        AssertionError: a property failed or errored, or the setup failed.
        As :func:`check_parallel` for bad arguments.
    """
    report = check_parallel(target, world_size=world_size, **options)
    if report.ok:
        return report
    lines = [f"{report.target} on {world_size} ranks: the parallel family failed"]
    if report.setup_error:
        lines.append(f"setup: {report.setup_error}")
    lines += [f"{r.id} {r.status}: {r.message}" for r in report.results
              if r.status in rp.UNEXPECTED]
    raise AssertionError("\n".join(lines))


def _run(target: str | Factory | None, options: Options, listener: Listener) -> rp.Report:
    """:func:`check_implementation` once its arguments are read."""
    case = as_case(options.case)
    expected = dict(options.expected_failures)
    unknown = sorted(set(expected) - set(catalogue.BY_ID))
    if unknown:
        raise ValueError(f"expected failures name unknown property ids: {', '.join(unknown)}")
    selected = catalogue.select(options.only, options.skip)
    header: list[rp.Report] = []
    doing: list[str] = ["resolving the target"]

    def resolved(early: rp.Report) -> None:
        header.append(early)
        listener.on_resolved(early)

    def status(text: str) -> None:
        doing[0] = text
        listener.on_status(text)

    try:
        setup = prepare(target, profile=options.profile, device=options.device,
                        seed=options.seed, timeout=options.timeout, on_status=status,
                        on_resolved=resolved, world_size=options.world_size,
                        max_examples=options.max_examples)
        set_up_families(setup, selected, status)
    except KeyboardInterrupt as exc:
        if not header:
            raise
        partial = header[0]
        partial.interrupted, partial.interrupted_by = True, interrupt_name(exc)
        partial.running = f"setup: {doing[0]}"
        partial.not_run = [p.id for p in selected]
        return partial
    report = setup.report()
    for prepared in setup.prepared.values():
        prepared.annotate(report)
    if case is not None:
        report.case = case.to_json()
        report.case_at_defaults = case.fields_at_default()
    listener.on_setup(report)
    statuses: dict[str, str] = {}
    done = {r.id: r for r in options.finished}
    for index, prop in enumerate(selected):
        if prop.id in done:  # resumed: finished by an earlier run of the same target
            statuses[prop.id] = done[prop.id].status
            report.results.append(done[prop.id])
            continue
        listener.on_start(prop, index, len(selected))
        try:
            result = evaluate_property(setup, prop, statuses, expected.get(prop.id), case)
        except KeyboardInterrupt as exc:
            report.interrupted, report.interrupted_by = True, interrupt_name(exc)
            report.running = prop.id
            report.not_run = [p.id for p in selected[index:]]
            break
        statuses[prop.id] = result.status
        report.results.append(result)
        listener.on_result(result)
        if options.stop_on_failure and result.status in rp.UNEXPECTED:
            report.not_run = [p.id for p in selected[index + 1:]]
            break
    return report


def set_up_families(setup: RunSetup, selected: Sequence[Property],
                    status: Callable[[str], None] = lambda text: None) -> None:
    """Call each family setup hook declared by a property among ``selected`` once
    (:data:`hcspec.conformance.machinery.setup.FamilySetup`, in catalogue order),
    telling ``status`` first, and keep what it prepared in ``setup.prepared``, where the
    properties' checks (``ctx.prepared``) and applicability read it. ``KeyboardInterrupt``
    propagates."""
    hooks: list[FamilySetup] = []
    for prop in selected:
        if prop.setup is not None and prop.setup not in hooks:
            hooks.append(prop.setup)
    for hook in hooks:
        mine = [p for p in selected if p.setup is hook]

        def applies(prepared: Prepared, hook: FamilySetup = hook,
                    mine: Sequence[Property] = mine) -> bool:
            setup.prepared[hook] = prepared
            return any(not_applicable_reason(p, setup) is None for p in mine)

        families = ", ".join(dict.fromkeys(p.family for p in mine))
        ranks = "" if setup.world_size is None else f" on {setup.world_size} ranks"
        status(f"setting up the {families} properties{ranks}")
        prepared = hook(SetupRequest(setup.target, setup.device, setup.info.dtype, setup.seed,
                                     setup.world_size, setup.timeout, applies))
        setup.prepared.pop(hook, None)
        if prepared is not None:
            setup.prepared[hook] = prepared

