"""Running one property: :func:`evaluate_property` decides whether it applies or is blocked,
runs it (:func:`run_property`: the explicit examples, then hypothesis's exploration) in a
worker thread limited to the run's timeout, and turns what happened into its
:class:`hcspec.conformance.outputs.report.PropertyResult` (the failure shrunk, reproducible, with
its likely cause)."""

from __future__ import annotations

import contextlib
import shlex
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from hypothesis import Verbosity, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable

from hcspec.conformance.machinery import bug_classes
from hcspec.conformance.machinery.base import (
    Context,
    FactoryRejected,
    Inconclusive,
    NotApplicable,
    PropertyFailure,
    seeded_global_rng,
)
from hcspec.conformance.machinery.building import LEFT_OUT
from hcspec.conformance.machinery.declaration import Property
from hcspec.conformance.machinery.requirements import DISTRIBUTED, Subject
from hcspec.conformance.outputs import failure as fl
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.profiles import Profile
from hcspec.conformance.protocol import KINDS
from hcspec.conformance.run import isolation, shrink
from hcspec.conformance.run.inspection import RunSetup, TargetInfo
from hcspec.conformance.run.threads import KIT_THREADS, in_worker, intra_op_threads
from hcspec.conformance.run.timeouts import TimedOut, call_with_timeout
from hcspec.conformance.strategies import Case


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

    A failure of an explicit example is shrunk (:func:`hcspec.conformance.run.shrink.shrink`, unless
    the property opts out; hypothesis shrinks its own); a replayed case is reported as given.
    A case the factory rejects or that is inconclusive
    (:class:`hcspec.conformance.machinery.base.Inconclusive`) is not counted.

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
        if all(m.startswith(LEFT_OUT) for m in ctx.rejected):
            return _Outcome(rp.NOT_APPLICABLE,
                            f"every case ({len(ctx.rejected)}) is past the declared "
                            f"max_parameters, e.g. {ctx.rejected[0].removeprefix(LEFT_OUT)}"), 0
        return _Outcome(rp.NOT_APPLICABLE,
                        f"the factory rejected every case ({len(ctx.rejected)}), e.g. "
                        f"{ctx.rejected[0]}"), 0
    left_out = [m.removeprefix(LEFT_OUT) for m in ctx.rejected if m.startswith(LEFT_OUT)]
    sizes = (f"left out past the declared max_parameters: {len(left_out)} case(s), e.g. "
             f"{left_out[0]}" if left_out else "")
    if ctx.inconclusive:
        return _Outcome(rp.PASSED,
                        f"{len(ctx.inconclusive)} inconclusive cases not counted, e.g. "
                        f"{ctx.inconclusive[0]}" + (f"; {sizes}" if sizes else "")), checked
    return _Outcome(rp.PASSED, sizes), checked


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


def not_applicable_reason(prop: Property, setup: RunSetup) -> str | None:
    """Why ``prop`` cannot run on the target: its first unmet declared requirement (kind,
    capability, float64, state domain, CUDA, ...), decided on the inspected sample impl and the
    run before any case; None when it applies."""
    info = setup.info
    prepared = setup.prepared_for(prop)
    facts = None if prepared is None else prepared.facts
    return prop.unmet(Subject(info.kind, info.capabilities, info.dtype, info.conventions,
                              setup.device, setup.profile, facts))


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
    reason = not_applicable_reason(prop, setup)
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
                  prepared=setup.prepared_for(prop))
    running: list[Case] = []
    start = time.perf_counter()
    with isolation.watch() as changed:
        try:
            outcome, checked = in_worker(
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
    """:func:`hcspec.conformance.machinery.bug_classes.known_bug_class` on ``case`` (the
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
