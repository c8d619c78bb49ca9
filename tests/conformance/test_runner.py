"""check_implementation: statuses, blocking, errors, expected failures, interrupts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hcspec.conformance.adapters.reference import make_hc_static
from hcspec.conformance.families import SelectionError
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.subjects.targets import TargetError
from tests.conformance.helpers import LinearHC, make_linear, make_overwrites_input


def statuses(report: rp.Report) -> dict[str, str]:
    return {r.id: r.status for r in report.results}


def test_a_minimal_impl_passes_what_applies_and_the_rest_is_not_applicable() -> None:
    report = check_implementation(make_linear, profile="quick", device="cpu",
                                  only=["shape", "law", "state", "reduction.static_init"])
    got = statuses(report)
    assert got["law.probed"] == rp.PASSED and got["law.reported"] == rp.PASSED
    assert got["shape.expand"] == rp.NOT_APPLICABLE
    assert got["state.parameters_unchanged"] == rp.NOT_APPLICABLE
    static_init = next(r for r in report.results if r.id == "reduction.static_init")
    assert static_init.status == rp.FAILED  # random weights are not the HC Eq. 14 init
    assert "e_0" in static_init.message or "vs" in static_init.message


def test_wrong_output_shape_fails_shape_and_blocks_the_rest() -> None:
    def make(n, d, **kw):  # type: ignore[no-untyped-def]
        impl = make_linear(n, d, **kw)

        class Truncated(LinearHC):
            def forward(self, x, branch):  # type: ignore[no-untyped-def]
                return super().forward(x, branch)[:, :, :1]

        return Truncated(impl.h_pre, impl.h_post, impl.H_res, d)

    report = check_implementation(make, profile="quick", device="cpu")
    got = statuses(report)
    shape = next(r for r in report.results if r.id == "shape.output")
    assert shape.status == rp.FAILED
    assert "expected tensor [2, 3, 4, 8]" in shape.message and "[2, 3, 1, 8]" in shape.message
    assert got["law.probed"] == rp.BLOCKED and got["gradients.fd_input"] == rp.BLOCKED
    blocked = next(r for r in report.results if r.id == "law.probed")
    assert "shape.output failed" in blocked.message
    assert len(report.results) == len(statuses(report)) >= 35  # every property still reports
    # what cannot apply to a static HC is not applicable (with the reason), never blocked,
    # and does not count against its family's score
    from hcspec.conformance.families import CATALOGUE

    mhc_only = [r for r in report.results if r.family == "constraints"]
    assert len(mhc_only) == sum(p.id.startswith("constraints.") for p in CATALOGUE) >= 9
    for r in mhc_only:
        assert r.status == rp.NOT_APPLICABLE and r.message.startswith("applies to mhc"), r
    assert got["shape.expand"] == rp.NOT_APPLICABLE  # a missing capability: same rule
    assert report.family_scores()["constraints"]["checked"] == 0
    assert report.family_scores()["law"]["checked"] == 4  # law.permutation_mixing needs params


def test_factory_that_raises_is_a_failure_not_a_silent_skip() -> None:
    def make(n, d, **kw):  # type: ignore[no-untyped-def]
        raise RuntimeError("no GPU kernels here")

    report = check_implementation(make, profile="quick", device="cpu")
    shape = next(r for r in report.results if r.id == "shape.output")
    assert shape.status == rp.FAILED and "no GPU kernels here" in shape.message
    assert not report.ok


def test_unexpected_exception_is_an_error_with_traceback_and_the_run_goes_on() -> None:
    def make(n, d, **kw):  # type: ignore[no-untyped-def]
        impl = make_linear(n, d, **kw)

        def weights(x):  # type: ignore[no-untyped-def]
            raise RuntimeError("weights exploded")

        impl.weights = weights  # type: ignore[method-assign]
        return impl

    report = check_implementation(make, profile="quick", device="cpu", only=["shape", "law"])
    weights = next(r for r in report.results if r.id == "shape.weights")
    assert weights.status == rp.ERROR
    assert weights.traceback and "weights exploded" in weights.traceback
    assert statuses(report)["law.probed"] == rp.PASSED
    assert statuses(report)["law.reported"] == rp.BLOCKED


def test_expected_failures_become_xfail_and_unexpected_passes_xpass() -> None:
    report = check_implementation(
        make_linear, profile="quick", device="cpu", only=["reduction.static_init", "law.probed"],
        expected_failures={"reduction.static_init": "random weights",
                           "law.probed": "thought broken"})
    got = statuses(report)
    assert got["reduction.static_init"] == rp.XFAIL
    assert got["law.probed"] == rp.XPASS
    assert not report.ok  # an xpass fails the run
    with pytest.raises(ValueError, match="unknown property ids"):
        check_implementation(make_linear, expected_failures={"no.such": "x"})


def test_interrupt_returns_the_partial_report() -> None:
    calls = {"n": 0}

    def make(n, d, **kw):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] > 25:
            raise KeyboardInterrupt
        return make_hc_static(n, d, **kw)

    report = check_implementation(make, profile="quick", device="cpu")
    assert report.interrupted and report.results and report.not_run
    assert not report.ok
    assert report.to_dict()["interrupted"] is True


def test_each_case_gets_a_fresh_impl() -> None:
    built: list[object] = []

    def make(n, d, **kw):  # type: ignore[no-untyped-def]
        impl = make_hc_static(n, d, **kw)
        built.append(impl)
        return impl

    report = check_implementation(make, profile="quick", device="cpu",
                                  only=["state.parameters_unchanged"])
    checked = sum(r.examples for r in report.results)
    assert len({id(b) for b in built}) == len(built) >= checked


def test_selection_and_target_errors() -> None:
    with pytest.raises(SelectionError, match=r"unknown property id or family 'law\.nope'"):
        check_implementation("reference:hc-static", only=["law.nope"])
    with pytest.raises(TargetError, match=r"there is no module 'no_such_package_xyz'"):
        check_implementation("no_such_package_xyz:make")
    with pytest.raises(TargetError, match="no target selected"):
        check_implementation(None)
    with pytest.raises(TargetError, match="known: reference:hc-dynamic"):
        check_implementation("reference:hc-nope")


def test_replaying_one_case() -> None:
    from hcspec.conformance.strategies import Case

    report = check_implementation("reference:hc-static", device="cpu", only=["law.probed"],
                                  case=Case(1, 2, 3, 5, seed=4, perturb=0.3))
    law = next(r for r in report.results if r.id == "law.probed")
    assert law.status == rp.PASSED and law.examples == 1


@pytest.mark.parametrize("form", ["json", "dict"])
def test_replaying_the_case_a_reproduce_line_prints(form: str) -> None:
    """Before: ``AttributeError: 'str' object has no attribute 'to_json'``."""
    from hcspec.conformance.strategies import Case

    case = Case(1, 2, 3, 5, seed=4, perturb=0.3)
    given = case.to_json() if form == "json" else dict(case.__dict__)
    report = check_implementation("reference:hc-static", device="cpu", only=["law.probed"],
                                  case=given)  # type: ignore[arg-type]
    law = next(r for r in report.results if r.id == "law.probed")
    assert law.status == rp.PASSED and law.examples == 1 and report.case == case.to_json()


@pytest.mark.parametrize(("bad", "error", "match"), [
    (3, TypeError, r"case: got int; expected a hcspec.conformance.strategies.Case, its JSON"),
    ("n=3", ValueError, r"expected a JSON object"),
    ({"n": 3, "width": 4}, ValueError, r"unknown fields \['width'\]"),
    ({"n": 0}, ValueError, r"Case.n: expected a positive int"),
])
def test_a_bad_case_gets_a_one_line_error(bad: object, error: type[Exception],
                                          match: str) -> None:
    with pytest.raises(error, match=match) as info:
        check_implementation("reference:hc-static", device="cpu", only=["law.probed"],
                             case=bad)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_report_json_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    report = check_implementation("reference:hc-static", profile="quick", device="cpu",
                                  only=["shape"])
    path = tmp_path / "r.json"
    report.write_json(path)
    back = rp.Report.read_json(path)
    assert back.summary == report.summary and back.target == "reference:hc-static"
    data = report.to_dict()
    for key in ("target", "kit_version", "profile", "seed", "device", "results", "summary"):
        assert key in data
    assert set(data["results"][0]) >= {"id", "status", "examples", "seconds", "message"}
    assert data["summary"]["passed"] == 6 and torch.__version__ in data["versions"]["torch"]


def test_an_input_overwriting_forward_is_diagnosed_by_input_unchanged_alone() -> None:
    """The kit hands forward a copy of its state, so overwriting the input cannot corrupt
    the state its expectations are computed from: no law/independence/reduction failure with
    a message pointing elsewhere, only state.input_unchanged."""
    report = check_implementation(make_overwrites_input, profile="quick", device="cpu",
                                  skip=["compile", "dtype"])
    failed = {r.id: r.message for r in report.results if r.status != rp.PASSED
              and r.status != rp.NOT_APPLICABLE}
    assert list(failed) == ["state.input_unchanged"], failed
    assert "forward modified its input in place" in failed["state.input_unchanged"]
    assert statuses(report)["law.reported"] == rp.PASSED
    assert statuses(report)["state.deterministic_eval"] == rp.PASSED


def test_inconclusive_cases_are_not_counted_and_none_conclusive_is_not_a_pass() -> None:
    from hcspec.conformance.machinery.base import Context, Inconclusive
    from hcspec.conformance.machinery.declaration import Property
    from hcspec.conformance.profiles import get_profile
    from hcspec.conformance.protocol import Conventions
    from hcspec.conformance.run.execution import run_property
    from hcspec.conformance.strategies import Case

    def check(ctx: Context, case: Case) -> None:
        if case.seed % 2:
            raise Inconclusive(f"seed {case.seed} shows nothing")

    def prop(seeds: list[int]) -> Property:
        return Property(id="law.synthetic", statement="s", check=check,
                        custom_examples=lambda ctx: [Case(seed=s) for s in seeds], explore=False)

    def ctx() -> Context:
        return Context(factory=make_linear, target_name="t", kind="hc-static",
                       conventions=Conventions(), capabilities=frozenset(),
                       dtype=torch.float64, device="cpu", profile=get_profile("ci"))

    mixed, checked = run_property(prop([0, 1, 2, 3]), ctx())
    assert (mixed.status, checked) == (rp.PASSED, 2)
    assert mixed.note == "2 inconclusive cases not counted, e.g. seed 1 shows nothing"
    none, checked = run_property(prop([1, 3]), ctx())
    assert (none.status, checked) == (rp.NOT_APPLICABLE, 0)
    assert none.note == ("not demonstrated: none of the 2 cases was conclusive, e.g. seed 1 "
                            "shows nothing")


def test_ignored_dtype_hint_spares_parameters_in_the_declared_compute_dtype() -> None:
    """Float32 parameters asked for float64 are 'ignoring dtype' unless the impl declares
    compute_dtype=float32 (as a float32-inside kernel reference does)."""
    from torch import nn

    from hcspec.conformance.run.inspection import _ignored_dtype

    impl = nn.Linear(2, 2)  # float32 parameters
    hint = _ignored_dtype(impl, torch.float64)
    assert hint is not None and "parameters are float32 but float64 was requested" in hint
    assert _ignored_dtype(impl, torch.float64, torch.float32) is None
    assert _ignored_dtype(impl, torch.float32) is None
    assert _ignored_dtype(impl.double(), torch.float64, torch.float32) is None


def test_the_depth_curves_reach_the_report_and_its_json(tmp_path: Path) -> None:
    """``PropertyResult.series``: the depth family's curves, one per explicit example."""
    from hcspec.conformance.families.depth import GROWTH

    report = check_implementation("reference:hc-static", profile="quick", device="cpu",
                                  only=["depth.hc_growth"])
    result = next(r for r in report.results if r.id == "depth.hc_growth")
    curves = result.series[GROWTH]
    assert len(curves) == 2 and all(len(v) == 17 and v[0] == 1.0 for v in curves.values())
    assert max(v[-1] for v in curves.values()) == pytest.approx(result.achieved["error"])
    report.write_json(tmp_path / "r.json")
    back = rp.Report.read_json(tmp_path / "r.json")
    assert next(r for r in back.results if r.id == "depth.hc_growth").series == result.series
    assert next(r for r in back.results if r.id == "shape.output").series == {}
