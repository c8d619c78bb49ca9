"""Running the catalogue against a target: :func:`check_implementation`.

For each property, in catalogue order: not applicable if the target's kind or capabilities do
not fit (with the reason, even when a prerequisite failed); blocked if a prerequisite failed;
otherwise the explicit examples run first, then hypothesis explores with the profile's
settings. Every case builds a fresh impl, so
no property sees another's changes. An unexpected exception is reported as ``error`` with its
traceback and the run goes on; ``KeyboardInterrupt`` stops the run and returns the partial
report (``interrupted``). pytest (:mod:`hcspec.conformance.pytest_plugin`) and the CLI
(:mod:`hcspec.conformance.cli`) are thin layers over this module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import platform
import shlex
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, ParamSpec, TypeVar

import torch
from hypothesis import Verbosity, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable

from hcspec.conformance import diagnostics, isolation, shrink
from hcspec.conformance import failure as fl
from hcspec.conformance import properties as catalogue
from hcspec.conformance import report as rp
from hcspec.conformance.profiles import Profile, get_profile
from hcspec.conformance.properties import bug_classes
from hcspec.conformance.properties.base import (
    Context,
    FactoryRejected,
    Inconclusive,
    NotApplicable,
    Property,
    PropertyFailure,
    seeded_global_rng,
)
from hcspec.conformance.properties.requirements import DISTRIBUTED, Subject
from hcspec.conformance.protocol import (
    KINDS,
    Conventions,
    ConventionsError,
    Factory,
    UnknownKind,
    capabilities,
    check_required,
    conventions_of,
)
from hcspec.conformance.report import kit_version
from hcspec.conformance.strategies import Case, make_branch
from hcspec.conformance.targets import Target, TargetError, importable_folders, resolve
from hcspec.conformance.timeouts import Terminated as Terminated  # re-exported: runner's API
from hcspec.conformance.timeouts import (
    TimedOut,
    call_with_timeout,
    interrupt_name,
)

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``.

    Raises:
        ValueError: unknown device, or ``cuda`` without a CUDA device.
    """
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--device: expected cpu, cuda or auto, got {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device (torch.cuda.is_available() is False)")
    return device


@dataclass
class TargetInfo:
    """What the run learned from a sample impl (n = 4, d = 8).

    Attributes:
        kind, dtype, capabilities, conventions: as read from the sample impl.
        problems: why no sample impl could be built or read (reported by shape.output).
        warnings: findings about the impl as built (header warnings).
        causes: likely causes of failures found while inspecting (a forward that reseeds
            the global RNG, a non-finite output, a factory that ignores ``dtype``): each
            failure's hint names them.
        global_state_changes: what the factory and the forward changed in torch's global
            state (restored by the kit; :mod:`hcspec.conformance.isolation`).
        declaration_error: a declaration the kit cannot read (an unknown ``kind``, an unknown
            or invalid conventions field): :func:`prepare` raises it as a usage error.
    """

    kind: str = "unknown"
    dtype: torch.dtype = torch.float64
    capabilities: frozenset[str] = frozenset()
    conventions: Conventions = field(default_factory=Conventions)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    causes: dict[str, str] = field(default_factory=dict)
    global_state_changes: list[str] = field(default_factory=list)
    declaration_error: str | None = None


StatusFn = Callable[[str], None]

_SENTINEL_SEED = 0x5EED_C0DE
"""The global RNG's seed while a sample forward runs: a forward that calls
``torch.manual_seed`` is seen by ``torch.initial_seed()`` no longer being this."""


def inspect_target(factory: Factory, device: str, seed: int, *,
                   on_status: StatusFn | None = None,
                   timeout: float | None = None) -> TargetInfo:
    """Build a sample impl (float64, else float32) to learn the kind, capabilities, working
    dtype and conventions, and diagnose it (non-deterministic or non-finite forward, a
    factory that ignores ``dtype``, a forward that reseeds the global RNG, changes to torch's
    global state — restored). ``on_status`` is told what is being built or called, before
    it is (so a hang names its place); the whole inspection runs in a worker thread limited
    to ``timeout`` seconds. Problems are recorded, never raised: the shape property reports
    them as failures. Raises only ``KeyboardInterrupt``."""
    status = on_status or (lambda text: None)
    info = TargetInfo()
    with isolation.watch() as changed:
        try:
            _in_worker(lambda: _inspect_seeded(info, factory, device, seed, status),
                       timeout, "building and inspecting a sample impl", changed)
        except TimedOut as exc:
            stuck = f"; it was stuck at {exc.stack.where}" if exc.stack is not None else ""
            info.problems.append(f"{info.causes.get('running', 'the inspection')} did not "
                                 f"finish within {exc.seconds:g} s (--timeout){stuck}")
            changed = []  # the abandoned thread is inside the kit's RNG fork: not the target's
    info.causes.pop("running", None)
    if changed:
        info.global_state_changes = list(changed)
        info.warnings.append("the factory or forward changed torch's global state (the kit "
                             "restored it after each property): " + "; ".join(changed))
    return info


def _inspect_seeded(info: TargetInfo, factory: Factory, device: str, seed: int,
                    status: StatusFn) -> None:
    with seeded_global_rng(seed, device):  # the diagnostics run forward: dropout draws
        _inspect(info, factory, device, seed, status)


def _say(info: TargetInfo, status: StatusFn, text: str) -> None:
    info.causes["running"] = text
    status(text)


def _inspect(info: TargetInfo, factory: Factory, device: str, seed: int,
             status: StatusFn) -> None:
    for dtype in (torch.float64, torch.float32):
        call = (f"factory(4, 8, layer_index=0, dtype={dtype}, device={device!r}, "
                f"seed={seed})")
        _say(info, status, f"building a sample impl: {call}")
        try:
            impl = factory(4, 8, layer_index=0, dtype=dtype, device=device, seed=seed)
        except Exception as exc:
            info.problems.append(f"factory(4, 8, dtype={dtype}) raised {type(exc).__name__}: {exc}")
            continue
        info.dtype = dtype
        try:
            check_required(impl)
        except UnknownKind as exc:
            info.declaration_error = str(exc)
            return
        except (TypeError, ValueError) as exc:
            info.problems.append(str(exc))
            return
        info.kind = str(impl.kind)
        info.capabilities = capabilities(impl)
        try:
            info.conventions = conventions_of(impl)
        except ConventionsError as exc:
            info.declaration_error = str(exc)
            return
        ignored = _ignored_dtype(impl, dtype, info.conventions.compute_dtype)
        if ignored:
            info.causes["dtype"] = ignored
            info.warnings.append(ignored)
        _say(info, status, f"calling forward on a sample [2, 3, 4, 8] {dtype} state "
                           "(twice, to check that it is deterministic)")
        warnings = diagnostics.diagnose(impl, dtype, device, info.conventions)
        info.warnings += warnings
        if any("non-finite" in w for w in warnings):
            info.causes["nonfinite"] = next(w for w in warnings if "non-finite" in w)
        _say(info, status, "calling forward once more to see whether it reseeds the global RNG")
        reseeds = _reseeds_global_rng(impl, dtype, device, info.conventions)
        if reseeds:
            info.causes["reseeds"] = reseeds
            info.warnings.append(reseeds)
        return


def _ignored_dtype(impl: object, dtype: torch.dtype,
                   compute_dtype: torch.dtype | None = None) -> str | None:
    """``parameters are float32 but float64 was requested`` when the impl's floating
    parameters have neither the ``dtype`` its factory was asked for nor the declared
    ``compute_dtype`` (parameters kept in a declared internal precision are not ignoring
    anything), else None."""
    parameters = getattr(impl, "parameters", None)
    if not callable(parameters):
        return None
    try:
        found = sorted({str(p.dtype).replace("torch.", "") for p in parameters()
                        if isinstance(p, torch.Tensor) and p.is_floating_point()
                        and p.dtype not in (dtype, compute_dtype)})
    except Exception:  # parameters() itself is checked by the properties
        return None
    if not found:
        return None
    return (f"the factory ignores dtype: parameters are {', '.join(found)} but "
            f"{str(dtype).replace('torch.', '')} was requested (build the parameters with the "
            "dtype the factory receives)")


def _reseeds_global_rng(impl: object, dtype: torch.dtype, device: str,
                        conventions: Conventions) -> str | None:
    """A warning when one forward of ``impl`` calls ``torch.manual_seed`` (the global RNG's
    ``initial_seed()`` changes), else None. The RNG is forked, so nothing leaks."""
    with torch.random.fork_rng():
        torch.manual_seed(_SENTINEL_SEED)
        try:
            x = diagnostics.sample_state(4, 8, dtype, device, conventions)
            branch = make_branch("mlp", 8, dtype, device, seed=7)
            with torch.no_grad():
                impl.forward(x.clone(), branch)  # type: ignore[attr-defined]
        except Exception:  # reported in detail by the properties
            return None
        seeded = torch.initial_seed()
    if seeded == _SENTINEL_SEED:
        return None
    return (f"forward calls torch.manual_seed (the global RNG was reseeded to {seeded} during "
            "one forward): every forward draws the same numbers, and torch.compile cannot "
            "trace it (a graph break: TorchDynamo skips torch.manual_seed); seed once, "
            "outside forward")


def _versions(target: Target) -> dict[str, str]:
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "hypothesis": importlib.metadata.version("hypothesis"),
    }
    versions.update(target.versions)
    return versions


