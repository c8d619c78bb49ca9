"""Every property that compares with an oracle reaches the profile's spread of sizes
(``Profile.oracle_max_n``, ``ragged_d``, ``size_rows``), within the target's declared sizes,
unless it states why not (``Cases.narrower``)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, find, settings

from hcspec.conformance.families import CATALOGUE
from hcspec.conformance.machinery.cases import oracle_n_values
from hcspec.conformance.profiles import PROFILES
from tests.conformance.properties.support import context

ORACLE_FAMILIES = ("published", "law", "exact", "gradients")
ORACLE_PROPERTIES = [p for p in CATALOGUE if p.family in ORACLE_FAMILIES]
TARGETS = {"published": "hcspec.reference.targets:deepseek_v4", "law": "reference:mhc",
           "exact": "reference:mhc", "gradients": "reference:mhc"}


def test_every_oracle_property_draws_the_profile_sizes_or_says_why() -> None:
    assert len(ORACLE_PROPERTIES) >= 15
    narrow = [p.id for p in ORACLE_PROPERTIES if not (p.cases.oracle or p.cases.narrower)]
    assert narrow == [], f"narrower than the profile's sizes without a stated reason: {narrow}"


@pytest.mark.parametrize("prop", ORACLE_PROPERTIES, ids=lambda p: p.id)
def test_examples_and_strategy_reach_the_largest_size(prop) -> None:  # type: ignore[no-untyped-def]
    if prop.cases.narrower:
        pytest.skip(prop.cases.narrower)
    target = TARGETS[prop.family]
    if prop.id == "law.permutation_mixing":
        target = "reference:hc-dynamic"
    ctx = context(target, "ci")
    top = max(n for n, _ in ctx.profile.size_rows)
    examples = list(prop.examples(ctx))
    assert max(c.n for c in examples) == top, [c.n for c in examples]
    if not prop.explore:
        return
    strategy = prop.strategy(ctx)
    quiet = settings(database=None, max_examples=2000, suppress_health_check=list(HealthCheck))
    assert find(strategy, lambda c: c.n == ctx.profile.oracle_max_n, settings=quiet).n == 8
    ragged = max(ctx.profile.ragged_d)
    assert find(strategy, lambda c: c.d >= ragged, settings=quiet).d >= ragged


def test_declared_rates_narrow_the_draws_and_the_rows() -> None:
    ctx = context("reference:mhc", "ci")
    ctx.conventions = dataclasses.replace(ctx.conventions, supported_expansion_rates=(2, 4, 8))
    assert oracle_n_values(ctx) == (2, 4, 8)
    examples = list(next(p for p in CATALOGUE if p.id == "law.reported").examples(ctx))
    assert {c.n for c in examples} >= {8} and 5 not in {c.n for c in examples}


def test_profiles_reach_n_8_with_ragged_d() -> None:
    for profile in PROFILES.values():
        assert profile.oracle_max_n >= 8 and max(n for n, _ in profile.size_rows) == 8
        assert any(d % 8 for d in profile.ragged_d)
