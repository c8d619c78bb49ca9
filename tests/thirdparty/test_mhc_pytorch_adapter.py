"""The mhc-pytorch adapter (skipped where mhc-pytorch is not installed, or where the import
name ``mhc`` belongs to another distribution)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("mhc", reason="mhc-pytorch is not installed")

from hcspec.conformance.subjects import targets

if targets.package_problem(targets.BUILTIN["mhc_pytorch:mhc"]) is not None:
    pytest.skip("the import name 'mhc' is not mhc-pytorch's here", allow_module_level=True)

from hcspec.conformance.adapters import mhc_pytorch


def _replicated(b: int, t: int, n: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    h = torch.randn(b, t, d, dtype=torch.float64)
    return h, h.unsqueeze(2).expand(b, t, n, d).contiguous()


def test_forward_is_the_packages_per_stream_state() -> None:
    impl = mhc_pytorch.make(4, 8, seed=1)
    h, x = _replicated(2, 3, 4, 8)
    lin = torch.nn.Linear(8, 8).double()
    streams = impl.forward(x, lin)
    collapsed = impl.forward_collapsed(h, lin)
    assert torch.allclose(streams.mean(dim=2), collapsed, atol=1e-14)  # collapse_mode mean
    h_pre, h_post, H_res = impl.weights(x)
    want = H_res @ x + h_post.unsqueeze(-1) * lin((h_pre.unsqueeze(-1) * x).sum(2)).unsqueeze(2)
    assert torch.allclose(streams, want, atol=1e-12)
    assert torch.allclose(H_res.sum(-2), torch.ones(2, 3, 4, dtype=x.dtype), atol=1e-14)
    ours = {id(p) for p in impl.parameters()}
    assert len(ours) == 13 and not ours & {id(p) for p in lin.parameters()}  # not a child


def test_general_state_is_refused_and_seed_is_reproducible() -> None:
    impl = mhc_pytorch.make(4, 8)
    with pytest.raises(ValueError, match="cannot take a general"):
        impl.forward(torch.randn(2, 3, 4, 8, dtype=torch.float64), torch.zeros_like)
    a, b = mhc_pytorch.make(4, 8, seed=3), mhc_pytorch.make(4, 8, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert a.conventions.state_domain == "replicated"