def reproduce_command(target: str, prop_id: str, profile: str, device: str, case: Case,
                      world_size: int | None = None) -> str:
    """The one-line CLI command that replays ``case`` for ``prop_id`` (with
    ``--world-size`` for a multi-process run)."""
    ranks = "" if world_size is None else f" --world-size {world_size}"
    return (f"hc-conformance run {shlex.quote(target)} --only {prop_id} --profile {profile} "
            f"--device {device}{ranks} --case {shlex.quote(case.to_json())}")


@dataclass
class _Outcome:
    """What :func:`run_property` found: a status with a ``note`` (passed, not applicable) or a
    ``failure`` (failed, error, timeout: the one record, shrinking included) and the failing
    case; ``shrunk_from`` is the explicit example the failing case was shrunk from (the
    known-bug diagnosis reruns it)."""

    status: str
    note: str = ""
    failing: Case | None = None
    failure: fl.Failure | None = None
    shrunk_from: Case | None = None


def _classify(exc: BaseException, case: Case | None) -> _Outcome:
    failed = isinstance(exc, PropertyFailure)
    failure = fl.from_exception(exc, failed=failed,
                                counterexample=case.to_json() if case is not None else None)
    return _Outcome(rp.FAILED if failed else rp.ERROR, failing=case, failure=failure)


