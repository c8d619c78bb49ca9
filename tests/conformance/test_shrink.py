"""Greedy shrinking of failures found by the explicit examples: the printed counterexample is
the smallest case that still fails the same way, it says what it was shrunk from, and its
reproduction command reproduces the failure."""

from __future__ import annotations

import shlex

import pytest

from hcspec.conformance import cli
from hcspec.conformance.families import BY_ID
from hcspec.conformance.machinery.base import Context, PropertyFailure
from hcspec.conformance.machinery.declaration import Property
from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.profiles import get_profile
from hcspec.conformance.protocol import Conventions
from hcspec.conformance.run import shrink
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.strategies import Case
from tests.conformance.helpers import make_linear


def _ctx(seed: int = 0) -> Context:
    return Context(factory=make_linear, target_name="t", kind="hc-static",
                   conventions=Conventions(), capabilities=frozenset(), dtype=None,  # type: ignore[arg-type]
                   device="cpu", profile=get_profile("ci"), seed=seed)


def _prop(check) -> Property:  # type: ignore[no-untyped-def]
    return Property(id="law.synthetic", statement="s", check=check,
                    custom_examples=lambda ctx: [])


def _raised(check, case: Case) -> BaseException:  # type: ignore[no-untyped-def]
    """What ``check`` raises on ``case`` (with its traceback, as the runner hands it over)."""
    try:
        check(_ctx(), case)
    except Exception as exc:
        return exc
    raise AssertionError("the check passed")


class _Labelled(PropertyFailure):
    """A PropertyFailure with the structured attributes the properties give it."""

    def __init__(self, label: str, error: float) -> None:
        super().__init__(f"{label}: error {error:.3g} > tolerance 1e-11")
        self.label, self.error, self.tolerance = label, error, 1e-11


def test_signature_is_the_type_and_the_label_not_the_numbers() -> None:
    c = _Labelled("X' vs the law", 0.476)
    d = _Labelled("X' vs the law", 1.5e-3)
    e = _Labelled("branch input vs h_preᵀX", 0.476)
    assert shrink.signature(c) == shrink.signature(d) != shrink.signature(e)
    assert shrink.signature(c) == ("_Labelled", "label X' vs the law")
    assert shrink.signature(PropertyFailure.numeric("X' vs the law", 3.0, 1.0)) == (
        "PropertyFailure", "label X' vs the law")

    class Plain(AssertionError):  # no attributes: its origin, the text is not parsed
        pass

    assert shrink.signature(Plain("X' vs the law: error 3 > tolerance 1")) == ("Plain", "origin ")
    assert shrink.signature(c) != shrink.signature(ValueError(str(c)))


def test_unlabelled_failures_are_told_apart_by_their_origin() -> None:
    def check(ctx: Context, case: Case) -> None:
        if case.n == 4:
            raise PropertyFailure(f"streams came out as {list(range(case.n))}")
        raise PropertyFailure(f"streams came out as {list(range(case.n))}")  # another line

    four, two = _raised(check, Case(n=4)), _raised(check, Case(n=2))
    three = _raised(check, Case(n=3))
    assert shrink.signature(two) == shrink.signature(three) != shrink.signature(four)
    assert shrink.signature(four)[1].startswith("origin tests.conformance.test_shrink:check:")


def test_a_case_failing_everywhere_shrinks_to_the_simplest_one() -> None:
    def check(ctx: Context, case: Case) -> None:
        raise PropertyFailure(f"always, n={case.n}")

    start = Case(3, 4, 4, 8, layer_index=5, seed=11, scale=10.0, perturb=1.0,
                 param_scale=100.0, branch="mlp")
    got = shrink.shrink(_prop(check), _ctx(seed=7), start, _raised(check, start))
    assert got.case == Case(1, 1, 1, 1, layer_index=0, seed=7, scale=1.0, perturb=0.0,
                            param_scale=1.0, branch="zero")
    assert 0 < got.runs <= shrink.MAX_RUNS and str(got.error) == "always, n=1"


