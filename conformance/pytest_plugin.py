"""pytest plugin of the conformance kit (entry point ``pytest11``: ``hcspec``).

Two ways to use it:

1. ``pytest --hc-target TARGET [--hc-profile quick|ci|thorough] [--hc-device cpu|cuda|auto]
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

Statuses map to pytest outcomes: passed -> pass; failed/error -> fail (message, minimal
counterexample, reproduction command); blocked/not applicable -> skip with the reason;
expected failure -> xfail; an expected failure that passes -> fail (``XPASS(strict)``).

Without ``--hc-target`` and without ``HC_CONFORMANCE_TARGET`` the plugin is inert: it only
declares its options and its marker, imports nothing heavy and adds no tests.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from hcspec.conformance.report import PropertyResult
    from hcspec.conformance.runner import RunSetup

ENV_VAR = "HC_CONFORMANCE_TARGET"  # = hcspec.conformance.targets.ENV_VAR, kept import-free here
MARKER = "hc_conformance"
_RUNS_KEY = pytest.StashKey[dict[tuple[Any, ...], "_TargetRun"]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the ``--hc-*`` options."""
    group = parser.getgroup("hcspec", "hcspec conformance kit (HC/mHC implementations)")
    group.addoption("--hc-target", default=None, metavar="TARGET",
                    help=f"run the conformance properties against TARGET (default: ${ENV_VAR})")
    group.addoption("--hc-profile", default="ci", choices=("quick", "ci", "thorough"),
                    help="conformance profile (default: ci; deterministic)")
    group.addoption("--hc-device", default="auto", choices=("cpu", "cuda", "auto"),
                    help="device for the conformance properties (default: auto)")
    group.addoption("--hc-seed", default=0, type=int, help="conformance run seed (default 0)")
    group.addoption("--hc-expected-failures", default=None, metavar="FILE",
                    help="'PROPERTY_ID: reason' lines: those failures are xfail")


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (needed under ``--strict-markers`` by tests that use the helper)."""
    config.addinivalue_line("markers", f"{MARKER}: a conformance property test (hcspec kit)")


def _selected_target(config: pytest.Config) -> str | None:
    option = config.getoption("--hc-target", default=None)
    return str(option) if option else (os.environ.get(ENV_VAR) or None)


class _TargetRun:
    """One target's run within a pytest session: the setup and the statuses so far (for
    prerequisite blocking)."""

    def __init__(self, setup: RunSetup, expected: Mapping[str, str]) -> None:
        self.setup = setup
        self.expected = dict(expected)
        self.statuses: dict[str, str] = {}

    def run(self, prop_id: str) -> PropertyResult:
        from hcspec.conformance import properties
        from hcspec.conformance.runner import evaluate_property

        prop = properties.BY_ID[prop_id]
        result = evaluate_property(self.setup, prop, self.statuses, self.expected.get(prop_id))
        self.statuses[prop_id] = result.status
        return result


def _target_run(config: pytest.Config, target: str | None, profile: str | None,
                device: str | None, seed: int | None,
                expected: Mapping[str, str] | None) -> _TargetRun:
    from hcspec.conformance import expected as expected_files
    from hcspec.conformance.runner import prepare

    target = target or _selected_target(config)
    if target is None:
        pytest.fail(f"no conformance target selected: pass one to conformance_tests(), use "
                    f"--hc-target TARGET or set {ENV_VAR}", pytrace=False)
    profile = profile or config.getoption("--hc-profile", default="ci")
    device = device or config.getoption("--hc-device", default="auto")
    seed = config.getoption("--hc-seed", default=0) if seed is None else seed
    if expected is None:
        path = config.getoption("--hc-expected-failures", default=None)
        expected = expected_files.load(path) if path else {}
    key = (target, profile, device, seed, tuple(sorted(expected.items())))
    runs = config.stash.setdefault(_RUNS_KEY, {})
    if key not in runs:
        runs[key] = _TargetRun(prepare(target, profile=str(profile), device=str(device),
                                       seed=int(seed)), expected)
    return runs[key]


def _report(result: PropertyResult) -> None:
    """Turn a property result into the pytest outcome."""
    from hcspec.conformance import report as rp

    if result.status == rp.PASSED:
        return
    if result.status in (rp.BLOCKED, rp.NOT_APPLICABLE):
        pytest.skip(f"{result.status}: {result.message}")
    if result.status == rp.XFAIL:
        pytest.xfail(result.message)
    lines = [f"{result.id} {result.status}: {result.message}"]
    if result.status == rp.XPASS:
        lines[0] = f"[XPASS(strict)] {result.id}: {result.message}"
    if result.counterexample:
        lines.append(f"minimal counterexample: {result.counterexample}")
    if result.reproduce:
        lines.append(f"reproduce: {result.reproduce}")
    if result.traceback:
        lines.append(result.traceback)
    pytest.fail("\n".join(lines), pytrace=False)


class ConformanceItem(pytest.Item):
    """One property run as a pytest item (added under ``--hc-target``)."""

    def __init__(self, *, prop_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prop_id = prop_id
        self.add_marker(MARKER)

    def runtest(self) -> None:
        run = _target_run(self.config, None, None, None, None, None)
        _report(run.run(self.prop_id))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return ("hc-conformance", None, f"hc-conformance {self.prop_id}")


class ConformanceCollector(pytest.Collector):
    """Holds the :class:`ConformanceItem` of every selected property."""

    def collect(self) -> Iterable[pytest.Item]:
        from hcspec.conformance import properties

        for prop in properties.CATALOGUE:
            yield ConformanceItem.from_parent(self, name=prop.id, prop_id=prop.id)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Under ``--hc-target``/``$HC_CONFORMANCE_TARGET`` add the property items, unless the
    session already collected tests made by :func:`conformance_tests`.

    Raises:
        pytest.UsageError: the target cannot be resolved or imported, the profile or device is
            unknown (or ``cuda`` without CUDA), or the expected-failures file is unreadable;
            pytest then stops with this one message (exit code 4) instead of failing every
            property.
    """
    target = _selected_target(config)
    if target is None:
        return
    if any(item.get_closest_marker(MARKER) for item in items):
        return
    try:  # once, here: a target that does not resolve is one usage error, not one per item
        _target_run(config, None, None, None, None, None)
    except (ValueError, OSError) as exc:  # TargetError is a ValueError
        raise pytest.UsageError(f"hcspec conformance kit, target {target!r}: {exc}") from exc
    collector = ConformanceCollector.from_parent(session, name="hc-conformance")
    items.extend(collector.collect())