def run_property(
    prop: Property, ctx: Context, *, replay: Case | None = None,
    on_case: Callable[[Case], None] | None = None,
) -> tuple[_Outcome, int]:
    """Run one property in ``ctx``: explicit examples, then hypothesis (or only ``replay``).

    A failure of an explicit example is shrunk (:func:`hcspec.conformance.shrink.shrink`, unless
    the property opts out; hypothesis shrinks its own); a replayed case is reported as given.
    A case the factory rejects or that is inconclusive
    (:class:`hcspec.conformance.properties.base.Inconclusive`) is not counted.

    ``on_case`` is told each case before it runs (the runner names the running case when
    the property times out).

    Returns the outcome and the number of cases checked (not counting a failing case).
    Never raises except ``KeyboardInterrupt``.
    """
    checked = 0
    failing: list[Case] = []

    def run_one(case: Case) -> None:
        nonlocal checked
        if on_case is not None:
            on_case(case)
        try:
            prop.run(ctx, case)
        except (FactoryRejected, NotApplicable):
            raise
        except Inconclusive as exc:
            ctx.inconclusive.append(str(exc))
            raise
        except BaseException:
            failing.append(case)
            raise
        checked += 1

    try:
        cases = [replay] if replay is not None else list(prop.examples(ctx))
        for case in cases:
            try:
                run_one(case)
            except (FactoryRejected, Inconclusive):
                continue
            except (NotApplicable, KeyboardInterrupt):
                raise
            except Exception as exc:
                if replay is not None or not prop.shrink:
                    return _classify(exc, case), checked
                if on_case is not None:
                    on_case(case)
                shrunk = shrink.shrink(prop, ctx, case, exc)
                outcome = _classify(shrunk.error, shrunk.case)
                if shrunk.case != case and outcome.failure is not None:
                    outcome.shrunk_from = case
                    outcome.failure = outcome.failure.with_changes(
                        shrunk_from=case.to_json(), shrink_runs=shrunk.runs,
                        shrunk_from_figures=fl.comparison_figures(exc))
                return outcome, checked
        if replay is None and prop.explore and ctx.profile.max_examples > 0:
            explore = _explorer(prop, ctx, run_one)
            with contextlib.suppress(Unsatisfiable):  # every case rejected: counted below
                explore()
    except NotApplicable as exc:
        return _Outcome(rp.NOT_APPLICABLE, str(exc)), checked
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        return _classify(exc, failing[-1] if failing else None), checked
    if checked == 0:
        if ctx.inconclusive:
            return _Outcome(rp.NOT_APPLICABLE,
                            f"not demonstrated: none of the {len(ctx.inconclusive)} cases was "
                            f"conclusive, e.g. {ctx.inconclusive[0]}"), 0
        if not ctx.rejected:
            return _Outcome(rp.NOT_APPLICABLE, "no case was generated"), 0
        return _Outcome(rp.NOT_APPLICABLE,
                        f"the factory rejected every case ({len(ctx.rejected)}), e.g. "
                        f"{ctx.rejected[0]}"), 0
    if ctx.inconclusive:
        return _Outcome(rp.PASSED,
                        f"{len(ctx.inconclusive)} inconclusive cases not counted, e.g. "
                        f"{ctx.inconclusive[0]}"), checked
    return _Outcome(rp.PASSED), checked


