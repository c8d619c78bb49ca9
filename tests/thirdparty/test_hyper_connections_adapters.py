"""The hyper-connections adapters (skipped where the package is not installed: the main
pytest run of .ci/run; .ci/run runs this file again after installing it)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("hyper_connections", reason="hyper-connections is not installed")

from hcspec.conformance.adapters import hyper_connections as hc
from hcspec.conformance.adapters._capture import PackageChanged
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation

FACTORIES = {"hc": hc.make_hc, "mhc": hc.make_mhc, "mhc-v2": hc.make_mhc_v2}


def _branch(d: int) -> torch.nn.Module:
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.Tanh()).double()


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_forward_equals_the_package_on_its_own_layout(name: str) -> None:
    n, d, b, t = 3, 8, 2, 5
    impl = FACTORIES[name](n, d, layer_index=1, seed=0)
    with torch.no_grad():
        for p in impl.parameters():
            p.add_(0.3 * torch.randn_like(p))
    x = torch.randn(b, t, n, d, dtype=torch.float64)
    branch = _branch(d)
    ours = impl.forward(x, branch)
    theirs_in = x if name == "mhc-v2" else x.permute(0, 2, 1, 3).reshape(b * n, t, d)
    theirs = impl.module.decorate_branch(branch)(theirs_in)
    if name != "mhc-v2":
        theirs = theirs.reshape(b, n, t, d).permute(0, 2, 1, 3)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_weights_in_row_form(name: str) -> None:
    n, d = 4, 8
    impl = FACTORIES[name](n, d, layer_index=6, seed=0)
    x = torch.randn(2, 3, n, d, dtype=torch.float64)
    h_pre, h_post, H_res = impl.weights(x)
    assert h_pre.shape == (2, 3, n) and H_res.shape == (2, 3, n, n) and H_res.dtype == x.dtype
    if name == "hc":  # HC Eq. 14 init: e_(6 mod 4), 1, I
        assert torch.allclose(h_pre, torch.eye(n, dtype=x.dtype)[2].expand_as(h_pre))
        assert torch.allclose(h_post, torch.ones_like(h_post))
        assert torch.allclose(H_res, torch.eye(n, dtype=x.dtype).expand_as(H_res))
    else:  # σ of the one-hot logits; Sinkhorn(exp I) exact in columns, symmetric at init
        expected = float(torch.sigmoid(torch.tensor(1.0)))
        assert float(h_pre[..., 2].min().detach()) == pytest.approx(expected)
        assert torch.allclose(H_res.sum(-2), torch.ones(2, 3, n, dtype=x.dtype), atol=1e-6)
    with torch.no_grad():
        for p in impl.parameters():
            p.add_(torch.randn_like(p))
    h_pre, h_post, H_res = impl.weights(x)
    zero = impl.forward(x, torch.zeros_like)
    tol = 1e-12 if name == "hc" else 1e-5
    assert torch.allclose(zero, H_res @ x, atol=tol)  # H_res, not its transpose
    assert not torch.allclose(H_res, H_res.transpose(-1, -2), atol=1e-3)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_bad_input_and_seeding(name: str) -> None:
    impl = FACTORIES[name](3, 8)
    with pytest.raises(ValueError, match=r"\[B, T, 3, 8\], got \[6, 4, 8\]"):
        impl.forward(torch.randn(6, 4, 8, dtype=torch.float64), torch.zeros_like)
    with pytest.raises(ValueError, match="branch must return"):
        impl.forward(torch.randn(1, 2, 3, 8, dtype=torch.float64), lambda t: t[..., :4])
    state = torch.random.get_rng_state()
    FACTORIES[name](3, 8, seed=5)
    assert torch.equal(state, torch.random.get_rng_state())


def test_a_changed_package_is_reported_not_misread(monkeypatch: pytest.MonkeyPatch) -> None:
    impl = hc.make_mhc(3, 8)
    monkeypatch.setattr(impl.module, "width_connection", lambda x: (x, x, {"beta": None}))
    with pytest.raises(PackageChanged, match=r"0\.4\.11"):
        impl.weights(torch.randn(1, 2, 3, 8, dtype=torch.float64))


def test_kit_on_hc_passes_and_mhc_plain_sinkhorn_fails_at_extreme_logits() -> None:
    ok = check_implementation("hyper_connections:hc", profile="quick", device="cpu",
                              only=["law", "reduction"])
    assert ok.ok, ok.summary
    report = check_implementation("hyper_connections:mhc", profile="quick", device="cpu",
                                  only=["constraints.extreme_logits", "law.reported"])
    statuses = {r.id: r.status for r in report.results}
    assert statuses["constraints.extreme_logits"] == rp.FAILED
    assert statuses["law.reported"] == rp.PASSED  # at float32 tolerance: declared
    assert report.conventions["compute_dtype"] == "torch.float32"
    assert report.conventions["sinkhorn_exact_axis"] == "columns"
