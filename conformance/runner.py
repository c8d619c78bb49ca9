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
import importlib.metadata
import platform
import shlex
import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import torch
from hypothesis import Verbosity, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable

from hcspec.conformance import diagnostics, shrink
from hcspec.conformance import properties as catalogue
from hcspec.conformance import report as rp
from hcspec.conformance.profiles import Profile, get_profile
from hcspec.conformance.properties.base import (
    Context,
    FactoryRejected,
    Inconclusive,
    NotApplicable,
    Property,
    PropertyFailure,
    seeded_global_rng,
)
from hcspec.conformance.properties.requirements import Subject
from hcspec.conformance.protocol import (
    KINDS,
    Conventions,
    Factory,
    capabilities,
    check_required,
    conventions_of,
)
from hcspec.conformance.strategies import Case
from hcspec.conformance.targets import Target, resolve


def kit_version() -> str:
    """The installed hcspec version, or the source tree's."""
    try:
        return importlib.metadata.version("hcspec")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0+source"


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
    """What the run learned from a sample impl (n = 4, d = 8)."""

    kind: str = "unknown"
    dtype: torch.dtype = torch.float64
    capabilities: frozenset[str] = frozenset()
    conventions: Conventions = field(default_factory=Conventions)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def inspect_target(factory: Factory, device: str, seed: int) -> TargetInfo:
    """Build a sample impl (float64, else float32) to learn the kind, capabilities, working
    dtype and conventions. Problems are recorded, never raised: the shape property reports
    them as failures."""
    with seeded_global_rng(seed, device):  # the diagnostics run forward: dropout draws
        return _inspect(factory, device, seed)


def _inspect(factory: Factory, device: str, seed: int) -> TargetInfo:
    info = TargetInfo()
    for dtype in (torch.float64, torch.float32):
        try:
            impl = factory(4, 8, layer_index=0, dtype=dtype, device=device, seed=seed)
        except Exception as exc:
            info.problems.append(f"factory(4, 8, dtype={dtype}) raised {type(exc).__name__}: {exc}")
            continue
        info.dtype = dtype
        try:
            check_required(impl)
        except (TypeError, ValueError) as exc:
            info.problems.append(str(exc))
            return info
        info.kind = str(impl.kind)
        info.capabilities = capabilities(impl)
        try:
            info.conventions = conventions_of(impl)
        except TypeError as exc:
            info.problems.append(str(exc))
        info.warnings = diagnostics.diagnose(impl, dtype, device, info.conventions)
        return info
    return info


def _versions(target: Target) -> dict[str, str]:
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "hypothesis": importlib.metadata.version("hypothesis"),
    }
    versions.update(target.versions)
    return versions


def reproduce_command(target: str, prop_id: str, profile: str, device: str, case: Case) -> str:
    """The one-line CLI command that replays ``case`` for ``prop_id``."""
    return (f"hc-conformance run {shlex.quote(target)} --only {prop_id} --profile {profile} "
            f"--device {device} --case {shlex.quote(case.to_json())}")


@dataclass
class _Outcome:
    status: str
    message: str = ""
    failing: Case | None = None
    trace: str | None = None
    shrunk_from: Case | None = None
    shrink_runs: int = 0


def _classify(exc: BaseException, case: Case | None) -> _Outcome:
    if isinstance(exc, PropertyFailure):
        return _Outcome(rp.FAILED, str(exc), case)
    trace = "".join(traceback.format_exception(exc))
    return _Outcome(rp.ERROR, f"{type(exc).__name__}: {exc}", case, trace)


