"""Exact family: one-hot h_pre copies a stream, a permutation H_res permutes and a cancelling
branch gives zero, to the last bit in every precision."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance.properties import Inconclusive, PropertyFailure, exact
from tests.conformance.properties.support import run

IDS = ("exact.one_hot_copy", "exact.permutation_mixing", "exact.cancelling_streams")


@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-static",
                                    "reference:hc-dynamic"])
def test_reference_passes(target: str) -> None:
    for pid in IDS:
        run(pid, target)


def test_the_masks_are_exact() -> None:
    h = torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 1.0], [0.0, 1.0 - 1e-16, 0.0]],
                     dtype=torch.float64)
    assert exact._one_hot(h).tolist() == [True, False, False]
    P = torch.tensor([[[0.0, 1.0], [1.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]]])
    assert exact._permutation(P).tolist() == [True, False]
    assert exact._power_of_two(torch.tensor([1.0, 2.0, 0.5, 3.0, 0.0])).tolist() == [
        True, True, True, False, False]


def test_a_centred_aggregate_does_not_copy_exactly() -> None:
    with pytest.raises(PropertyFailure, match="branch input vs stream k"):
        run("exact.one_hot_copy", "mutant:aggregate_centred")


def test_mixing_as_identity_plus_offset_does_not_permute_exactly() -> None:
    with pytest.raises(PropertyFailure, match="X' vs P X"):
        run("exact.permutation_mixing", "mutant:mixing_identity_plus_delta")
    with pytest.raises(PropertyFailure, match="expected 0"):
        run("exact.cancelling_streams", "mutant:mixing_identity_plus_delta")


def test_weights_that_are_never_exact_are_inconclusive() -> None:
    with pytest.raises(Inconclusive, match="exactly one-hot"):
        run("exact.one_hot_copy", "reference:mhc", perturb=0.3, param_scale=1.0)
