"""Independence family: no mixing across batch elements or tokens."""

from __future__ import annotations

import pytest

from hcspec.conformance.machinery.base import PropertyFailure
from tests.conformance.properties.support import run


def test_reference_passes() -> None:
    run("independence.batch", "reference:hc-dynamic")
    run("independence.token", "reference:hc-dynamic")


def test_streams_folded_in_the_wrong_order_mix_batch_elements() -> None:
    with pytest.raises(PropertyFailure, match="batch element"):
        run("independence.batch", "mutant:folded_wrong_order")


def test_sinkhorn_over_tokens_mixes_tokens() -> None:
    with pytest.raises(PropertyFailure, match="token"):
        run("independence.token", "mutant:sinkhorn_mixes_tokens")


def test_a_bug_in_the_last_token_of_an_odd_sequence_is_found() -> None:
    """The canonical case (T = 3, seed 0) kept token 0 only before; every token now."""
    with pytest.raises(PropertyFailure, match="token 2"):
        run("independence.token", "mutant:odd_tail_token")


def test_every_batch_element_is_compared() -> None:
    ctx = run("independence.batch", "reference:mhc", example=1)
    assert ctx.worst.label.startswith("output of batch element")
