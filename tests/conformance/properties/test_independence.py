"""Independence family: no mixing across batch elements or tokens."""

from __future__ import annotations

import pytest

from hcspec.conformance.properties import PropertyFailure
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
