"""Declared-conventions family: what an adapter declares holds."""

from __future__ import annotations

import pytest

from hcspec.conformance.properties import PropertyFailure
from tests.conformance.properties.support import run, unmet


def test_reference_passes() -> None:
    for pid in ("conventions.declaration", "conventions.branch_input",
                "conventions.expand_replicates", "conventions.reduce_scale"):
        run(pid, "reference:mhc")


def test_reduce_that_sums_while_declaring_mean_fails() -> None:
    with pytest.raises(PropertyFailure, match="declared mean"):
        run("conventions.reduce_scale", "mutant:reduce_sum_declared_mean")


def test_expand_and_reduce_need_their_capability() -> None:
    assert unmet("conventions.expand_replicates", capabilities=frozenset()) is not None
    assert unmet("conventions.reduce_scale", capabilities=frozenset({"expand"})) is not None
