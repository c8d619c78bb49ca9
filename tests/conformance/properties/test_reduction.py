"""Reduction family: n = 1 pre-norm, the HC init, the pre-norm stack."""

from __future__ import annotations

import pytest

from hcspec.conformance.machinery.base import PropertyFailure
from tests.conformance.properties.support import run, unmet


def test_reference_passes() -> None:
    for pid in ("reduction.n1_prenorm_forward", "reduction.n1_prenorm_backward",
                "reduction.static_init", "reduction.init_prenorm_stack"):
        run(pid, "reference:hc-static")
    run("reduction.mhc_n1_residual", "reference:mhc")


def test_an_all_ones_init_is_not_the_hc_init() -> None:
    with pytest.raises(PropertyFailure, match="static init: probed"):
        run("reduction.static_init", "mutant:static_init_ones")


def test_the_family_is_named_reduction_like_its_ids() -> None:
    assert unmet("reduction.static_init", kind="hc-static") is None
    assert unmet("reduction.static_init") == ("applies to hc-static; the target's kind is mhc")
