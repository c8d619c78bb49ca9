"""Constraints family (mHC): doubly stochastic H_res, the H_pre/H_post ranges."""

from __future__ import annotations

import pytest

from hcspec.conformance.properties import PropertyFailure
from hcspec.conformance.protocol import Conventions
from tests.conformance.properties.support import run, unmet


def test_reference_passes() -> None:
    for pid in ("constraints.h_res_nonnegative", "constraints.h_res_exact_axis",
                "constraints.h_res_other_axis", "constraints.h_pre_range",
                "constraints.h_post_range", "constraints.stream_sum_preserved",
                "constraints.nonexpansive"):
        run(pid, "reference:mhc")


def test_sinkhorn_ending_on_columns_fails_the_exact_rows() -> None:
    with pytest.raises(PropertyFailure, match="row sum − 1"):
        run("constraints.h_res_exact_axis", "mutant:sinkhorn_columns_only")


def test_unbounded_h_post_leaves_its_range() -> None:
    with pytest.raises(PropertyFailure, match=r"H_post distance outside \[0, 2\]"):
        run("constraints.h_post_range", "mutant:h_post_unbounded", example=1, perturb=3.0)


def test_constraints_apply_to_mhc_and_need_readable_weights() -> None:
    assert unmet("constraints.nonexpansive", kind="hc-dynamic") == (
        "applies to mhc; the target's kind is hc-dynamic")
    hidden = unmet("constraints.nonexpansive", capabilities=frozenset(),
                   conventions=Conventions(state_domain="replicated"))
    assert hidden is not None and "weights(x)" in hidden
    assert unmet("constraints.nonexpansive", capabilities=frozenset()) is None  # probed