def run_property(
    prop: Property, ctx: Context, *, replay: Case | None = None,
) -> tuple[_Outcome, int]:
    """Run one property in ``ctx``: explicit examples, then hypothesis (or only ``replay``).

    A failure of an explicit example is shrunk (:func:`hcspec.conformance.shrink.shrink`, unless
    the property opts out; hypothesis shrinks its own); a replayed case is reported as given.
    A case the factory rejects or that is inconclusive
    (:class:`hcspec.conformance.properties.base.Inconclusive`) is not counted.

    Returns the outcome and the number of cases checked. Never raises except
    ``KeyboardInterrupt``.
    """
    checked = 0
    failing: list[Case] = []

    def run_one(case: Case) -> None:
        nonlocal checked
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
                shrunk = shrink.shrink(prop, ctx, case, exc)
                outcome = _classify(shrunk.error, shrunk.case)
                if shrunk.case != case:
                    outcome.shrunk_from, outcome.shrink_runs = case, shrunk.runs
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
    """A resolved target and everything a property run needs besides the property."""

    target: Target
    info: TargetInfo
    profile: Profile
    device: str
    seed: int

    def report(self) -> rp.Report:
        """An empty report carrying this run's header."""
        return rp.Report(
            target=self.target.name, kit_version=kit_version(), profile=self.profile.name,
            seed=self.seed, device=self.device, dtype=str(self.info.dtype).replace("torch.", ""),
            kind=self.info.kind, description=self.target.description,
            capabilities=sorted(self.info.capabilities),
            conventions=self._conventions(), versions=_versions(self.target),
            warnings=[*self.info.problems, *self.info.warnings],
        )

    def _conventions(self) -> dict[str, str]:
        described = self.info.conventions.describe()
        if self.info.kind not in ("mhc", "unknown"):  # Sinkhorn–Knopp fields concern mHC only
            described = {k: v for k, v in described.items() if not k.startswith("sinkhorn")}
        return described


def prepare(
    target: str | Factory | None, *, profile: str = "ci", device: str = "auto", seed: int = 0,
) -> RunSetup:
    """Resolve the target, profile and device and inspect a sample impl.

    Raises:
        hcspec.conformance.targets.TargetError, ValueError: as :func:`check_implementation`.
    """
    chosen = get_profile(profile)
    resolved = resolve(target)
    dev = resolve_device(device)
    return RunSetup(resolved, inspect_target(resolved.factory, dev, seed), chosen, dev, seed)


ProgressStart = Callable[[Property, int, int], None]
ProgressResult = Callable[[rp.PropertyResult], None]
SetupDone = Callable[[rp.Report], None]


def check_implementation(
    target: str | Factory | None = None,
    *,
    profile: str = "ci",
    device: str = "auto",
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    seed: int = 0,
    expected_failures: Mapping[str, str] | None = None,
    case: Case | None = None,
    on_start: ProgressStart | None = None,
    on_result: ProgressResult | None = None,
    stop_on_failure: bool = False,
    on_setup: SetupDone | None = None,
) -> rp.Report:
    """Run the conformance properties against ``target`` and return the structured report.

    Args:
        target: a TARGET string (``reference:mhc``, ``package.module:factory``), a factory, or
            None to read ``HC_CONFORMANCE_TARGET``.
        profile: ``quick``, ``ci`` (derandomized) or ``thorough``.
        device: ``cpu``, ``cuda`` or ``auto``.
        only, skip: property ids, family names or globs (prerequisites are added).
        seed: added to every case's seed and to each property's hypothesis seed
            (:func:`exploration_seed`).
        expected_failures: property id -> reason; such a failure is ``xfail``, a pass ``xpass``.
        case: replay exactly this case for the selected properties (no hypothesis).
        on_start, on_result: progress callbacks.
        on_setup: called once the target is resolved and inspected, before any property
            runs, with the report holding only the header (so a CLI can print it first).
        stop_on_failure: stop after the first property that fails unexpectedly (failed, error,
            xpass); the ids left are listed in ``not_run`` (the mutation table uses this).

    Returns:
        The :class:`hcspec.conformance.report.Report`; ``KeyboardInterrupt`` during the run returns
        the partial report with ``interrupted`` set.

    Raises:
        hcspec.conformance.targets.TargetError: the target cannot be resolved or imported.
        hcspec.conformance.properties.SelectionError: ``only``/``skip`` name no property.
        ValueError: unknown profile or device, or an expected failure with an unknown id.
    """
    expected = dict(expected_failures or {})
    unknown = sorted(set(expected) - set(catalogue.BY_ID))
    if unknown:
        raise ValueError(f"expected failures name unknown property ids: {', '.join(unknown)}")
    selected = catalogue.select(only, skip)
    setup = prepare(target, profile=profile, device=device, seed=seed)
    report = setup.report()
    if case is not None:
        report.case = case.to_json()
        report.case_at_defaults = case.fields_at_default()
    if on_setup is not None:
        on_setup(report)
    statuses: dict[str, str] = {}
    for index, prop in enumerate(selected):
        if on_start is not None:
            on_start(prop, index, len(selected))
        try:
            result = evaluate_property(setup, prop, statuses, expected.get(prop.id), case)
        except KeyboardInterrupt:
            report.interrupted = True
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