def conformance_tests(
    target: str | None = None,
    *,
    expected_failures: Mapping[str, str] | None = None,
    profile: str | None = None,
    device: str | None = None,
    seed: int | None = None,
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
) -> Callable[..., None]:
    """A pytest test function parametrized over the conformance properties of ``target``.

    Assign it to a ``test_*`` name in a test module. Arguments left None come from the
    ``--hc-*`` options (``target`` from ``--hc-target`` or ``$HC_CONFORMANCE_TARGET``; no target
    at all fails loudly). ``expected_failures`` maps property ids to reasons: such a failure is
    reported as xfail and a pass as a strict XPASS failure.

    Raises:
        hcspec.conformance.properties.SelectionError: ``only``/``skip`` name no property.
        ValueError: ``expected_failures`` names an unknown property id.
        hcspec.conformance.targets.TargetError: an explicit ``target`` cannot be resolved (raised
            here, so pytest reports one collection error instead of a failure per property).
    """
    from hcspec.conformance import properties
    from hcspec.conformance.targets import resolve

    ids = [p.id for p in properties.select(only, skip)]
    unknown = sorted(set(expected_failures or {}) - set(properties.BY_ID))
    if unknown:
        raise ValueError(f"expected_failures names unknown property ids: {', '.join(unknown)}")
    if target is not None:
        resolve(target)

    @pytest.mark.hc_conformance
    @pytest.mark.parametrize("hc_property", ids, ids=ids)
    def test_conformance(hc_property: str, request: pytest.FixtureRequest) -> None:
        run = _target_run(request.config, target, profile, device, seed, expected_failures)
        _report(run.run(hc_property))

    return test_conformance
