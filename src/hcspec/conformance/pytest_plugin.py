"""pytest plugin of the conformance kit (entry point ``pytest11``: ``hcspec``).

Two ways to use it:

1. ``pytest --hc-target TARGET [--hc-profile quick|ci|thorough|kernel] [--hc-device cpu|cuda|auto]
   [--hc-seed N] [--hc-expected-failures FILE]`` (or ``HC_CONFORMANCE_TARGET=TARGET pytest``)
   adds one test item per property to the session.
2. In your own test file, :func:`conformance_tests` returns a test function parametrized over
   every property for your target, with expected failures by property id::

       from hcspec.conformance.pytest_plugin import conformance_tests

       test_my_hc = conformance_tests(
           "mypackage.adapter:make",
           expected_failures={"constraints.h_res_other_axis": "10 Sinkhorn rounds"},
       )

   When a session collects such tests, the plugin adds no items of its own.

Precedence: **the command line wins.** An ``--hc-*`` option given on the command line
overrides the same argument of :func:`conformance_tests`, and every such conflict is printed
(``hcspec: --hc-profile thorough overrides conformance_tests(profile='quick') in
test_mine.py``); an argument the command line does not give comes from the helper, else from
the option's default.

A TARGET that does not resolve, an unknown profile or device, or an expected-failures file
that cannot be read or names an unknown id is one usage error (pytest exit code 4), with or
without the helper, found at collection (``--co`` included) before any property runs.

Statuses map to pytest outcomes: passed -> pass; failed/error/timeout -> fail (the failure's
explanation, :func:`hcspec.conformance.outputs.failure.explain_text`: message, the failing case's
error and tolerance, hint, minimal counterexample, shrunk-from, reproduction command);
blocked/not applicable -> skip with the reason (``-rs`` shows it against the property, not
against this file); expected failure -> xfail; an expected failure that passes -> fail
(``XPASS(strict)``). Each property runs in a worker thread limited to ``--hc-timeout``
seconds, with torch's global state restored after it (nothing the target changes leaks into
the rest of the session). SIGTERM during a session is handled like Ctrl-C: pytest stops,
reports what ran, the plugin prints the cause (the signal, or ``pytest.exit(): MESSAGE``), the
property that was running, the finished results and the properties not run, each named
``TARGET::ID`` when the session runs several targets (also into ``--junitxml`` as suite
properties ``hc_interrupted``, ``hc_interrupted_by``, ``hc_running``, ``hc_finished``,
``hc_not_run``), and pytest exits 2 (interrupted), for either signal.

hypothesis writes nothing into the current directory: while a property runs, its home (where
it caches, e.g. ``.hypothesis/constants/``) is a temporary directory of the session, removed at
its end (:mod:`hcspec.conformance.run.hypothesis_home`).

``--hypothesis-show-statistics`` does not apply: the kit drives hypothesis itself inside each
property item (no database, its own seeds), so pytest's hypothesis plugin has no statistics
to show for these items.

Without ``--hc-target`` and without ``HC_CONFORMANCE_TARGET`` the plugin is inert: it only
declares its options and its marker, imports nothing heavy and adds no tests.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

from hcspec.conformance.profiles import DEFAULT_PROFILE, PROFILE_NAMES
from hcspec.conformance.pytest_run import Settings as _Settings
from hcspec.conformance.pytest_run import TargetRun as _TargetRun
from hcspec.conformance.pytest_run import validate as _validate

if TYPE_CHECKING:
    from hcspec.conformance.outputs.report import PropertyResult
    from hcspec.conformance.run.hypothesis_home import SessionHome

ENV_VAR = "HC_CONFORMANCE_TARGET"  # = subjects.targets.ENV_VAR, kept import-free here
MARKER = "hc_conformance"
_RUNS_KEY = pytest.StashKey[dict["_Settings", "_TargetRun"]]()
_SIGTERM_KEY = pytest.StashKey[Any]()
_HOME_KEY: pytest.StashKey[SessionHome] = pytest.StashKey()
_SIGNAL_KEY = pytest.StashKey[str]()
_DEFAULTS: dict[str, Any] = {"profile": "ci", "device": "auto", "seed": 0, "timeout": None,
                             "expected_failures": None}
_OPTIONS = {"target": "--hc-target", "profile": "--hc-profile", "device": "--hc-device",
            "seed": "--hc-seed", "timeout": "--hc-timeout",
            "expected_failures": "--hc-expected-failures"}


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the ``--hc-*`` options (defaults None: a value given on the command line is
    told apart from the default, for the precedence rule)."""
    group = parser.getgroup("hcspec", "hcspec conformance kit (HC/mHC implementations)")
    group.addoption("--hc-target", default=None, metavar="TARGET",
                    help=f"run the conformance properties against TARGET (default: ${ENV_VAR})")
    group.addoption("--hc-profile", default=None, choices=PROFILE_NAMES,
                    help=f"conformance profile (default: {DEFAULT_PROFILE}; deterministic)")
    group.addoption("--hc-device", default=None, choices=("cpu", "cuda", "auto"),
                    help="device for the conformance properties (default: auto)")
    group.addoption("--hc-seed", default=None, type=int, help="conformance run seed (default 0)")
    group.addoption("--hc-timeout", default=None, type=float, metavar="SECONDS",
                    help="wall-clock limit per property (default: the profile's; 0: none)")
    group.addoption("--hc-expected-failures", default=None, metavar="FILE",
                    help="'PROPERTY_ID: reason' lines: those failures are xfail")


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (needed under ``--strict-markers`` by tests that use the helper)
    and the recorder of what interrupts the session (:class:`_InterruptCause`)."""
    config.addinivalue_line("markers", f"{MARKER}: a conformance property test (hcspec kit)")
    if not config.pluginmanager.has_plugin(_InterruptCause.NAME):
        config.pluginmanager.register(_InterruptCause(config), _InterruptCause.NAME)


def interrupt_cause(exc: BaseException, recorded: str | None) -> str:
    """What stopped a session that exits "interrupted", from the exception pytest caught
    (``exc``) and the signal this plugin's handler ``recorded`` (``SIGTERM``), else None:
    ``pytest.exit(): MESSAGE`` for :func:`pytest.exit`, ``stopped: REASON`` for a session
    told to stop (``session.shouldstop``, e.g. by a plugin), the recorded signal, else
    ``SIGINT`` (a ``KeyboardInterrupt``: Ctrl-C)."""
    if isinstance(exc, pytest.exit.Exception):
        return f"pytest.exit(): {exc.msg}"
    if isinstance(exc, pytest.Session.Interrupted):
        return f"stopped: {exc}"
    return recorded or "SIGINT"


class _InterruptCause:
    """A plugin object that keeps, in the config's stash, the cause of an interrupted session
    (:func:`interrupt_cause`); the module-level hooks receive no config at that point."""

    NAME = "hcspec-conformance-interrupt-cause"

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Record :func:`interrupt_cause` of the exception that stopped the session."""
        stash = self.config.stash
        stash[_SIGNAL_KEY] = interrupt_cause(excinfo.value, stash.get(_SIGNAL_KEY, None))


