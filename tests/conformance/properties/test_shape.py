"""Shape family: the branch is called once with [B, T, d], optional methods return their
shapes."""

from __future__ import annotations

import pytest

from hcspec.conformance import rules
from hcspec.conformance.machinery.base import PropertyFailure
from hcspec.conformance.protocol import WEIGHTS
from tests.conformance.properties.support import run, unmet


def test_reference_passes_on_the_canonical_case() -> None:
    for pid in ("shape.output", "shape.branch_once", "shape.weights", "shape.expand",
                "shape.reduce", "shape.other_sequence_axes"):
        run(pid, "reference:hc-static")


def test_a_branch_called_per_stream_fails_with_the_count() -> None:
    with pytest.raises(PropertyFailure, match="called 4 times in one forward, expected once"):
        run("shape.branch_once", "mutant:branch_per_stream")


def test_weights_needs_the_capability() -> None:
    message = unmet("shape.weights", capabilities=frozenset({"expand"}))
    assert message is not None and f"capability {WEIGHTS}" in message
    assert unmet("shape.weights") is None


def test_a_failure_names_its_origin_whatever_its_figures() -> None:
    from hcspec.conformance.machinery.recording import Recorder

    def check(calls: int) -> PropertyFailure:
        try:
            Recorder().require(calls == 1, f"the branch was called {calls} times")
        except PropertyFailure as failure:
            return failure
        raise AssertionError("require did not fail")

    a, b = check(2), check(4)
    assert a.label != b.label and a.origin == b.origin
    assert a.origin.startswith(f"{__name__}:check:")
    expect = Recorder(declared=(rules.DEPTH_BOUND,))
    with pytest.raises(PropertyFailure) as caught:
        expect.expect("X' vs law", 0.5, detail="detail", hint="transposed?", bound=1e-6)
    f = caught.value
    assert (f.label, f.error, f.tolerance, f.detail, f.hint) == (
        "X' vs law", 0.5, 1e-6, "detail", "transposed?")
    assert expect.worst.label == "X' vs law" and expect.worst.ratio == 0.5 / 1e-6