def _explorer(prop: Property, ctx: Context, run_one: Callable[[Case], None]) -> Callable[[], None]:
    profile: Profile = ctx.profile
    base = profile.hypothesis_settings(seed_is_fixed=True)
    chosen = settings(base, verbosity=Verbosity.quiet, report_multiple_bugs=False)

    @hypothesis_seed(exploration_seed(prop.id, ctx.seed))
    @chosen
    @given(prop.strategy(ctx))
    def explore(case: Case) -> None:
        try:
            run_one(case)
        except (FactoryRejected, Inconclusive):
            reject()

    return explore


def exploration_seed(property_id: str, seed: int) -> int:
    """The hypothesis seed of one property's exploration: a function of the property id and
    the run's ``--seed`` only. (hypothesis's own ``derandomize`` hashes the test function's
    source, so every edit of the kit's wrapper would silently change the cases a CI gate sees.)
    """
    return zlib.crc32(property_id.encode()) + seed


@dataclass
class RunSetup:
    """A resolved target and everything a property run needs besides the property.

    ``timeout`` is the per-property wall-clock limit in seconds (None: none).
    ``world_size``: the ranks of a multi-process run (None: single-process);
    ``distributed``: that run, once handed to the multi-process harness
    (:func:`hand_off`).
    """

    target: Target
    info: TargetInfo
    profile: Profile
    device: str
    seed: int
    timeout: float | None = None
    world_size: int | None = None
    distributed: Any = None

    def report(self) -> rp.Report:
        """An empty report carrying this run's header."""
        return rp.Report(
            target=self.target.name, kit_version=kit_version(), profile=self.profile.name,
            seed=self.seed, device=self.device, dtype=str(self.info.dtype).replace("torch.", ""),
            kind=self.info.kind, description=self.target.description,
            capabilities=sorted(self.info.capabilities),
            conventions=self._conventions(), versions=_versions(self.target),
            warnings=[*self.info.problems, *self.info.warnings], timeout=self.timeout,
            global_state_changes=list(self.info.global_state_changes),
            max_examples=self.profile.max_examples,
            declared_conventions=[name for name in self.info.conventions.declared_fields()
                                  if name in self._conventions()],
        )

    def _conventions(self) -> dict[str, str]:
        described = self.info.conventions.describe()
        if self.info.kind not in ("mhc", "unknown"):  # Sinkhorn–Knopp fields concern mHC only
            described = {k: v for k, v in described.items() if not k.startswith("sinkhorn")}
        return described


def _timeout(profile: Profile, timeout: float | None) -> float | None:
    """The per-property limit: ``timeout`` when given (0 or less: none), else the profile's
    own (:attr:`hcspec.conformance.profiles.Profile.timeout`)."""
    if timeout is None:
        return profile.timeout
    return timeout if timeout > 0 else None


def prepare(
    target: str | Factory | None, *, profile: str = "ci", device: str = "auto", seed: int = 0,
    timeout: float | None = None, on_status: StatusFn | None = None,
    on_resolved: SetupDone | None = None, world_size: int | None = None,
    max_examples: int | None = None,
) -> RunSetup:
    """Resolve the target, profile and device and inspect a sample impl
    (:func:`inspect_target`, within the time limit). ``on_resolved`` is called once the
    target is resolved, before any factory or forward runs, with a report holding the part of
    the header known by then (target, versions, profile, seed, device).

    ``max_examples`` replaces the profile's hypothesis examples per property (None: the
    profile's own); the report records the number used (``Report.max_examples``).

    Raises:
        hcspec.conformance.targets.TargetError, ValueError: as :func:`check_implementation`;
            also a TargetError when the sample impl declares an unknown ``kind`` or conventions
            the kit cannot read (:attr:`TargetInfo.declaration_error`; with a "did you mean").
    """
    if world_size is not None and (isinstance(world_size, bool) or not isinstance(
            world_size, int) or world_size < 1):
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    chosen = get_profile(profile)
    if max_examples is not None:  # --max-examples: every property's exploration budget
        if isinstance(max_examples, bool) or not isinstance(max_examples, int) \
                or max_examples < 1:
            raise ValueError(f"max_examples must be an int >= 1, got {max_examples!r}")
        chosen = dataclasses.replace(chosen, max_examples=max_examples)
    resolved = resolve(target)
    dev = resolve_device(device)
    limit = _timeout(chosen, timeout)
    early = RunSetup(resolved, TargetInfo(), chosen, dev, seed, limit, world_size)
    if on_resolved is not None:
        on_resolved(early.report())
    early.info = inspect_target(resolved.factory, dev, seed, on_status=on_status, timeout=limit)
    if early.info.declaration_error is not None:  # a typo in a declaration: a usage error
        raise TargetError(f"TARGET {resolved.name!r}: {early.info.declaration_error}")
    return early


