"""The gated family and the per-stream requirement: a property that reads per-stream weights is
not applicable to an element-wise read (with its reason), the gated family only to one, and a
gated failure names the variant the target matches."""

from __future__ import annotations

import pytest

from hcspec.conformance.families import CATALOGUE
from hcspec.conformance.machinery.requirements import (
    ELEMENTWISE_READ,
    PER_STREAM_READ,
    PROBING,
    WEIGHTS_OR_PROBING,
)
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.protocol import WEIGHTS
from hcspec.conformance.run.session import check_implementation


def test_every_property_reading_per_stream_weights_requires_the_per_stream_read() -> None:
    for prop in CATALOGUE:
        reads = any(r.capability == WEIGHTS or r in (PROBING, WEIGHTS_OR_PROBING)
                    for r in prop.requires)
        if reads:
            assert prop.requires[0] is PER_STREAM_READ, prop.id
        if prop.family == "gated":
            assert ELEMENTWISE_READ in prop.requires and PER_STREAM_READ not in prop.requires
    gated = {p.id for p in CATALOGUE if p.family == "gated"}
    assert gated == {"gated.unmixed", "gated.law", "gated.read", "gated.write", "gated.ranges"}


def test_a_gated_target_is_not_applicable_to_per_stream_properties_with_the_reason() -> None:
    report = check_implementation("reference:qwen4-exp", profile="quick", device="cpu",
                                  only=["law.reported", "law.probed", "gated.unmixed"])
    by_id = {r.id: r for r in report.results}
    for pid in ("law.reported", "law.probed"):
        assert by_id[pid].status == rp.NOT_APPLICABLE
        assert "read that is not per-stream" in by_id[pid].message
    assert by_id["gated.unmixed"].status == rp.PASSED


@pytest.mark.parametrize(("mutant", "pid", "named"), [
    ("gated_sum_streams", "gated.read", "the sum over the streams instead of the mean"),
    ("gated_gate_after_mean", "gated.read", "the gate applied after the mean"),
    ("gated_post_sigma", "gated.write", "σ instead of 2σ in the write"),
    ("gated_inject_no_n", "gated.write", "the /n dropped in the inject"),
])
def test_a_gated_failure_names_the_variant(mutant: str, pid: str, named: str) -> None:
    report = check_implementation(f"tests.mutants.{mutant}:make", profile="quick", device="cpu",
                                  only=[pid])
    result = next(r for r in report.results if r.id == pid)
    assert result.status == rp.FAILED
    assert named in result.message
