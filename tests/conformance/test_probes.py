"""Black-box probes recover known weights exactly, and say why when they cannot."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance import probes
from hcspec.conformance.protocol import Conventions
from hcspec.conformance.strategies import Case, stream_state
from tests.conformance.helpers import LinearHC, make_linear


def test_probes_recover_the_weights_of_a_known_linear_hc() -> None:
    impl = make_linear(3, 7, seed=5)
    x = stream_state(Case(2, 4, 3, 7, seed=1), torch.float64)
    got = probes.probe(impl, x, Conventions())
    assert got.h_pre is not None
    torch.testing.assert_close(got.h_pre, impl.h_pre.expand(2, 4, 3), rtol=0, atol=1e-12)
    torch.testing.assert_close(got.h_post, impl.h_post.expand(2, 4, 3), rtol=0, atol=1e-12)
    torch.testing.assert_close(got.H_res, impl.H_res.expand(2, 4, 3, 3), rtol=0, atol=1e-12)
    assert max(got.residuals.values()) < 1e-12


def test_probe_residual_exposes_a_nonlinear_mix() -> None:
    impl = make_linear(2, 5, seed=1)

    class Squared(LinearHC):
        def forward(self, x, branch):  # type: ignore[no-untyped-def]
            return super().forward(x, branch) + 0.1 * x**2

    bad = Squared(impl.h_pre, impl.h_post, impl.H_res, 5)
    got = probes.probe(bad, stream_state(Case(1, 2, 2, 5), torch.float64), Conventions())
    assert got.residuals["mix"] > 1e-3


def test_probe_errors_name_the_problem() -> None:
    impl = make_linear(3, 3)
    with pytest.raises(probes.ProbeError, match="d > n"):
        probes.probe(impl, torch.zeros(1, 1, 3, 3, dtype=torch.float64), Conventions())

    class WrongShape(LinearHC):
        def forward(self, x, branch):  # type: ignore[no-untyped-def]
            return super().forward(x, branch)[..., :-1]

    wrong = WrongShape(impl.h_pre, impl.h_post, impl.H_res, 4)
    with pytest.raises(probes.ProbeError, match=r"shape \[1, 1, 3, 3\], expected \[1, 1, 3, 4\]"):
        probes.probe(wrong, torch.randn(1, 1, 3, 4, dtype=torch.float64), Conventions())