ProgressStart = Callable[[Property, int, int], None]
ProgressResult = Callable[[rp.PropertyResult], None]
SetupDone = Callable[[rp.Report], None]


def _current_folder_importable(run: Callable[P, R]) -> Callable[P, R]:
    """``run`` with the current folder importable for the whole call, and ``sys.path`` put
    back after it (:func:`hcspec.conformance.targets.importable_folders`)."""

    @functools.wraps(run)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        with importable_folders():
            return run(*args, **kwargs)

    return wrapped


@_current_folder_importable
def check_implementation(
    target: str | Factory | None = None,
    *,
    profile: str = "ci",
    device: str = "auto",
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    seed: int = 0,
    expected_failures: Mapping[str, str] | None = None,
    case: Case | str | Mapping[str, object] | None = None,
    on_start: ProgressStart | None = None,
    on_result: ProgressResult | None = None,
    stop_on_failure: bool = False,
    on_setup: SetupDone | None = None,
    timeout: float | None = None,
    on_resolved: SetupDone | None = None,
    on_status: StatusFn | None = None,
    world_size: int | None = None,
    finished: Sequence[rp.PropertyResult] = (),
    max_examples: int | None = None,
) -> rp.Report:
    """Run the conformance properties against ``target`` and return the structured report.

    The current folder is importable for the whole call (a factory may import its project's
    modules when it likes; ``sys.path`` is put back after). Every property (and the
    inspection of a sample impl) runs in a worker thread limited to
    ``timeout`` seconds, and within :func:`hcspec.conformance.isolation.watch`: what the
    target changes in torch's global state is recorded (``global_state_changes``) and
    restored, so the caller's process is left as it was found.

    Args:
        target: a TARGET string (``reference:mhc``, ``package.module:factory``), a factory, or
            None to read ``HC_CONFORMANCE_TARGET``.
        profile: ``quick``, ``ci`` (derandomized) or ``thorough``.
        device: ``cpu``, ``cuda`` or ``auto``.
        only, skip: property ids, family names or globs (prerequisites are added).
        seed: added to every case's seed and to each property's hypothesis seed
            (:func:`exploration_seed`).
        expected_failures: property id -> reason; such a failure is ``xfail``, a pass ``xpass``.
        case: replay exactly this case for the selected properties (no hypothesis): a
            :class:`~hcspec.conformance.strategies.Case`, its JSON text (what a failure's
            reproduce line prints after ``--case``) or a dict of its fields
            (:func:`as_case`).
        on_start, on_result: progress callbacks.
        on_resolved: called once the target is resolved, before any factory or forward runs,
            with the header known so far (so a CLI prints it before a hang can happen).
        on_status: told what is being built or called during the inspection, before it is.
        on_setup: called once the target is resolved and inspected, before any property
            runs, with the report holding only the header (so a CLI can print it first).
        stop_on_failure: stop after the first property that fails unexpectedly (failed, error,
            timeout, xpass); the ids left are listed in ``not_run`` (the mutation table uses
            this).
        timeout: seconds per property (None: the profile's default,
            :data:`hcspec.conformance.timeouts.DEFAULT_TIMEOUTS`; 0: no limit). A property
            past it is reported ``timeout`` and the run goes on.
        world_size: run on this many ranks too: the multi-process properties (the
            ``parallel`` family) go to the multi-process harness (:func:`hand_off`), which
            starts the ranks here, or joins the launcher's group when this process joined one
            (:mod:`hcspec.conformance.parallel.launcher`); the harness's deadline is
            ``timeout``. None: a single-process run, where they are not applicable.
        max_examples: hypothesis examples per property after the explicit ones, in place of
            the profile's (``--max-examples``; recorded in the report); None: the profile's.
        finished: results of an earlier run of the same target (``--resume``, read from its
            journal, :mod:`hcspec.conformance.journal`): taken as they are, in place of
            running their properties again (``on_start``/``on_result`` are not called for
            them); their statuses block dependants as their own would.

    Returns:
        The :class:`hcspec.conformance.report.Report`. ``KeyboardInterrupt`` (Ctrl-C) or
        :class:`Terminated` (SIGTERM, where the caller turns it into one) during the
        inspection or the run returns the partial report: ``interrupted`` set,
        ``interrupted_by`` the signal, ``running`` what was running and ``not_run`` the ids
        that did not finish.

    Raises:
        hcspec.conformance.targets.TargetError: the target cannot be resolved or imported, or
            its sample impl declares an unknown ``kind`` or unreadable conventions.
        hcspec.conformance.properties.SelectionError: ``only``/``skip`` name no property.
        ValueError: unknown profile or device, or an expected failure with an unknown id;
            a ``case`` text or dict that is not a case.
        TypeError: ``case`` is none of the forms above.
    """
    case = as_case(case)
    expected = dict(expected_failures or {})
    unknown = sorted(set(expected) - set(catalogue.BY_ID))
    if unknown:
        raise ValueError(f"expected failures name unknown property ids: {', '.join(unknown)}")
    selected = catalogue.select(only, skip)
    header: list[rp.Report] = []
    doing: list[str] = ["resolving the target"]

    def resolved(early: rp.Report) -> None:
        header.append(early)
        if on_resolved is not None:
            on_resolved(early)

    def status(text: str) -> None:
        doing[0] = text
        if on_status is not None:
            on_status(text)

    try:
        setup = prepare(target, profile=profile, device=device, seed=seed, timeout=timeout,
                        on_status=status, on_resolved=resolved, world_size=world_size,
                        max_examples=max_examples)
        if world_size is not None:
            status(f"running the multi-process properties on {world_size} ranks")
            hand_off(setup, selected)
    except KeyboardInterrupt as exc:
        if not header:
            raise
        partial = header[0]
        partial.interrupted, partial.interrupted_by = True, interrupt_name(exc)
        partial.running = f"setup: {doing[0]}"
        partial.not_run = [p.id for p in selected]
        return partial
    report = setup.report()
    if setup.distributed is not None:
        setup.distributed.annotate(report)
    if case is not None:
        report.case = case.to_json()
        report.case_at_defaults = case.fields_at_default()
    if on_setup is not None:
        on_setup(report)
    statuses: dict[str, str] = {}
    done = {r.id: r for r in finished}
    for index, prop in enumerate(selected):
        if prop.id in done:  # resumed: finished by an earlier run of the same target
            statuses[prop.id] = done[prop.id].status
            report.results.append(done[prop.id])
            continue
        if on_start is not None:
            on_start(prop, index, len(selected))
        try:
            result = evaluate_property(setup, prop, statuses, expected.get(prop.id), case)
        except KeyboardInterrupt as exc:
            report.interrupted, report.interrupted_by = True, interrupt_name(exc)
            report.running = prop.id
            report.not_run = [p.id for p in selected[index:]]
            break
        statuses[prop.id] = result.status
        report.results.append(result)
        if on_result is not None:
            on_result(result)
        if stop_on_failure and result.status in rp.UNEXPECTED:
            report.not_run = [p.id for p in selected[index + 1:]]
            break
    return report


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


