"""Law family: X' = H_res X + h_post F(h_preᵀX)ᵀ with reported and probed weights."""

from __future__ import annotations

import pytest

from hcspec.conformance.properties import PropertyFailure
from hcspec.conformance.protocol import Conventions
from tests.conformance.properties.support import run, unmet


def test_reference_passes_reported_and_probed() -> None:
    ctx = run("law.reported", "reference:mhc")
    assert 0 <= ctx.worst.error <= ctx.worst.tolerance and ctx.worst.label
    run("law.probed", "reference:mhc")


def test_transposed_h_res_fails_the_reported_law_with_the_figures() -> None:
    with pytest.raises(PropertyFailure) as caught:
        run("law.reported", "mutant:h_res_transposed", example=1)  # perturbed: H_res ≠ H_resᵀ
    failure = caught.value
    assert failure.label.startswith("X' vs H_res X")
    assert failure.error is not None and failure.tolerance is not None
    assert failure.error > 1e3 * failure.tolerance


def test_probing_is_not_applicable_on_replicated_states() -> None:
    replicated = Conventions(state_domain="replicated")
    message = unmet("law.probed", conventions=replicated)
    assert message is not None and "full-row-rank" in message and "replicated" in message
    assert unmet("law.reported", conventions=replicated) is None


def test_permutation_mixing_applies_to_hc_only() -> None:
    assert unmet("law.permutation_mixing") == (
        "applies to hc-dynamic, hc-static; the target's kind is mhc")
    assert unmet("law.permutation_mixing", kind="hc-static") is None
