"""The targets that load one file by path from a user's checkout (``vllm:mhc-torch``,
``torchtitan:deepseek-v4``), on stand-in files written here in the same interface (no
third-party code): where the file is looked up, how the step is composed (``H_res = combᵀ``),
that ``weights`` reads the ``pre`` the file computed, and the messages when no checkout is
named."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from hcspec.conformance.adapters import _by_path, torchtitan_deepseek_v4, vllm_mhc
from hcspec.conformance.subjects import targets

VLLM_STAND_IN = '''
import torch


def mhc_pre_torch(residual, fn, hc_scale, hc_base, rms_eps, hc_pre_eps, hc_sinkhorn_eps,
                  hc_post_mult_value, sinkhorn_repeat, n_splits=1):
    # a stand-in in vLLM's interface: fixed asymmetric comb, pre read from the state
    assert residual.dtype == torch.bfloat16
    n, d = residual.shape[-2:]
    flat = residual.view(-1, n, d).float()
    pre_mix = torch.sigmoid(flat.mean(-1) * hc_scale[0]) + hc_pre_eps
    post_mix = hc_post_mult_value * torch.sigmoid(hc_base[n:2 * n]).expand(flat.shape[0], n)
    comb = torch.arange(n * n, dtype=torch.float32).view(n, n) + 1
    comb = (comb / comb.sum(-1, keepdim=True)).expand(flat.shape[0], n, n)
    layer_input = (pre_mix.unsqueeze(-1) * flat).sum(1).to(torch.bfloat16)
    outer = residual.shape[:-2]
    return (post_mix.reshape(*outer, n, 1), comb.reshape(*outer, n, n),
            layer_input.view(*outer, d))


def mhc_post_torch(x, residual, post_layer_mix, comb_res_mix):
    mixed = torch.einsum("...ij,...ih->...jh", comb_res_mix.float(), residual.float())
    return (mixed + post_layer_mix.float() * x.unsqueeze(-2).float()).to(residual.dtype)
'''

TORCHTITAN_STAND_IN = '''
from dataclasses import dataclass

import torch
from torch import nn


class _Built(nn.Module):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.Config.owner = cls


@dataclass(kw_only=True)
class _Config:
    def build(self):
        return type(self).owner(self)


class HcPre(_Built):
    @dataclass(kw_only=True)
    class Config(_Config):
        hc_mult: int = 4
        dim: int = 0
        sinkhorn_iters: int = 20
        eps: float = 1e-6
        norm_eps: float = 1e-6

    def __init__(self, config):
        super().__init__()
        n, d = config.hc_mult, config.dim
        self.hc_fn = nn.Parameter(torch.empty(n * (n + 2), n * d))
        self.hc_base = nn.Parameter(torch.empty(n * (n + 2)))
        self.hc_scale = nn.Parameter(torch.empty(3))
        self.n = n

    def forward(self, x):
        n = self.n
        pre = torch.sigmoid(x.float().mean(-1) + self.hc_base[:n]) + 1e-6
        post = 2 * torch.sigmoid(self.hc_base[n:2 * n]).expand(*x.shape[:2], n)
        comb = torch.arange(n * n, dtype=torch.float32).view(n, n) + 1
        comb = (comb / comb.sum(-1, keepdim=True)).expand(*x.shape[:2], n, n)
        y = torch.sum(pre.unsqueeze(-1) * x.float(), dim=2)
        return y.to(x.dtype), post, comb


class HcPost(_Built):
    @dataclass(kw_only=True)
    class Config(_Config):
        pass

    def __init__(self, config):
        super().__init__()

    def forward(self, x, residual, post, comb):
        y = post.unsqueeze(-1) * x.unsqueeze(-2) + torch.sum(
            comb.unsqueeze(-1) * residual.unsqueeze(-2), dim=2)
        return y.type_as(x)


class HcHead(_Built):
    @dataclass(kw_only=True)
    class Config(_Config):
        hc_mult: int = 4
        dim: int = 0
        norm_eps: float = 1e-6
        eps: float = 1e-6

    def __init__(self, config):
        super().__init__()
        n, d = config.hc_mult, config.dim
        self.hc_fn = nn.Parameter(torch.empty(n, n * d))
        self.hc_base = nn.Parameter(torch.empty(n))
        self.hc_scale = nn.Parameter(torch.empty(1))

    def forward(self, x):
        return x.mean(2)
'''


def _checkout(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(text))
    return root


def _comb(n: int) -> torch.Tensor:
    comb = torch.arange(n * n, dtype=torch.float32).view(n, n) + 1
    return comb / comb.sum(-1, keepdim=True)


def test_without_a_checkout_the_targets_say_what_to_set(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(vllm_mhc.CHECKOUT_ENV, raising=False)
    with pytest.raises(ImportError, match=r"set \$HC_VLLM_CHECKOUT"):
        vllm_mhc.make(2, 3)
    monkeypatch.setenv(torchtitan_deepseek_v4.CHECKOUT_ENV, str(tmp_path))
    with pytest.raises(ImportError, match=r"no torchtitan/models/deepseek_v4/mhc\.py there"):
        torchtitan_deepseek_v4.make(2, 3)
    for name in ("vllm:mhc-torch", "torchtitan:deepseek-v4"):
        problem = targets.package_problem(targets.BUILTIN[name])
        assert problem is not None and "checkout" in problem


def test_vllm_composes_mhc_pre_and_mhc_post(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    root = _checkout(tmp_path, vllm_mhc.REFERENCE_FILE, VLLM_STAND_IN)
    monkeypatch.setenv(vllm_mhc.CHECKOUT_ENV, str(root))
    assert targets.package_problem(targets.BUILTIN["vllm:mhc-torch"]) is None
    n, d = 3, 4
    impl = vllm_mhc.make(n, d, seed=2)
    x = torch.randn(2, 5, n, d, dtype=torch.float64)
    h_pre, h_post, H_res = impl.weights(x)
    xb = x.to(torch.bfloat16).float()
    want_pre = torch.sigmoid(xb.mean(-1) * impl.module.hc_scale[0]) + 1e-6
    assert torch.equal(h_pre, want_pre.to(torch.bfloat16))
    assert torch.equal(H_res[1, 2], _comb(n).T.to(torch.bfloat16))  # X'_j = Σ_i comb[i, j] X_i
    branch = torch.nn.Linear(d, d).double()
    out = impl.forward(x, branch)
    assert out.dtype == torch.bfloat16
    z = branch((want_pre.unsqueeze(-1) * xb).sum(2).to(torch.bfloat16).double()).float()
    want = (torch.einsum("ij,btid->btjd", _comb(n), xb)
            + h_post.float().unsqueeze(-1) * z.unsqueeze(-2))
    assert torch.allclose(out.float(), want, atol=2e-2, rtol=1e-2)


def test_torchtitan_composes_hcpre_and_hcpost(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    root = _checkout(tmp_path, torchtitan_deepseek_v4.REFERENCE_FILE, TORCHTITAN_STAND_IN)
    monkeypatch.setenv(torchtitan_deepseek_v4.CHECKOUT_ENV, str(root))
    n, d = 3, 4
    impl = torchtitan_deepseek_v4.make(n, d, seed=1)
    pre_module = impl.module.pre
    assert 0.014 < float(pre_module.hc_fn.detach().std()) < 0.026  # trunc_normal(std=0.02)
    assert float(pre_module.hc_scale.detach().abs().max()) < 0.2  # not DeepSeek's ones
    x = torch.randn(2, 5, n, d, dtype=torch.float64)
    h_pre, h_post, H_res = impl.weights(x)
    want_pre = torch.sigmoid(x.float().mean(-1) + pre_module.hc_base[:n]) + 1e-6
    assert torch.allclose(h_pre, want_pre.double(), atol=1e-7)
    assert torch.allclose(H_res[0, 0], _comb(n).T.double())
    branch = torch.nn.Linear(d, d).double()
    want = (torch.einsum("ij,btid->btjd", _comb(n).double(), x)
            + h_post.unsqueeze(-1) * branch((h_pre.unsqueeze(-1) * x).sum(2)).unsqueeze(-2))
    assert torch.allclose(impl.forward(x, branch), want, atol=1e-6)
    assert torch.equal(impl.reduce(x), x.mean(2))


def test_by_path_loads_each_checkout_once_under_its_own_name(tmp_path: Path) -> None:
    a = _checkout(tmp_path / "a", "m.py", "VALUE = 1\n") / "m.py"
    b = _checkout(tmp_path / "b", "m.py", "VALUE = 2\n") / "m.py"
    first, again = _by_path.load_file("_p_", str(a)), _by_path.load_file("_p_", str(a))
    assert first is again and first.VALUE == 1
    assert _by_path.load_file("_p_", str(b)).VALUE == 2
    assert _by_path.module_name("_p_", str(a)) != _by_path.module_name("_p_", str(b))