def _selected_target(config: pytest.Config) -> str | None:
    option = config.getoption("--hc-target", default=None)
    return str(option) if option else (os.environ.get(ENV_VAR) or None)


def _settings(config: pytest.Config, helper: Mapping[str, Any] | None) -> _Settings:
    """Apply the precedence rule: command line, else the helper's argument, else the default
    (the target: ``--hc-target``, the helper's, ``$HC_CONFORMANCE_TARGET``).

    Raises:
        pytest.UsageError: no target at all, or an expected-failures file that cannot be read
            or is malformed.
    """
    from hcspec.conformance.families import BY_ID
    from hcspec.conformance.subjects import expected as expected_files

    helper = helper or {}
    values: dict[str, Any] = {}
    for name, option in _OPTIONS.items():
        given = config.getoption(option, default=None)
        values[name] = given if given is not None else helper.get(name)
    target = values["target"] or os.environ.get(ENV_VAR)
    if not target:
        raise pytest.UsageError(f"hcspec conformance kit: no target selected: pass one to "
                                f"conformance_tests(), use --hc-target TARGET or set {ENV_VAR}")
    failures = values["expected_failures"]
    if isinstance(failures, str):  # a file, from the command line
        try:
            failures = expected_files.load(failures, option="--hc-expected-failures",
                                           known=BY_ID)
        except (OSError, ValueError) as exc:
            raise pytest.UsageError(f"hcspec conformance kit: {exc}") from exc
    elif failures:  # a mapping, from the helper: its globs stand for the ids they match
        try:
            failures = expected_files.expand(failures, BY_ID,
                                             where="conformance_tests(expected_failures=...)")
        except ValueError as exc:
            raise pytest.UsageError(f"hcspec conformance kit: {exc}") from exc
    return _Settings(
        str(target), str(values["profile"] or _DEFAULTS["profile"]),
        str(values["device"] or _DEFAULTS["device"]),
        int(values["seed"] if values["seed"] is not None else _DEFAULTS["seed"]),
        None if values["timeout"] is None else float(values["timeout"]),
        tuple(sorted(dict(failures or {}).items())))


