"""The mlx-lm DeepSeek-V4.1 adapter (:mod:`hcspec.conformance.adapters.mlx_lm`), run against
the package itself: skipped where mlx-lm (with mlx) is absent (its CI lane, .ci/lanes/mlx_lm,
installs mlx-lm 0.32.2 and mlx[cpu] 0.32.4). Each test compares the bridged target with the
package's own MLX code or with the formulas written again here in torch."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest
import torch

from hcspec.conformance.adapters.declarations.mlx_lm import MODULE

HAVE_PACKAGE = (importlib.util.find_spec("mlx") is not None
                and importlib.util.find_spec("mlx_lm") is not None)
pytestmark = pytest.mark.skipif(not HAVE_PACKAGE, reason="mlx-lm (with mlx) is not installed")

N, D = 4, 6
ITERS, EPS, NORM_EPS = 20, 1e-6, 1e-20  # ModelArgs defaults, read from the package source


def _impl(seed: int = 0, layers: int | None = None) -> Any:
    from hcspec.conformance.adapters import mlx_lm
    impl = mlx_lm.make_deepseek_v41(N, D, seed=seed)
    target = impl if layers is None else impl.stack(layers)
    gen = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():  # away from the package's zero init, as the kit's perturbation
        for p in target.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64).float())
    return target


def _state(seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, N, D, dtype=torch.float64, generator=gen)


def torch_coefficients(fn: torch.Tensor, base: torch.Tensor, scale: torch.Tensor,
                       x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """DeepSeek-V4.1's (pre, post, comb) written again in torch (float64): RMS norm of vec(X),
    per-group scale, σ + eps, 2σ, softmax(-1) + eps then the fallback Sinkhorn loop."""
    flat = x.reshape(*x.shape[:2], -1)
    flat = flat * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + NORM_EPS)
    ids = torch.tensor([0] * N + [1] * N + [2] * N * N)
    mix = flat @ fn.double().T * scale.double()[ids] + base.double()
    pre = torch.sigmoid(mix[..., :N]) + EPS
    post = 2 * torch.sigmoid(mix[..., N:2 * N])
    comb = torch.softmax(mix[..., 2 * N:].reshape(*x.shape[:2], N, N), -1) + EPS
    comb = comb / (comb.sum(-2, keepdim=True) + EPS)
    for _ in range(ITERS - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + EPS)
        comb = comb / (comb.sum(-2, keepdim=True) + EPS)
    return pre, post, comb, mix


def test_the_sinkhorn_fallback_is_the_path_under_test_and_weights_match_torch() -> None:
    from hcspec.conformance.adapters import mlx_lm
    pkg = mlx_lm.package()
    assert pkg._sinkhorn_kernel is None and mlx_lm.sinkhorn_path() == "fallback"
    impl = _impl()
    x = _state()
    h_pre, h_post, H_res = impl.weights(x)
    pre, post, comb, mix = torch_coefficients(*impl.parameters(), x)
    tol = {"rtol": 1e-5, "atol": 1e-6}  # the package computes in float32
    torch.testing.assert_close(h_pre, pre, **tol)
    torch.testing.assert_close(h_post, post, **tol)
    torch.testing.assert_close(H_res, comb.transpose(-1, -2), **tol)  # X'_j = Σ_i comb[i,j] X_i
    assert not torch.allclose(H_res, comb, **tol)  # the orientation is visible
    l_pre, l_post, l_res = impl.logits(x)  # row form: H̃_res[i, j] belongs to H_res[i, j]
    torch.testing.assert_close(l_pre, mix[..., :N], **tol)
    torch.testing.assert_close(l_post, mix[..., N:2 * N], **tol)
    torch.testing.assert_close(l_res, mix[..., 2 * N:].reshape(2, 3, N, N).transpose(-1, -2),
                               **tol)


def _mlx_branch(mx: Any, w: np.ndarray) -> Any:
    weight = mx.array(w, dtype=mx.float64)
    return lambda v: mx.tanh(v @ weight)


def test_stack_of_two_equals_the_packages_decoder_layer() -> None:
    import mlx.core as mx

    from hcspec.conformance.adapters import mlx_lm
    pkg = mlx_lm.package()
    stack = _impl(layers=3)
    x = _state()
    gen = np.random.default_rng(0)
    w_attn, w_ffn, w_next = (gen.normal(0, 0.4, (D, D)) for _ in range(3))
    branches = [lambda v, w=w: torch.tanh(v @ torch.from_numpy(w)) for w in
                (w_attn, w_ffn, w_next)]
    got = stack.forward(x, branches[:3])
    used = stack.weights(x, branches)
    # the package's DecoderLayer, its attention and MoE replaced by the same branches
    layer = pkg.DecoderLayer.__new__(pkg.DecoderLayer)
    pkg.nn.Module.__init__(layer)
    hcs = []
    for k in range(2):
        hc = pkg.HyperConnection(pkg.ModelArgs(hidden_size=D, hc_mult=N))
        hc.update({name: mx.array(p.detach().numpy()) for name, p in
                   stack.sublayer(k).named_parameters()})
        hcs.append(hc)
    layer.attn_hc, layer.ffn_hc = hcs
    layer.input_layernorm = layer.post_attention_layernorm = lambda v: v
    attn, ffn = _mlx_branch(mx, w_attn), _mlx_branch(mx, w_ffn)
    layer.self_attn = lambda h, **kw: attn(h)
    layer.mlp = ffn
    streams = mx.array(x.numpy(), dtype=mx.float64)
    pre_mix = mx.zeros((2, 3, N), dtype=mx.float32)  # TextModel's initial pre-mix
    pre_mix[..., 0] = 1.0
    out, carried = pkg.DecoderLayer.__call__(layer, streams, pre_mix, start_pos=0,
                                             window_idx=None, cache=None, shared={})
    # the third sublayer reads with the pre the second sublayer's HyperConnection carried
    torch.testing.assert_close(used[2][0], torch.from_numpy(np.array(carried)).double(),
                               rtol=1e-6, atol=1e-7)
    xg = x.clone().requires_grad_(True)
    two = _two(stack, xg, branches)
    torch.testing.assert_close(two, torch.from_numpy(np.array(out)), rtol=1e-6, atol=1e-7)
    assert got.shape == x.shape
    # the gradient through the two sublayers (the carried pre included) is the package's
    G = torch.randn(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    (grad,) = torch.autograd.grad((two * G).sum(), xg)

    def loss(s: Any) -> Any:
        new, _ = pkg.DecoderLayer.__call__(layer, s, pre_mix, start_pos=0, window_idx=None,
                                           cache=None, shared={})
        return (new * mx.array(G.numpy(), dtype=mx.float64)).sum()

    want = torch.from_numpy(np.array(mx.grad(loss)(streams)))
    torch.testing.assert_close(grad, want, rtol=1e-5, atol=1e-6)


def _two(stack: Any, x: torch.Tensor, branches: list[Any]) -> torch.Tensor:
    """The state after the first two sublayers of ``stack``, from its reported weights."""
    from hcspec.conformance.adapters.mlx_lm import MlxV41Stack
    first_two = MlxV41Stack([stack.sublayer(0), stack.sublayer(1)])
    out: torch.Tensor = first_two.forward(x, branches[:2])
    return out


def test_the_stack_carries_the_pre_of_the_previous_sublayer() -> None:
    stack = _impl(layers=3)
    x = _state(2)
    lin = [torch.nn.Linear(D, D).double() for _ in range(3)]
    branches = [lambda v, f=f: torch.tanh(f(v)) for f in lin]
    used = stack.weights(x, branches)
    tol = {"rtol": 1e-5, "atol": 1e-6}  # float32 inside; the recomposition here is float64
    state = x
    previous: tuple[torch.Tensor, ...] = ()
    for k in range(3):
        own = stack.sublayer(k).weights(state)
        h_pre, h_post, H_res = used[k]
        torch.testing.assert_close(h_post, own[1], **tol)
        torch.testing.assert_close(H_res, own[2], **tol)
        if k == 0:  # the model's initial pre-mix reads stream 0
            assert torch.equal(h_pre, torch.eye(N, dtype=h_pre.dtype)[0].expand_as(h_pre))
        else:  # read with the previous sublayer's pre, computed on the previous input
            torch.testing.assert_close(h_pre, previous[0], **tol)
            assert not torch.allclose(h_pre, own[0], rtol=1e-3, atol=1e-4)
        previous = own
        x_in = (h_pre.unsqueeze(-1) * state).sum(-2)
        state = H_res @ state + h_post.unsqueeze(-1) * branches[k](x_in).unsqueeze(-2)
    torch.testing.assert_close(stack.forward(x, branches), state, **tol)


def test_gradients_through_the_bridge_equal_mlx_grad_of_the_same_step() -> None:
    import mlx.core as mx

    from hcspec.conformance.adapters import mlx_lm
    pkg = mlx_lm.package()
    impl = _impl(seed=3)
    x = _state(4)
    G = torch.randn(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    w = np.random.default_rng(1).normal(0, 0.4, (D, D))
    xg = x.clone().requires_grad_(True)
    out = impl.forward(xg, lambda v: torch.tanh(v @ torch.from_numpy(w)))
    got = torch.autograd.grad((out * G).sum(), [xg, *impl.parameters()])
    hc = pkg.HyperConnection(pkg.ModelArgs(hidden_size=D, hc_mult=N))
    branch = _mlx_branch(mx, w)
    g = mx.array(G.numpy(), dtype=mx.float64)

    def loss(xs: Any, fn: Any, base: Any, scale: Any) -> Any:
        hc.update({"fn": fn, "base": base, "scale": scale})
        pre, post, comb = hc(xs)
        return (pkg._expand(branch(pkg._collapse(xs, pre)), xs, post, comb) * g).sum()

    params = {name: mx.array(p.detach().numpy()) for name, p in impl.named_parameters()}
    want = mx.grad(loss, argnums=(0, 1, 2, 3))(mx.array(x.numpy(), dtype=mx.float64),
                                               params["fn"], params["base"], params["scale"])
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, torch.from_numpy(np.array(b)).to(a.dtype), rtol=1e-5,
                                   atol=1e-6)


def test_the_declared_module_is_the_one_read() -> None:
    from hcspec.conformance.adapters import mlx_lm
    assert mlx_lm.package().__name__ == MODULE
    declared = mlx_lm.make_deepseek_v41(2, 3).conventions
    assert declared.compute_dtype == torch.float32 and "mlx" in declared.notes


def test_the_stack_declares_the_previous_input_design_and_fullgraph_is_not_applicable() -> None:
    from hcspec.conformance.adapters import mlx_lm
    from hcspec.conformance.protocol import stack_pre_mix
    from hcspec.conformance.run.session import check_implementation

    design, initial = stack_pre_mix(_impl(layers=3))
    assert design == "previous_input" and initial is not None
    assert torch.equal(initial, torch.eye(N, dtype=initial.dtype)[0])  # TextModel's pre_mix
    report = check_implementation(mlx_lm.make_deepseek_v41, profile="quick", device="cpu",
                                  only=["stack", "compile.fullgraph"])
    status = {r.id: r.status for r in report.results}
    for prop_id in ("stack.unrolled_weights", "stack.stream_sum_preserved",
                    "stack.carried_matches_recomputed", "stack.fd_gradients"):
        assert status[prop_id] == "passed", status
    assert status["compile.fullgraph"] == "not_applicable", status