def _not_applicable_reason(prop: Property, setup: RunSetup) -> str | None:
    """Why ``prop`` cannot run on the target: its first unmet declared requirement (kind,
    capability, float64, state domain, CUDA, ...), decided on the inspected sample impl and the
    run before any case; None when it applies."""
    info = setup.info
    facts = None if setup.distributed is None else setup.distributed.facts
    return prop.unmet(Subject(info.kind, info.capabilities, info.dtype, info.conventions,
                              setup.device, setup.profile, facts))


def hand_off(setup: RunSetup, selected: Sequence[Property]) -> None:
    """Hand the multi-process properties among ``selected`` (those requiring
    :data:`~hcspec.conformance.properties.requirements.DISTRIBUTED`) to the multi-process
    harness (:mod:`hcspec.conformance.parallel.harness`) when the run has ranks
    (``setup.world_size``): it reads the target's sharding facts, and runs the ranks once when
    one of them applies; the results go to ``setup.distributed``, where the checks read them.
    ``KeyboardInterrupt`` stops the ranks and propagates."""
    multi = [p for p in selected if DISTRIBUTED in p.requires]
    if not multi or setup.world_size is None:
        return
    from hcspec.conformance.parallel import harness, launcher

    setup.distributed = harness.prepare(
        setup.target.sharding_factory, device=setup.device, dtype=setup.info.dtype,
        seed=setup.seed, world_size=setup.world_size, joined=launcher.joined())
    if any(_not_applicable_reason(p, setup) is None for p in multi):
        harness.execute(setup.distributed, setup.timeout)


BLOCKING: frozenset[str] = frozenset({rp.FAILED, rp.ERROR, rp.BLOCKED, rp.XFAIL, rp.TIMEOUT})
"""Statuses of a prerequisite that block the properties depending on it."""