def _conflicts(config: pytest.Config, helper: Mapping[str, Any], where: str) -> list[str]:
    """``--hc-x V overrides conformance_tests(x=W) in FILE`` for each helper argument the
    command line overrides with a different value."""
    lines = []
    for name, option in _OPTIONS.items():
        given, pinned = config.getoption(option, default=None), helper.get(name)
        if given is not None and pinned is not None and given != pinned:
            lines.append(f"hcspec: {option} {given} overrides conformance_tests({name}="
                         f"{pinned!r}) in {where} (the command line wins)")
    return lines


def _target_run(config: pytest.Config, settings: _Settings) -> _TargetRun:
    runs = config.stash.setdefault(_RUNS_KEY, {})
    if settings not in runs:
        from hcspec.conformance.run.hypothesis_home import SessionHome

        runs[settings] = _TargetRun(settings, config.stash.setdefault(_HOME_KEY, SessionHome()))
    return runs[settings]


def _report(result: PropertyResult) -> None:
    """Turn a property result into the pytest outcome."""
    from hcspec.conformance.outputs import report as rp
    from hcspec.conformance.outputs.failure import explain_text

    if result.status == rp.PASSED:
        return
    if result.status in (rp.BLOCKED, rp.NOT_APPLICABLE):
        pytest.skip(result.skip_reason)
    if result.status == rp.XFAIL:
        pytest.xfail(result.message)
    head = (f"[XPASS(strict)] {result.id}: {result.message}" if result.status == rp.XPASS
            else f"{result.id} {result.status}")
    body = explain_text(result.failure, traceback=True) if result.failure is not None else ""
    pytest.fail(f"{head}\n{body}".rstrip(), pytrace=False)


