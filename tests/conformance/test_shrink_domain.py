"""The shrinker stays inside a property's declared domain, and the minimal counterexample it
reports fails when replayed: gradients.mixing_trainable (n ≥ 2) is never shrunk to n = 1,
constraints.extreme_logits (parameters ×1e2–1e4) never to param_scale 1."""

from __future__ import annotations

import pytest

from hcspec.conformance.families import BY_ID
from hcspec.conformance.machinery.base import Context, PropertyFailure
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.profiles import get_profile
from hcspec.conformance.run.inspection import inspect_target
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.strategies import Case
from tools.mutation import discover, skip_reason


def context_for(make: object) -> Context:
    """A property context for ``make`` as the runner builds it under ``quick``."""
    info = inspect_target(make, "cpu", 0)  # type: ignore[arg-type]
    return Context(factory=make, target_name="standin", kind=info.kind,  # type: ignore[arg-type]
                   conventions=info.conventions, capabilities=info.capabilities,
                   dtype=info.dtype, device="cpu", profile=get_profile("quick"))


def _failed(make: object, pid: str, case: Case | None = None) -> rp.PropertyResult:
    report = check_implementation(make, profile="quick", device="cpu", only=[pid],  # type: ignore[arg-type]
                                  case=case)
    return next(r for r in report.results if r.id == pid)


def _check_counterexample(make: object, pid: str) -> Case:
    result = _failed(make, pid)
    assert result.status == rp.FAILED, (pid, result.status, result.message)
    assert result.failure is not None and result.failure.counterexample is not None
    case = Case.from_json(result.failure.counterexample)
    if result.failure.shrunk_from is not None:
        original = Case.from_json(result.failure.shrunk_from)
        reason = BY_ID[pid].admits(case)
        assert reason is None or reason == BY_ID[pid].admits(original), (pid, case, reason)
    replayed = _failed(make, pid, case)  # as the reproduce command replays it
    assert replayed.status == rp.FAILED or (  # or a prerequisite fails on that very case
        replayed.status == rp.BLOCKED and " failed" in replayed.message), (
        pid, case, replayed.message)
    ctx = context_for(make)
    with pytest.raises(PropertyFailure):  # the property itself fails on it
        BY_ID[pid].run(ctx, case)
    return case


def test_mixing_trainable_is_not_shrunk_below_two_streams() -> None:
    """Before: shrunk to n = 1, which the kit's own reference fails too."""
    from tests.mutants import temperature_zero_gradient

    case = _check_counterexample(temperature_zero_gradient.make, "gradients.mixing_trainable")
    assert case.n >= 2 and case.d > case.n


def test_extreme_logits_is_not_shrunk_out_of_its_parameter_scales() -> None:
    """Before: shrunk to param_scale 1.0, outside ×1e2–1e4 (a Sinkhorn–Knopp that ends on
    the columns fails the exact rows at every scale)."""
    from tests.mutants import sinkhorn_columns_only

    case = _check_counterexample(sinkhorn_columns_only.make, "constraints.extreme_logits")
    assert case.param_scale >= 1e2


@pytest.mark.slow
@pytest.mark.parametrize("mutant", [m for m in discover() if skip_reason(m) is None],
                         ids=lambda m: m.name)
def test_every_shrunk_mutant_counterexample_is_in_domain_and_replays(mutant) -> None:  # type: ignore[no-untyped-def]
    """Every mutant's CAUGHT_BY properties that shrink: the reported counterexample lies in
    the property's domain and fails when replayed with --case."""
    for pid in mutant.caught_by:
        if not BY_ID[pid].shrink:
            continue
        result = _failed(mutant.module.make, pid)
        if result.status != rp.FAILED:  # an error, or not caught under quick (tools.mutation)
            continue
        _check_counterexample(mutant.module.make, pid)