def _hint(prop: Property, info: TargetInfo) -> str | None:
    """The likely cause of ``prop``'s failure found while inspecting the target, if any."""
    causes = info.causes
    if "reseeds" in causes and prop.family == "compile":
        return causes["reseeds"]
    for key in ("nonfinite", "dtype", "reseeds"):
        if key in causes:
            return causes[key]
    return None


KIT_THREADS: Final = 1
"""torch's intra-op threads while the kit runs a target's code (:func:`intra_op_threads`).
The cases are small (a few hundred elements): an OpenMP parallel region there costs more than
it saves, and on a loaded machine (CI runners, pytest-xdist, several runs at once) every
region waits for threads that the kernel has not scheduled — a run took ten times its CPU time
in wall time with two threads per process on two busy cores (docs/benchmarks.md, "Time to
verdict")."""


@functools.cache
def _threads_settable() -> bool:
    """Whether torch's intra-op thread count can be changed at any time: the OpenMP backend.
    (The native backend fixes its pool at the first parallel region and warns on a later
    change.)"""
    return "parallel backend: OpenMP" in torch.__config__.parallel_info()


@contextlib.contextmanager
def intra_op_threads(threads: int, restore: int, changed: list[str]) -> Iterator[None]:
    """Run a block in the calling thread with ``torch.set_num_threads(threads)``, then
    ``torch.set_num_threads(restore)`` (the caller's own setting: torch also keeps the count
    process-wide, for MKL and for threads that start later, so it is put back after each
    block). A block that changes the count itself (a target calling ``torch.set_num_threads``)
    is named in ``changed``, e.g. ``torch.get_num_threads() (worker thread) 1 -> 4``; its
    change is undone too. Nothing is changed where the count cannot be changed at any time
    (:func:`_threads_settable`). Restores also when the block raises.

    Raises:
        RuntimeError: ``threads`` or ``restore`` below 1 (from torch).
    """
    if not _threads_settable():
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        now = torch.get_num_threads()
        if now != threads:
            changed.append(f"torch.get_num_threads() (worker thread) {threads} -> {now}")
        torch.set_num_threads(restore)


def _in_worker(fn: Callable[[], T], seconds: float | None, what: str,
               changed: list[str]) -> T:
    """:func:`hcspec.conformance.timeouts.call_with_timeout` for code the kit does not own,
    with :data:`KIT_THREADS` intra-op threads (:func:`intra_op_threads`; the calling thread's
    count is put back after it): the worker thread's own state (grad mode, thread count) is
    put back afterwards and what changed is appended to ``changed``. Raises as
    ``call_with_timeout``."""
    restore = torch.get_num_threads()  # the caller's: the worker's may be the kit's own

    def guarded() -> T:
        thread_changed: list[str] = []
        try:
            with isolation.thread_watch() as thread_changed, \
                    intra_op_threads(KIT_THREADS, restore, thread_changed):
                return fn()
        finally:
            changed.extend(thread_changed)

    return call_with_timeout(guarded, seconds, what)