def _not_applicable_reason(prop: Property, setup: RunSetup) -> str | None:
    """Why ``prop`` cannot run on the target: its first unmet declared requirement (kind,
    capability, float64, state domain, CUDA, ...), decided on the inspected sample impl and the
    run before any case; None when it applies."""
    info = setup.info
    return prop.unmet(Subject(info.kind, info.capabilities, info.dtype, info.conventions,
                              setup.device, setup.profile))


def evaluate_property(
    setup: RunSetup, prop: Property, statuses: Mapping[str, str], expected: str | None = None,
    replay: Case | None = None,
) -> rp.PropertyResult:
    """One property's result: not applicable (kind, capability: decided first, so a property
    that cannot apply is never reported blocked), blocked (a prerequisite in ``statuses``
    failed), or run (:func:`run_property`), with the expected-failure mapping. Never raises
    except ``KeyboardInterrupt``."""
    info, device, profile, seed = setup.info, setup.device, setup.profile, setup.seed
    target_name, factory = setup.target.name, setup.target.factory
    result = rp.PropertyResult(prop.id, prop.family, prop.statement, prop.theorem, rp.PASSED,
                               expected_failure=expected)
    # Applicability is a fact about the target (its kind and capabilities, read from a sample
    # impl) and is decided before blocking: a property that could never run is not
    # applicable, whatever its prerequisites did. With the kind unknown (no sample impl could
    # be inspected) the capabilities are unknown too, so a failed prerequisite blocks first.
    reason = _not_applicable_reason(prop, setup)
    failed_pre = [pre for pre in prop.prerequisites
                  if statuses.get(pre) in (rp.FAILED, rp.ERROR, rp.BLOCKED, rp.XFAIL)]
    if failed_pre and (reason is None or info.kind not in KINDS):
        result.status = rp.BLOCKED
        result.message = "blocked: prerequisite " + ", ".join(
            f"{pre} {statuses[pre]}" for pre in failed_pre)
        return result
    if reason is not None:
        result.status = rp.NOT_APPLICABLE
        result.message = reason
        return result
    ctx = Context(factory=factory, target_name=target_name, kind=info.kind,
                  conventions=info.conventions, capabilities=info.capabilities,
                  dtype=info.dtype, device=device, profile=profile, seed=seed)
    start = time.perf_counter()
    outcome, checked = run_property(prop, ctx, replay=replay)
    result.seconds = time.perf_counter() - start
    result.examples = checked
    result.rejected = len(ctx.rejected)
    result.status = outcome.status
    result.message = outcome.message
    result.traceback = outcome.trace
    if ctx.worst.label:
        result.achieved = {"label": ctx.worst.label, "error": ctx.worst.error,
                           "tolerance": ctx.worst.tolerance}
    result.inconclusive = len(ctx.inconclusive)
    if outcome.failing is not None:
        result.counterexample = outcome.failing.to_json()
        result.reproduce = reproduce_command(target_name, prop.id, profile.name, device,
                                             outcome.failing)
    if outcome.shrunk_from is not None:
        result.shrunk_from = outcome.shrunk_from.to_json()
        result.shrink_runs = outcome.shrink_runs
    if expected is not None:
        if result.status == rp.FAILED:
            result.status = rp.XFAIL
            result.message = f"expected failure ({expected}): {result.message}"
        elif result.status == rp.PASSED:
            result.status = rp.XPASS
            result.message = f"expected to fail ({expected}) but passed"
    return result
