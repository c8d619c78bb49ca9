"""Device family: CUDA vs CPU; not applicable, with the reason, without CUDA."""

from __future__ import annotations

import pytest
import torch

from tests.conformance.properties.support import run, unmet


def test_without_cuda_the_reason_is_given_before_any_case() -> None:
    message = unmet("device.cuda_matches_cpu")
    if torch.cuda.is_available():
        assert message is None
    else:
        assert message == ("compares the CUDA forward with the CPU forward; no CUDA device "
                           "(torch.cuda.is_available() is False)")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_reference_passes_on_cuda() -> None:
    run("device.cuda_matches_cpu", "reference:mhc")
