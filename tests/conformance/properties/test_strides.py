"""Strides family: a non-contiguous view of the state gives its contiguous copy's output."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hcspec.conformance.families import strides
from hcspec.conformance.machinery.base import PropertyFailure
from hcspec.conformance.protocol import Conventions
from tests.conformance.properties.support import run, unmet


@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-static",
                                    "reference:mhc-fast"])
def test_reference_passes(target: str) -> None:
    run("strides.non_contiguous", target)


def test_every_view_is_non_contiguous_and_equal_to_the_state() -> None:
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    for _, make_view in strides.VIEWS:
        view = make_view(x)
        assert not view.is_contiguous() and view.shape == x.shape
    assert torch.equal(strides.VIEWS[0][1](x), x)
    assert torch.equal(strides.VIEWS[2][1](x), x)


def test_a_view_in_place_of_reshape_fails_with_the_exception() -> None:
    with pytest.raises(PropertyFailure, match=r"forward raised RuntimeError on a non-contiguous "
                                              r"state.*strides \["):
        run("strides.non_contiguous", "mutant:view_rejects_strided")


def test_a_kernel_assuming_contiguous_strides_fails() -> None:
    with pytest.raises(PropertyFailure, match="vs X' of its contiguous copy"):
        run("strides.non_contiguous", "mutant:assumes_contiguous_strides")


def test_declared_contiguous_input_is_not_applicable_with_the_reason() -> None:
    declared = dataclasses.replace(Conventions(), contiguous_input=True)
    assert "declares contiguous_input=True" in str(
        unmet("strides.non_contiguous", conventions=declared))
    assert unmet("strides.non_contiguous") is None
