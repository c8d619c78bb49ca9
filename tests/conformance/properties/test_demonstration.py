"""A case that cannot demonstrate a property never counts as a pass: an infinite tolerance, a
Birkhoff–Hopf bound made infinite by a zero H_res entry, an H_post that no parameter moves —
and declared deviations (h_post_multiplier, h_pre_eps, a learned reduce) are judged as
declared."""

from __future__ import annotations

import math
import sys

import pytest

from hcspec.conformance import rules
from hcspec.conformance.machinery.errors import Inconclusive
from hcspec.conformance.machinery.recording import Recorder
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from tests.conformance import standins

SINKHORN_BOUND = ("constraints.h_res_other_axis", "constraints.stream_sum_preserved",
                  "constraints.nonexpansive")


def _results(factory: object, only: list[str],
             profile: str = "quick") -> dict[str, rp.PropertyResult]:
    report = check_implementation(factory,  # type: ignore[arg-type]
                                  profile=profile, device="cpu", only=only)
    return {r.id: r for r in report.results}


def test_an_infinite_tolerance_is_inconclusive_not_a_pass() -> None:
    recorder = Recorder(declared=(rules.SINKHORN_OTHER_AXIS, rules.DEPTH_BOUND))
    with pytest.raises(Inconclusive, match="allowance is inf"):
        recorder.expect("colsum", 0.76, n=4, convergence=math.inf)
    with pytest.raises(Inconclusive, match="allowance is nan"):
        recorder.expect("colsum", 0.0, rule=rules.DEPTH_BOUND, bound=math.nan)
    assert recorder.worst.label == ""  # not recorded as the worst comparison


def test_other_axis_is_not_demonstrated_when_every_bound_is_infinite() -> None:
    """H_res = 1e₀ᵀ: exact rows, zero entries (Δ = ∞). Before: passed '1 / inf'."""
    got = _results(standins.make_copy_first_stream, ["constraints.h_res_other_axis"])
    result = got["constraints.h_res_other_axis"]
    assert result.status == rp.NOT_APPLICABLE, (result.status, result.message)
    assert result.message.startswith("not demonstrated")
    assert "Δ = inf" in result.message and result.achieved is None


@pytest.mark.parametrize("pid", SINKHORN_BOUND)
def test_no_sinkhorn_bound_property_passes_with_an_infinite_tolerance(pid: str) -> None:
    """Before: stream_sum_preserved '1.87 / inf', nonexpansive '0.47 / inf' passed."""
    result = _results(standins.make_copy_first_stream, [pid])[pid]
    assert result.status in (rp.PASSED, rp.NOT_APPLICABLE), result.message
    if result.status == rp.PASSED:  # only on the n = 1 cases, whose 1×1 H_res = 1 is exact
        assert result.achieved is not None and math.isfinite(result.achieved["tolerance"])
        assert result.inconclusive > 0 and "Δ = inf" in result.message


def test_declared_identity_mixing_is_checked_exactly() -> None:
    """H_res = I declared residual_mixing='identity' (HY-V4): the column sums are compared
    with the exact axis's tolerance, not the infinite bound of a matrix with zeros."""
    got = _results(standins.make_identity_declared, list(SINKHORN_BOUND))
    for pid in SINKHORN_BOUND:
        assert got[pid].status == rp.PASSED, (pid, got[pid].message)
        assert got[pid].achieved is not None
        assert got[pid].achieved["tolerance"] < 1e-9


def test_constant_one_hot_h_post_is_not_blamed_on_sigma() -> None:
    """A constant one-hot H_post with no logits: before, 'logits driven to both saturations
    … H_post = σ'; now not demonstrated, saying H_post did not move."""
    result = _results(standins.make_constant_one_hot_post,
                      ["constraints.h_post_span"])["constraints.h_post_span"]
    assert result.status == rp.NOT_APPLICABLE, result.message
    assert "did not change when the parameters were perturbed" in result.message
    assert "saturat" not in result.message.split("e.g.")[1].split(":")[0]


@pytest.fixture
def deviations():  # type: ignore[no-untyped-def]
    sys.path.insert(0, "docs/findings/repro")
    try:
        import kit_declared_deviations
        yield kit_declared_deviations
    finally:
        sys.path.remove("docs/findings/repro")


def test_declared_multiplier_one_fails_with_the_deviation_named(deviations) -> None:  # type: ignore[no-untyped-def]
    """σ + 1e-6 declared h_post_multiplier=1: before, passed ('2σ demonstrated' by the eps)."""
    result = _results(deviations.make_post_sigma_plus_eps,
                      ["constraints.h_post_span"], "ci")["constraints.h_post_span"]
    assert result.status == rp.FAILED
    assert "declared h_post_multiplier=1" in result.message
    assert "differs from the paper's 2σ" in result.message
    assert result.failure is not None and "σ instead of 2σ" in (result.failure.hint or "")


def test_a_declared_learned_reduce_is_checked_as_a_combination_of_streams(deviations) -> None:  # type: ignore[no-untyped-def]
    """Before: failed (compared with the mean)."""
    result = _results(deviations.make_learned_reduce,
                      ["conventions.reduce_scale"], "ci")["conventions.reduce_scale"]
    assert result.status == rp.PASSED, result.message
    assert result.achieved is not None and "projection on the streams" in result.achieved["label"]


def test_a_learned_reduce_that_is_not_a_combination_of_streams_fails(deviations) -> None:  # type: ignore[no-untyped-def]
    class Squares(deviations.StandIn):  # type: ignore[misc,name-defined]
        def reduce(self, x):  # type: ignore[no-untyped-def]
            return (x * x).sum(-2)

    def make(n, d, *, layer_index=0, dtype=None, device="cpu", seed=0):  # type: ignore[no-untyped-def]
        import torch

        from hcspec.conformance.protocol import Conventions
        return Squares(n, d, 2.0, Conventions(reduce="learned")).to(dtype or torch.float64)

    result = _results(make, ["conventions.reduce_scale"], "quick")["conventions.reduce_scale"]
    assert result.status == rp.FAILED, result.message


def test_declared_h_pre_eps_shifts_the_range(deviations) -> None:  # type: ignore[no-untyped-def]
    """σ(20) + 1e-6 declared h_pre_eps: before, failed ('outside [0, 1]')."""
    result = _results(deviations.make_pre_sigma_plus_eps,
                      ["constraints.h_pre_range"], "ci")["constraints.h_pre_range"]
    assert result.status == rp.PASSED, result.message
    assert result.achieved is not None and "[1e-06, 1.000001]" in result.achieved["label"]


@pytest.mark.slow
@pytest.mark.parametrize("target", [
    "reference:mhc", standins.make_copy_first_stream, standins.make_identity_declared,
    standins.make_constant_one_hot_post])
def test_no_property_of_the_registry_passes_with_an_infinite_tolerance(target: object) -> None:
    """The meta-test over the whole registry: on targets whose H_res has zeros (infinite
    Birkhoff–Hopf bound) and on the reference, every passed row has a finite tolerance."""
    report = check_implementation(target, profile="quick", device="cpu")  # type: ignore[arg-type]
    assert report.results
    for result in report.results:
        if result.status in (rp.PASSED, rp.XPASS) and result.achieved is not None:
            assert math.isfinite(result.achieved["tolerance"]), (result.id, result.achieved)