def test_only_candidates_that_fail_the_same_way_are_kept() -> None:
    def check(ctx: Context, case: Case) -> None:
        if case.batch == 1:
            raise PropertyFailure("another failure")
        if case.tokens == 1:
            raise RuntimeError("n too large")  # another type
        if case.n >= 3 and case.d > case.n:
            raise PropertyFailure("n too large")

    start = Case(2, 3, 4, 8)
    got = shrink.shrink(_prop(check), _ctx(), start, _raised(check, start))
    assert (got.case.batch, got.case.tokens, got.case.n, got.case.d) == (2, 3, 3, 4)


def test_the_number_of_reruns_is_bounded() -> None:
    calls: list[Case] = []

    def check(ctx: Context, case: Case) -> None:
        calls.append(case)

    got = shrink.shrink(_prop(check), _ctx(), Case(), PropertyFailure("x"), max_runs=3)
    assert got.runs == len(calls) == 3 and got.case == Case()


def test_the_reruns_leave_the_recorded_curves_as_they_were() -> None:
    """Curves recorded by the re-runs (other cases) do not reach the report's plot."""
    def check(ctx: Context, case: Case) -> None:
        ctx.record.curve("q", f"n={case.n}", [1.0, float(case.n)])
        raise PropertyFailure("always")

    ctx, start = _ctx(), Case(2, 3, 4, 8)
    ctx.record.curve("q", "n=4", [1.0, 4.0])
    got = shrink.shrink(_prop(check), ctx, start, PropertyFailure("always"))
    assert got.runs > 0 and ctx.record.series == {"q": {"n=4": [1.0, 4.0]}}


def test_explicit_example_failure_is_shrunk_and_its_reproduction_reproduces(
        capsys: pytest.CaptureFixture[str]) -> None:
    report = check_implementation("tests.mutants.h_res_transposed:make", profile="ci",
                                  device="cpu", only=["law.reported"])
    result = next(r for r in report.results if r.id == "law.reported")
    assert result.status == rp.FAILED
    shrunk = Case.from_json(result.counterexample or "")
    original = Case.from_json(result.shrunk_from or "")
    assert original in BY_ID["law.reported"].examples(_ctx())  # an explicit example
    assert (shrunk.batch, shrunk.tokens, shrunk.n, shrunk.layer_index) == (1, 1, 2, 0)
    assert shrunk.d < original.d and 0 < result.shrink_runs <= shrink.MAX_RUNS
    assert result.reproduce and result.counterexample in shlex.split(result.reproduce)
    code = cli.main([*shlex.split(result.reproduce)[1:], "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1 and "FAILED law.reported" in out
    assert result.message in out  # the same failure, the same measured error
    assert "shrunk from" not in out  # a replayed case is reported as given


def test_terminal_and_markdown_say_what_the_case_was_shrunk_from() -> None:
    from rich.console import Console

    from hcspec.conformance.outputs import terminal

    report = check_implementation("tests.mutants.h_res_transposed:make", profile="ci",
                                  device="cpu", only=["law.reported"])
    result = next(r for r in report.results if r.id == "law.reported")
    console = Console(record=True, width=400)
    terminal.print_details(console, report)
    text = console.export_text()
    assert f"shrunk from: the explicit example {result.shrunk_from} in" in text
    assert (f"shrunk from: the explicit example {result.shrunk_from} in"
            in md.to_markdown(report))
    # the figures shown are the printed counterexample's: the message and the error column
    assert result.failure is not None and result.achieved is not None
    assert result.achieved["error"] == result.failure.error
    assert f"error {result.failure.error:.3g} > allowance" in result.message
    # the shrunk-from line shows the explicit example's error, allowance, rule and floor too
    figures = result.failure.shrunk_from_figures
    assert figures.startswith("error ") and " > allowance " in figures
    assert "[rule law: floor " in figures and "× floor]" in figures
    assert f"where it fails with {figures}" in text
    assert result.examples >= 1