class ConformanceItem(pytest.Item):
    """One property run as a pytest item (added under ``--hc-target``)."""

    def __init__(self, *, prop_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prop_id = prop_id
        self.add_marker(MARKER)

    def runtest(self) -> None:
        """Run the property against the session's ``--hc-target`` and turn its result into
        the pytest outcome (pass, fail with the failure's explanation, skip with the
        not-applicable or blocked reason, xfail; a strict XPASS fails).

        Raises:
            pytest.UsageError: no target is selected or the expected-failures file is bad.
        """
        run = _target_run(self.config, _settings(self.config, None))
        _report(run.run(self.prop_id))

    def reportinfo(self) -> tuple[str, int | None, str]:
        """``("hcspec.conformance", None, "hcspec.conformance::PROPERTY_ID")``: where pytest
        reports the item (no file or line: it is a property of the kit, not a test in a file);
        the node id is the same test id (:func:`hcspec.conformance.outputs.report.test_id`) that the
        CLI's JUnit report uses."""
        from hcspec.conformance.outputs.report import TEST_ID_PREFIX, test_id

        return (TEST_ID_PREFIX, None, test_id(self.prop_id))


class ConformanceCollector(pytest.Collector):
    """Holds the :class:`ConformanceItem` of every selected property."""

    def collect(self) -> Iterable[pytest.Item]:
        """One :class:`ConformanceItem` per property of the catalogue, in catalogue order
        (prerequisites first), each named by its property id."""
        from hcspec.conformance import families as catalogue

        for prop in catalogue.CATALOGUE:
            yield ConformanceItem.from_parent(self, name=prop.id, prop_id=prop.id)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A skipped conformance property is reported against the property (its node id), not
    against the line of this plugin that called ``pytest.skip``."""
    report = yield
    if (report.skipped and item.get_closest_marker(MARKER) is not None
            and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3):
        report.longrepr = (item.nodeid, None, report.longrepr[2])
    return report


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Check the settings of every conformance run the session will make (one usage error,
    before anything runs, when one is wrong), print the command-line options that override
    helper arguments, and under ``--hc-target``/``$HC_CONFORMANCE_TARGET`` add the property
    items, unless the session already collected tests made by :func:`conformance_tests`.

    Raises:
        pytest.UsageError: the target cannot be resolved or imported, the profile or device is
            unknown (or ``cuda`` without CUDA), or the expected-failures file is unreadable or
            names an unknown id; pytest then stops with this one message (exit code 4) instead
            of failing every property.
    """
    helpers: dict[int, tuple[Mapping[str, Any], str]] = {}
    for item in items:
        helper = getattr(getattr(item, "obj", None), "hc_helper_arguments", None)
        if item.get_closest_marker(MARKER) is not None and helper is not None:
            helpers.setdefault(id(helper), (helper, item.nodeid.split("::")[0]))
    if helpers:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        for helper, where in helpers.values():
            for line in _conflicts(config, helper, where):
                if reporter is not None:
                    reporter.write_line(line, yellow=True)
            _validate(_settings(config, helper))
        _handle_sigterm(config)
        return
    if _selected_target(config) is None:
        return
    _validate(_settings(config, None))
    _handle_sigterm(config)
    from hcspec.conformance.outputs.report import TEST_ID_PREFIX

    # node ids hcspec.conformance::<id>, the test ids of the CLI's JUnit report too
    collector = ConformanceCollector.from_parent(session, name=TEST_ID_PREFIX,
                                                 nodeid=TEST_ID_PREFIX)
    report = config.hook.pytest_make_collect_report(collector=collector)
    config.hook.pytest_collectreport(report=report)  # counted in "collected N items"
    items.extend(x for x in report.result if isinstance(x, pytest.Item))


def _handle_sigterm(config: pytest.Config) -> None:
    """From now to the end of the session, SIGTERM (a CI job's timeout) is handled like
    Ctrl-C, so pytest stops cleanly and still writes what it reports (``--junitxml``)."""
    from hcspec.conformance.run.timeouts import Terminated

    def handler(signum: int, frame: FrameType | None) -> None:
        config.stash[_SIGNAL_KEY] = "SIGTERM"
        raise Terminated(f"signal {signum}")

    if _SIGTERM_KEY in config.stash:
        return
    with contextlib.suppress(ValueError):  # not the main thread: no signal handlers
        config.stash[_SIGTERM_KEY] = signal.signal(signal.SIGTERM, handler)


def _property_id(item: pytest.Item) -> str | None:
    """The property id of a conformance item (``--hc-target`` or the helper), else None."""
    if isinstance(item, ConformanceItem):
        return item.prop_id
    callspec = getattr(item, "callspec", None)
    if item.get_closest_marker(MARKER) is None or callspec is None:
        return None
    prop_id = callspec.params.get("hc_property")
    return prop_id if isinstance(prop_id, str) else None


def _item_target(item: pytest.Item) -> str | None:
    """The target a conformance item runs against (``--hc-target``, or the helper's
    arguments under the precedence rule); None when it cannot be determined."""
    helper = None if isinstance(item, ConformanceItem) else getattr(
        getattr(item, "function", None), "hc_helper_arguments", None)
    try:
        return _settings(item.config, helper).target
    except pytest.UsageError:
        return None


def interrupted_summary(session: pytest.Session, signal_name: str) -> dict[str, Any] | None:
    """What an interrupted session ran of the kit: ``interrupted_by``, ``running`` (the
    property that was running, or None), ``finished`` (property -> status, in run order)
    and ``not_run`` (the collected conformance items that did not finish, the running one
    first); None when the session collected no conformance item. Runs are told apart by
    (target, property id): a property is named by its id when the session has one target,
    else as ``TARGET::ID``."""
    runs = session.config.stash.get(_RUNS_KEY, {})
    collected = [(_item_target(item), pid) for item in getattr(session, "items", [])
                 if (pid := _property_id(item)) is not None]
    if not collected:
        return None
    finished: dict[tuple[str | None, str], str] = {}
    running: tuple[str | None, str] | None = None
    for settings, run in runs.items():
        finished.update(((settings.target, pid), status) for pid, status in run.statuses.items())
        if running is None and run.running is not None:
            running = (settings.target, run.running)
    targets = {target for target, _ in [*collected, *finished]}

    def name(key: tuple[str | None, str]) -> str:
        return key[1] if len(targets) == 1 else f"{key[0]}::{key[1]}"

    not_run = [key for key in dict.fromkeys(collected) if key not in finished]
    if running in not_run:
        not_run.remove(running)
        not_run.insert(0, running)
    return {"interrupted_by": signal_name, "running": None if running is None else name(running),
            "finished": {name(key): status for key, status in finished.items()},
            "not_run": [name(key) for key in not_run]}


@pytest.hookimpl(tryfirst=True)  # before the JUnit writer, which writes in its own
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """When SIGINT, SIGTERM or ``pytest.exit()`` stopped a session that ran conformance
    properties: print what ran (the cause, :func:`interrupt_cause`; the running property,
    the finished results, the properties not run) and add
    the same as suite properties to ``--junitxml`` (``hc_interrupted``, ``hc_interrupted_by``,
    ``hc_running``, ``hc_finished``, ``hc_not_run``); pytest exits 2 (interrupted) for
    both signals. Then restore the SIGTERM handler :func:`_handle_sigterm` replaced and
    remove the private hypothesis home the properties ran with."""
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        _report_interrupt(session)
    previous = session.config.stash.get(_SIGTERM_KEY, None)
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
    home = session.config.stash.get(_HOME_KEY, None)
    if home is not None:
        home.close()


def _report_interrupt(session: pytest.Session) -> None:
    config = session.config
    summary = interrupted_summary(session, config.stash.get(_SIGNAL_KEY, "interrupted"))
    if summary is None:
        return
    finished = ", ".join(f"{pid} {status}" for pid, status in summary["finished"].items())
    running = summary["running"] or "nothing"
    lines = [f"hcspec conformance kit: interrupted ({summary['interrupted_by']}) while running "
             f"{running}; finished {len(summary['finished'])}: {finished or 'none'}",
             f"hcspec conformance kit: not run ({len(summary['not_run'])}): "
             f"{', '.join(summary['not_run']) or 'none'}"]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, yellow=True)
    from _pytest.junitxml import xml_key  # pytest's JUnit writer, when --junitxml is given

    xml = config.stash.get(xml_key, None)
    if xml is not None:
        xml.add_global_property("hc_interrupted", "true")
        xml.add_global_property("hc_interrupted_by", summary["interrupted_by"])
        xml.add_global_property("hc_running", summary["running"] or "")
        xml.add_global_property("hc_finished", finished)
        xml.add_global_property("hc_not_run", ",".join(summary["not_run"]))


