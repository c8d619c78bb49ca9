"""examples/jax_mhc_adapter.py: a small mHC in JAX checked through the framework bridge.
Skipped where jax is absent (recent jax needs Python >= 3.12; docs/conformance.md says how its
venv is made)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

HAVE_JAX = importlib.util.find_spec("jax") is not None
pytestmark = pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed")


def test_the_jax_example_keeps_float64_and_passes_the_gradient_properties() -> None:
    from examples.jax_mhc_adapter import make
    from hcspec.conformance.run.session import check_implementation

    impl = make(3, 4, seed=0)
    x = torch.randn(1, 2, 3, 4, dtype=torch.float64, requires_grad=True)
    out = impl.forward(x, torch.tanh)
    assert out.dtype == torch.float64  # jax_enable_x64: float64 crosses as float64
    h_pre, h_post, H_res = impl.weights(x)
    torch.testing.assert_close(H_res.sum(-1), torch.ones(1, 2, 3, dtype=torch.float64))
    want = H_res @ x + h_post.unsqueeze(-1) * torch.tanh((h_pre.unsqueeze(-1) * x).sum(-2)
                                                         ).unsqueeze(-2)
    torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
    only = ["law.reported", "gradients.fd_input", "gradients.fd_parameters"]
    report = check_implementation(make, profile="quick", device="cpu", only=only)
    statuses = {r.id: r.status for r in report.results}
    assert all(statuses[i] == "passed" for i in only), statuses
