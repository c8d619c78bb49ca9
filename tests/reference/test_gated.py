"""The reference gated hyper-connection (Qwen4-exp): its step is the published ``qwen4-exp``
step of its own tensors; its element-wise weights reproduce the read; the spec's closed forms
(``gated.read_backward``, ``gated.constant_gate``) hold numerically; float64 to bfloat16."""

from __future__ import annotations

import pytest
import torch

from hcspec.formulas import gated as formula
from hcspec.reference.gated import GatedHyperConnection, qwen4_exp


def _perturbed(n: int = 3, d: int = 5, seed: int = 0,
               dtype: torch.dtype = torch.float64) -> GatedHyperConnection:
    module = qwen4_exp(n, d, seed=seed, dtype=dtype)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed + 100)
        for p in module.parameters():
            p.add_((torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.7).to(dtype))
    return module


def _branch(a: torch.Tensor) -> torch.Tensor:
    return torch.tanh(a) + 0.5


def test_step_is_x_plus_h_post_times_the_branch_of_the_gated_mean() -> None:
    m = _perturbed()
    x = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    w = m.hc_norm_weight.reshape(3, 5)
    normed = (1 + w) * x / torch.sqrt(x.square().mean(-1, keepdim=True) + 1e-6)
    hidden = torch.nn.functional.silu(normed.flatten(-2) @ m.input_mix_weight_down.T / 3)
    gate = torch.sigmoid(hidden @ m.input_mix_weight_up.T).unflatten(-1, (3, 5))
    x_in = (gate * normed).mean(-2)
    h_post = 2 * torch.sigmoid(normed.flatten(-2) @ m.block_inject_weight.T / 3)
    want = x + h_post.unsqueeze(-1) * _branch(x_in).unsqueeze(-2)
    got = m(x, _branch)
    assert torch.allclose(got, want, atol=1e-13, rtol=0)
    h_pre, reported_post = m.elementwise_weights(x)
    assert h_pre.shape == x.shape and reported_post.shape == x.shape[:-1]
    assert torch.allclose((h_pre * x).sum(-2), x_in, atol=1e-13, rtol=0)
    assert torch.allclose(reported_post, h_post, atol=1e-13, rtol=0)
    read, written = m.read_map(x)
    assert torch.allclose(read, x_in, atol=1e-13, rtol=0)
    assert torch.equal(written, reported_post)


def test_at_init_the_norm_scale_is_one_and_n1_is_a_gated_prenorm() -> None:
    m = qwen4_exp(1, 4, seed=3)
    assert torch.count_nonzero(m.hc_norm_weight) == 0
    x = torch.randn(1, 2, 1, 4, dtype=torch.float64)
    p = formula.parts(m.published_parameters(), x)
    rms = x / torch.sqrt(x.square().mean(-1, keepdim=True) + 1e-6)
    assert torch.allclose(p.normed, rms, atol=1e-15, rtol=0)  # spec gated.init_scale
    assert torch.allclose(p.x_in, (p.gate * rms)[..., 0, :], atol=1e-15, rtol=0)


def test_zero_up_projection_gives_half_the_mean_of_the_normalised_streams() -> None:
    m = _perturbed(n=4, d=3)
    with torch.no_grad():
        m.input_mix_weight_up.zero_()
    x = torch.randn(2, 2, 4, 3, dtype=torch.float64)
    p = formula.parts(m.published_parameters(), x)
    assert torch.allclose(p.x_in, p.normed.mean(-2) / 2, atol=1e-15, rtol=0)  # gated.constant_gate


def test_autograd_matches_the_closed_form_backward_of_the_spec() -> None:
    m = _perturbed(n=2, d=3, seed=4)
    x = torch.randn(1, 1, 2, 3, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(1, 1, 2, 3, dtype=torch.float64)
    A = torch.randn(3, 3, dtype=torch.float64)
    out = m(x, lambda a: a @ A.T)
    (gx,) = torch.autograd.grad((out * upstream).sum(), x)
    with torch.no_grad():  # the spec's closed form (gated.read_backward), in torch
        params = m.published_parameters()
        p = formula.parts(params, x)
        assert p.h_post is not None
        n = 2
        z = p.x_in @ A.T
        g_in = (upstream * p.h_post.unsqueeze(-1)).sum(-2) @ A
        g_h = (upstream * z.unsqueeze(-2)).sum(-1)
        g_l = g_h * p.h_post * (1 - p.h_post / 2)
        g_v = (p.normed * g_in.unsqueeze(-2) / n * p.gate * (1 - p.gate)).flatten(-2)
        a = p.normed.flatten(-2) @ m.input_mix_weight_down.T / n
        slope = torch.sigmoid(a) * (1 + a * (1 - torch.sigmoid(a)))
        g_a = slope * (g_v @ m.input_mix_weight_up)
        g_n = (p.gate * g_in.unsqueeze(-2) / n + ((g_a @ m.input_mix_weight_down
                                                  + g_l @ m.block_inject_weight) / n)
               .unflatten(-1, (2, 3)))
        rho2 = x.square().mean(-1, keepdim=True) + 1e-6
        y = (1 + m.hc_norm_weight.reshape(2, 3)) * g_n
        closed = upstream + (y - x * (x * y).sum(-1, keepdim=True) / (3 * rho2)) / rho2.sqrt()
    assert torch.allclose(gx, closed, atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_dtypes_keep_their_dtype_and_stay_close(dtype: torch.dtype) -> None:
    m64, m = _perturbed(seed=5), _perturbed(seed=5, dtype=dtype)
    x = torch.randn(2, 3, 3, 5, dtype=torch.float64)
    out = m(x.to(dtype), _branch)
    assert out.dtype == dtype and m.reduce(x.to(dtype)).dtype == dtype
    error = (out.double() - m64(x, _branch)).abs().max().item()
    assert error < {torch.float64: 1e-14, torch.float32: 1e-5, torch.bfloat16: 0.1}[dtype]


def test_reduce_is_the_mixer_read_and_shapes_are_checked() -> None:
    m = _perturbed()
    x = torch.randn(2, 3, 3, 5, dtype=torch.float64)
    assert m.reduce(x).shape == (2, 3, 5)
    assert torch.equal(m.expand(x[..., 0, :])[..., 2, :], x[..., 0, :])
    with pytest.raises(ValueError, match=r"n=3, d=5"):
        m(torch.randn(2, 3, 4, 5, dtype=torch.float64), _branch)
    with pytest.raises(ValueError, match="rank"):
        GatedHyperConnection(2, 3, rank=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu() -> None:
    m = _perturbed()
    x = torch.randn(2, 3, 3, 5, dtype=torch.float64)
    got = m.to("cuda")(x.to("cuda"), _branch).cpu()
    assert torch.allclose(got, _perturbed()(x, _branch), atol=1e-12, rtol=0)
