"""Gradients family: finite differences, the spec's closed-form backward, finiteness."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance.properties import PropertyFailure
from hcspec.conformance.protocol import Conventions
from tests.conformance.properties.support import run, unmet


def test_reference_passes() -> None:
    for pid in ("gradients.fd_input", "gradients.closed_form", "gradients.mixing_trainable"):
        run(pid, "reference:mhc")


def test_a_transposed_backward_fails_finite_differences() -> None:
    with pytest.raises(PropertyFailure, match="finite differences vs autograd"):
        run("gradients.fd_input", "mutant:backward_transposed", example=1)


def test_float64_is_required_before_any_case() -> None:
    message = unmet("gradients.fd_input", dtype=torch.float32)
    assert message == ("the gradient checks run in float64 (finite differences, the spec's "
                       "closed form at 1e-11); the factory rejected float64 (runs in "
                       "torch.float32)")
    replicated = unmet("gradients.mixing_trainable",
                       conventions=Conventions(state_domain="replicated"))
    assert replicated is not None and "row-stochastic" in replicated


def test_closed_form_probed_needs_an_unnormalised_branch_input() -> None:
    message = unmet("gradients.closed_form_probed", kind="hc-static",
                    conventions=Conventions(branch_input="rms_norm"))
    assert message is not None and "'rms_norm'" in message
    assert unmet("gradients.closed_form_probed", kind="hc-static") is None