def conformance_tests(
    target: str | None = None,
    *,
    expected_failures: Mapping[str, str] | None = None,
    profile: str | None = None,
    device: str | None = None,
    seed: int | None = None,
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    timeout: float | None = None,
) -> Callable[..., None]:
    """A pytest test function parametrized over the conformance properties of ``target``.

    Assign it to a ``test_*`` name in a test module. An ``--hc-*`` option given on the
    command line overrides the argument here (the conflict is printed); arguments left None
    come from the options' defaults (``target`` from ``$HC_CONFORMANCE_TARGET``; no target at
    all is a usage error). ``expected_failures`` maps property ids to reasons: such a failure
    is reported as xfail and a pass as a strict XPASS failure. ``timeout``: seconds per
    property (default: the profile's).

    Raises:
        hcspec.conformance.families.SelectionError: ``only``/``skip`` name no property.

    A target that does not resolve or an unknown expected-failure id is reported once, as a
    pytest usage error (exit code 4), at collection.
    """
    from hcspec.conformance import families as catalogue

    ids = [p.id for p in catalogue.select(only, skip)]
    arguments = {"target": target, "profile": profile, "device": device, "seed": seed,
                 "timeout": timeout, "expected_failures": dict(expected_failures)
                 if expected_failures is not None else None}

    @pytest.mark.hc_conformance
    @pytest.mark.parametrize("hc_property", ids, ids=ids)
    def test_conformance(hc_property: str, request: pytest.FixtureRequest) -> None:
        run = _target_run(request.config, _settings(request.config, arguments))
        _report(run.run(hc_property))

    test_conformance.hc_helper_arguments = arguments  # type: ignore[attr-defined]
    return test_conformance
