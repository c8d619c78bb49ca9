"""One :class:`Cases` declaration drives a property's explicit examples, its hypothesis
strategy and its domain (``admits``): whatever the examples and the strategy produce lies in
the domain the shrinker keeps to."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcspec.conformance import strategies
from hcspec.conformance.machinery.cases import Cases
from hcspec.conformance.strategies import Case
from tests.conformance.properties.support import context

CTX = context("reference:mhc", "ci")
DECLARED = (Cases(), Cases(d_more_than_n=True), Cases(min_n=2, min_batch=2, at_init=True),
            Cases(d_more_than_n=True, perturbations=(0.3, 1.0), branch="linear",
                  branches=("linear",), min_tokens=2, param_scales=(10.0, 100.0)))


def test_case_lives_with_the_strategies_that_draw_it() -> None:
    assert strategies.Case is Case
    assert Case.__module__ == "hcspec.conformance.strategies"
    assert not hasattr(strategies, "__getattr__")  # no lazy re-export hiding an import loop


def test_the_standard_examples_follow_the_declared_bounds() -> None:
    shapes = [c.shape for c in Cases().examples(CTX)]
    assert shapes == [(2, 3, 4, 8), (2, 3, 4, 8), (3, 2, 2, 5), (1, 4, 3, 7), (2, 1, 1, 3),
                      (1, 1, 2, 1)]
    probed = Cases(d_more_than_n=True, min_batch=2, branch="linear").examples(CTX)
    assert [c.shape for c in probed] == [(2, 3, 4, 8), (2, 3, 4, 8), (3, 2, 2, 5), (2, 4, 3, 7),
                                         (2, 1, 1, 3)]
    assert {c.branch for c in probed} == {"linear"}
    assert [c.perturb for c in Cases(at_init=True).examples(CTX)] == [0.0] * 6
    assert [c.seed for c in Cases().examples(CTX)] == [CTX.seed + k for k in range(6)]


def test_every_example_lies_in_its_declarations_domain() -> None:
    # perturbations and param_scales bound what hypothesis draws; the explicit examples keep
    # their own perturbations (DECLARED[3] declares both)
    for cases in DECLARED[:3]:
        assert [cases.admits(c) for c in cases.examples(CTX)] == [None] * len(
            cases.examples(CTX))
    assert Cases(d_more_than_n=True).admits(Case(1, 1, 2, 1)) == (
        "d = 1 ≤ n = 2 (the property needs d > n)")


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_drawn_case_lies_in_its_declarations_domain(data: st.DataObject) -> None:
    cases = data.draw(st.sampled_from(DECLARED))
    case = data.draw(cases.strategy(CTX))
    assert cases.admits(case) is None