def evaluate_property(
    setup: RunSetup, prop: Property, statuses: Mapping[str, str], expected: str | None = None,
    replay: Case | None = None,
) -> rp.PropertyResult:
    """One property's result: not applicable (kind, capability: decided first, so a property
    that cannot apply is never reported blocked), blocked (a prerequisite in ``statuses``
    failed), or run (:func:`run_property`, in a worker thread limited to ``setup.timeout``:
    past it the result is ``timeout``, naming the running case and the time), with the
    expected-failure mapping. What the property's run changed in torch's global state is
    restored and recorded in ``global_state_changes``. Never raises except
    ``KeyboardInterrupt``."""
    info, device, profile, seed = setup.info, setup.device, setup.profile, setup.seed
    target_name, factory = setup.target.name, setup.target.factory
    result = rp.PropertyResult(prop.id, prop.family, prop.statement, prop.theorem, rp.PASSED,
                               expected_failure=expected)
    # Applicability is a fact about the target (its kind and capabilities, read from a sample
    # impl) and is decided before blocking: a property that could never run is not
    # applicable, whatever its prerequisites did. With the kind unknown (no sample impl could
    # be inspected) the capabilities are unknown too, so a failed prerequisite blocks first.
    reason = _not_applicable_reason(prop, setup)
    failed_pre = [pre for pre in prop.prerequisites if statuses.get(pre) in BLOCKING]
    if failed_pre and (reason is None or info.kind not in KINDS):
        result.status = rp.BLOCKED
        result.note = "blocked: prerequisite " + ", ".join(
            f"{pre} {statuses[pre]}" for pre in failed_pre)
        return result
    if reason is not None:
        result.status = rp.NOT_APPLICABLE
        result.note = reason
        return result
    ctx = Context(factory=factory, target_name=target_name, kind=info.kind,
                  conventions=info.conventions, capabilities=info.capabilities,
                  dtype=info.dtype, device=device, profile=profile, seed=seed,
                  distributed=setup.distributed)
    running: list[Case] = []
    start = time.perf_counter()
    with isolation.watch() as changed:
        try:
            outcome, checked = _in_worker(
                lambda: run_property(prop, ctx, replay=replay, on_case=running.append),
                setup.timeout, prop.id, changed)
        except TimedOut as exc:
            outcome, checked = _timed_out(prop, exc, running[-1] if running else None), 0
    result.seconds = time.perf_counter() - start
    if outcome.status != rp.TIMEOUT:  # an abandoned thread's state is not attributable
        result.global_state_changes = list(changed)
    result.examples = checked
    result.rejected = len(ctx.rejected)
    result.status = outcome.status
    result.note = outcome.note
    result.inconclusive = len(ctx.inconclusive)
    if outcome.status != rp.TIMEOUT:  # an abandoned thread may still be adding to it
        result.series = {quantity: dict(by_case)
                         for quantity, by_case in ctx.record.series.items()}
    failure = outcome.failure
    if failure is not None:
        if outcome.failing is not None:
            result.examples += 1  # the failing case ran too
            failure = failure.with_changes(reproduce=reproduce_command(
                target_name, prop.id, profile.name, device, outcome.failing,
                setup.world_size if DISTRIBUTED in prop.requires else None))
        if outcome.status == rp.FAILED and outcome.failing is not None:
            remaining = (None if setup.timeout is None
                         else setup.timeout - (time.perf_counter() - start))
            known = _known_bug_class(prop, ctx, outcome.shrunk_from or outcome.failing,
                                     remaining)
            if known is not None:
                failure = failure.with_changes(
                    hint=known if failure.hint is None else f"{known}; {failure.hint}")
        if failure.hint is None:
            failure = failure.with_changes(hint=_hint(prop, info))
        result.set_failure(failure)
    elif ctx.worst.label:
        result.worst = {"label": ctx.worst.label, "error": ctx.worst.error,
                           "tolerance": ctx.worst.tolerance, "rule": ctx.worst.rule,
                           "floor": ctx.worst.floor, "rules": sorted(ctx.record.applied)}
    if expected is not None:
        if result.status == rp.FAILED:
            result.status = rp.XFAIL  # its message reads "expected failure (REASON): …"
        elif result.status == rp.PASSED:
            result.status = rp.XPASS
            result.note = f"expected to fail ({expected}) but passed"
    return result


def _known_bug_class(prop: Property, ctx: Context, case: Case,
                     seconds: float | None) -> str | None:
    """:func:`hcspec.conformance.properties.bug_classes.known_bug_class` on ``case`` (the
    unshrunk example where there is one: the bug's full severity), seeded as the case ran,
    within the property's isolation, in a worker thread limited to ``seconds`` (what is left
    of the property's limit; None: no limit). None when no class is known, the time is spent
    (``seconds <= 0``: not started; past it: the thread is abandoned, as a hanging property's)
    or on any exception."""
    if seconds is not None and seconds <= 0:
        return None

    restore = torch.get_num_threads()

    def diagnose() -> str | None:
        with isolation.watch(), intra_op_threads(KIT_THREADS, restore, []), \
                seeded_global_rng(case.seed, ctx.device):
            return bug_classes.known_bug_class(prop.id, ctx, case)

    try:
        return call_with_timeout(diagnose, seconds, f"{prop.id}: known bug class")
    except Exception:  # TimedOut included
        return None


def _timed_out(prop: Property, exc: TimedOut, case: Case | None) -> _Outcome:
    """The outcome of a property that ran past its limit, naming the case that was running
    and the line its thread was stuck at (its Python stack is the failure's traceback)."""
    running = (f"the case {case.to_json()} was running" if case is not None
               else "no case had started (the explicit examples were being prepared)")
    stuck = f"; it was stuck at {exc.stack.where}" if exc.stack is not None else ""
    message = (f"{prop.id} did not finish within {exc.seconds:g} s (--timeout): {running} "
               f"when the limit passed{stuck}; its thread was abandoned and the run went on")
    stack = (None if exc.stack is None else
             "Python stack of the stuck thread when the limit passed (most recent call "
             "last):\n" + exc.stack.text)
    failure = fl.Failure(kind=rp.TIMEOUT, exception="TimedOut", message=message,
                         counterexample=case.to_json() if case is not None else None,
                         hint="a forward or factory that never returns (a deadlock, a wait "
                              "on a resource, an endless loop) for this configuration",
                         traceback=stack)
    return _Outcome(rp.TIMEOUT, failing=case, failure=failure)
