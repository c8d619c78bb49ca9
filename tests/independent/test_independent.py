"""Tests of the independent HC/DHC/mHC implementation against the spec and the papers.

- the structural law and the backward against ``hcspec.spec.numeric`` closed forms (1e-10, float64),
  evaluated on the weights the module reports, after a random perturbation of its parameters;
- hand-worked examples in the paper layout (HC Eq. 1–5), the DHC formulas (Eq. 10–13) and the
  mHC formulas (Eq. 7–9) recomputed directly with plain torch ops;
- doubly stochastic H_res, ranges of H_pre/H_post, Sinkhorn–Knopp robustness at huge logits;
- gradcheck in float64; static init = pre-norm residual (Eq. 14); DHC at init = SHC;
- clear errors on bad input.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from hcspec.spec import numeric
from tests.independent import hc_dynamic, hc_static, mhc
from tests.independent._paper_layout import PaperLayoutConnection
from tests.independent.sinkhorn import log_sinkhorn_knopp, sinkhorn_knopp

F64 = torch.float64
KINDS: dict[str, ModuleType] = {"hc-static": hc_static, "hc-dynamic": hc_dynamic, "mhc": mhc}
CLOSED_FORM_TOL = 1e-10
C = TypeVar("C", bound=PaperLayoutConnection)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def perturb(impl: C, seed: int) -> C:
    """Move every parameter away from its init, to O(1) values (init hides transposes)."""
    gen = _generator(seed)
    with torch.no_grad():
        for name, param in impl.named_parameters():
            noise = torch.randn(param.shape, generator=gen, dtype=F64).to(param.dtype)
            if name.startswith(("W_", "phi_")):
                param.copy_(noise / math.sqrt(impl.d))
            elif name.startswith(("s_", "alpha_")):
                param.copy_(0.5 + 0.25 * noise)
            else:
                param.add_(noise)
    return impl


def make_branch(d: int, seed: int, dtype: torch.dtype = F64) -> Callable[[Tensor], Tensor]:
    """A token-wise nonlinear sublayer ``h -> tanh(h W1) W2`` on ``[B, T, d]``."""
    gen = _generator(seed)
    w1 = (torch.randn(d, 2 * d, generator=gen, dtype=F64) / math.sqrt(d)).to(dtype)
    w2 = (torch.randn(2 * d, d, generator=gen, dtype=F64) / math.sqrt(2 * d)).to(dtype)
    return lambda h: torch.tanh(h @ w1) @ w2


def state(shape: tuple[int, ...], seed: int, dtype: torch.dtype = F64) -> Tensor:
    return torch.randn(shape, generator=_generator(seed), dtype=F64).to(dtype)


def np64(t: Tensor) -> np.ndarray:
    return t.detach().cpu().to(F64).numpy()


def assert_close(got: Tensor | np.ndarray, want: Tensor | np.ndarray, tol: float,
                 what: str) -> None:
    got_a = np64(got) if isinstance(got, Tensor) else got
    want_a = np64(want) if isinstance(want, Tensor) else want
    assert got_a.shape == want_a.shape, f"{what}: shape {got_a.shape} != {want_a.shape}"
    err = float(np.max(np.abs(got_a - want_a))) if got_a.size else 0.0
    assert err <= tol, f"{what}: max abs error {err:.3e} > {tol:.1e}"


# --- the law and the backward against hcspec.spec.numeric ------------------------------------

@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("n", "d", "layer_index"), [(1, 3, 0), (3, 5, 4), (4, 6, 1)])
def test_forward_matches_spec_closed_form(kind: str, n: int, d: int, layer_index: int) -> None:
    impl = perturb(KINDS[kind].make(n, d, layer_index=layer_index, seed=2), seed=3)
    x = state((2, 3, n, d), seed=4)
    inner = make_branch(d, seed=5)
    seen: list[Tensor] = []

    def branch(h: Tensor) -> Tensor:
        seen.append(h.detach().clone())
        return inner(h)

    out = impl(x, branch)
    h_pre, h_post, H_res = impl.weights(x)
    assert len(seen) == 1 and seen[0].shape == (2, 3, d), "branch must run once on [B,T,d]"
    x_in = numeric.aggregate(np64(x), np64(h_pre))
    assert_close(seen[0], x_in, CLOSED_FORM_TOL, "branch input vs spec aggregate")
    z = inner(torch.from_numpy(x_in))
    want = numeric.forward(np64(x), np64(h_post), np64(H_res), np64(z))
    assert_close(out, want, CLOSED_FORM_TOL, "forward vs spec forward")
    assert out.dtype == x.dtype and out.shape == x.shape


@pytest.mark.parametrize("kind", list(KINDS))
def test_backward_matches_spec_closed_form(kind: str) -> None:
    """Autograd = spec backward (fixed weights) + VJP of the weight generation (chain rule)."""
    n, d = 3, 4
    impl = perturb(KINDS[kind].make(n, d, layer_index=2, seed=7), seed=8)
    x = state((2, 2, n, d), seed=9).requires_grad_(True)
    G = state((2, 2, n, d), seed=10)
    branch = make_branch(d, seed=11)
    params = [p for _, p in impl.named_parameters()]

    loss = (impl(x, branch) * G).sum()
    auto = torch.autograd.grad(loss, [x, *params])

    weights = impl.weights(x)
    h_pre, h_post, H_res = (np64(w) for w in weights)
    x_in = torch.from_numpy(numeric.aggregate(np64(x), h_pre))
    g_z = torch.from_numpy(numeric.branch_cotangent(np64(G), h_post))
    z, g_in = vjp(branch, x_in, g_z)
    cf = numeric.backward(np64(G), np64(x), h_pre, h_post, H_res, np64(z), np64(g_in))
    through_weights = torch.autograd.grad(
        weights, [x, *params],
        grad_outputs=[torch.from_numpy(a) for a in (cf.h_pre, cf.h_post, cf.H_res)],
        allow_unused=True,
    )
    expected = [torch.from_numpy(cf.X) + _zero_if_none(through_weights[0], x)]
    expected += [_zero_if_none(g, p) for g, p in zip(through_weights[1:], params, strict=True)]
    names = ["x"] + [name for name, _ in impl.named_parameters()]
    for name, got, want in zip(names, auto, expected, strict=True):
        assert_close(got, want, CLOSED_FORM_TOL, f"d loss / d {name}")


def vjp(f: Callable[[Tensor], Tensor], at: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """``(f(at), Jᵀ v)`` of a branch, with the Jacobian J of ``f`` at ``at``."""
    leaf = at.detach().requires_grad_(True)
    out = f(leaf)
    (grad,) = torch.autograd.grad(out, leaf, v)
    return out.detach(), grad


def _zero_if_none(g: Tensor | None, like: Tensor) -> Tensor:
    return torch.zeros_like(like) if g is None else g


def test_static_parameter_gradients_are_the_spec_weight_gradients() -> None:
    """SHC: dL/dA_m = Σ_tokens dL/dh_pre, dL/dB = Σ dL/dh_postᵀ, dL/dA_r = Σ (dL/dH_res)ᵀ."""
    n, d = 4, 3
    impl = perturb(hc_static.make(n, d), seed=12)
    x, G = state((2, 3, n, d), seed=13), state((2, 3, n, d), seed=14)
    branch = make_branch(d, seed=15)
    (impl(x, branch) * G).sum().backward()
    h_pre, h_post, H_res = (np64(w) for w in impl.weights(x))
    x_in = torch.from_numpy(numeric.aggregate(np64(x), h_pre))
    g_z = torch.from_numpy(numeric.branch_cotangent(np64(G), h_post))
    z, g_in = vjp(branch, x_in, g_z)
    cf = numeric.backward(np64(G), np64(x), h_pre, h_post, H_res, np64(z), np64(g_in))
    assert impl.A_m.grad is not None and impl.B.grad is not None and impl.A_r.grad is not None
    assert_close(impl.A_m.grad[:, 0], cf.h_pre.sum(axis=(0, 1)), CLOSED_FORM_TOL, "A_m grad")
    assert_close(impl.B.grad[0], cf.h_post.sum(axis=(0, 1)), CLOSED_FORM_TOL, "B grad")
    assert_close(impl.A_r.grad.T, cf.H_res.sum(axis=(0, 1)), CLOSED_FORM_TOL, "A_r grad")


# --- hand-worked paper-layout examples --------------------------------------------------------

def test_static_paper_layout_worked_example() -> None:
    """HC Eq. 1–5 by hand: n=2, d=1, H=[1,2]ᵀ, A_m=e_0, B=[1,3], A_r=[[1,2],[0,1]], T(h)=10h.

    h_0 = Hᵀ A_m = 1; Bᵀ T(h_0) = [10, 30]; A_rᵀ H = [[1,0],[2,1]] [1,2]ᵀ = [1, 4]; Ĥ = [11, 34].
    """
    impl = hc_static.make(2, 1)
    with torch.no_grad():
        impl.A_m.copy_(torch.tensor([[1.0], [0.0]]))
        impl.B.copy_(torch.tensor([[1.0, 3.0]]))
        impl.A_r.copy_(torch.tensor([[1.0, 2.0], [0.0, 1.0]]))
    x = torch.tensor([1.0, 2.0], dtype=F64).reshape(1, 1, 2, 1)
    out = impl(x, lambda h: 10 * h)
    assert out.flatten().tolist() == [11.0, 34.0]
    h_pre, h_post, H_res = impl.weights(x)
    assert h_pre.flatten().tolist() == [1.0, 0.0]
    assert h_post.flatten().tolist() == [1.0, 3.0]
    assert H_res[0, 0].tolist() == [[1.0, 0.0], [2.0, 1.0]]


def test_dynamic_weights_follow_eq_10_to_13() -> None:
    """A_m(H) = s_α tanh(H̄ W_m) + A_m, A_r(H) = s_α tanh(H̄ W_r) + A_r, B(H) = s_β tanh(H̄ W_β)ᵀ + B;
    recomputed with torch's own layer_norm; H_res = A_rᵀ, h_pre = A_m, h_post = Bᵀ."""
    n, d = 3, 5
    impl = perturb(hc_dynamic.make(n, d, layer_index=1), seed=16)
    x = state((2, 2, n, d), seed=17)
    H_bar = F.layer_norm(x, (d,), eps=hc_dynamic.LAYER_NORM_EPS)
    a_m = impl.s_alpha * torch.tanh(H_bar @ impl.W_m) + impl.A_m          # [B,T,n,1]
    a_r = impl.s_alpha * torch.tanh(H_bar @ impl.W_r) + impl.A_r          # [B,T,n,n]
    b = impl.s_beta * torch.tanh(H_bar @ impl.W_beta).transpose(-1, -2) + impl.B   # [B,T,1,n]
    h_pre, h_post, H_res = impl.weights(x)
    assert_close(h_pre, a_m[..., 0], 1e-12, "h_pre = A_m(H)")
    assert_close(h_post, b[..., 0, :], 1e-12, "h_post = B(H)ᵀ")
    assert_close(H_res, a_r.transpose(-1, -2), 1e-12, "H_res = A_r(H)ᵀ")


def _plain_sinkhorn(logits: Tensor, iterations: int) -> Tensor:
    m = torch.exp(logits)
    for _ in range(iterations):
        m = m / m.sum(dim=-2, keepdim=True)
        m = m / m.sum(dim=-1, keepdim=True)
    return m


def test_mhc_weights_follow_eq_7_to_9() -> None:
    """Eq. 7–9 recomputed in the plain domain (moderate logits): σ, 2σ, Sinkhorn–Knopp."""
    n, d = 3, 4
    impl = perturb(mhc.make(n, d, seed=18), seed=19)
    x = state((2, 2, n, d), seed=20)
    flat = x.reshape(2, 2, n * d)
    x_norm = flat / torch.sqrt(flat.square().mean(-1, keepdim=True) + mhc.RMS_NORM_EPS)
    pre = torch.sigmoid(impl.alpha_pre * (x_norm @ impl.phi_pre) + impl.b_pre)
    post = 2 * torch.sigmoid(impl.alpha_post * (x_norm @ impl.phi_post) + impl.b_post)
    res_logits = impl.alpha_res * (x_norm @ impl.phi_res).reshape(2, 2, n, n) + impl.b_res
    h_pre, h_post, H_res = impl.weights(x)
    assert_close(h_pre, pre, 1e-12, "h_pre = σ(H̃_pre)ᵀ")
    assert_close(h_post, post, 1e-12, "h_post = 2σ(H̃_post)ᵀ")
    assert_close(H_res, _plain_sinkhorn(res_logits, 20), 1e-12, "H_res = SK(H̃_res)")


def test_mhc_permutation_logits_permute_the_streams() -> None:
    """H̃_res ≈ 40·P (P cyclic) makes H_res ≈ P: with F ≡ 0, X' = P X (rows of X permuted)."""
    n, d = 4, 8
    impl = mhc.make(n, d)
    perm = torch.eye(n, dtype=F64)[[1, 2, 3, 0]]                 # row i picks stream i+1
    with torch.no_grad():
        impl.alpha_res.zero_()
        impl.b_res.copy_(40 * perm)
    x = (torch.arange(1, n + 1, dtype=F64).reshape(1, 1, n, 1)).expand(1, 3, n, d).clone()
    out = impl(x, torch.zeros_like)
    assert_close(out[0, :, :, 0], torch.tensor([[2.0, 3.0, 4.0, 1.0]] * 3, dtype=F64), 1e-12,
                 "streams permuted by H_res")


def test_mhc_init_res_is_the_documented_closed_form() -> None:
    """At α_res = 0, b_res = 4I: exp(b_res) = (e⁴−1)I + 11ᵀ is a scaled doubly stochastic
    matrix, so Sinkhorn gives ((e⁴−1)I + 11ᵀ)/(e⁴+n−1) exactly."""
    n = 4
    impl = mhc.make(n, 3)
    with torch.no_grad():
        impl.alpha_res.zero_()
    _, _, H_res = impl.weights(state((1, 2, n, 3), seed=21))
    e4 = math.exp(mhc.INIT_RES_DIAGONAL)
    want = ((e4 - 1) * torch.eye(n, dtype=F64) + torch.ones(n, n, dtype=F64)) / (e4 + n - 1)
    assert_close(H_res, want.expand(1, 2, n, n), 1e-14, "init H_res")


# --- constraints ------------------------------------------------------------------------------

@pytest.mark.parametrize(("logit_std", "column_bound"), [(1.0, 1e-5), (3.0, 0.2)])
def test_mhc_H_res_doubly_stochastic(logit_std: float, column_bound: float) -> None:
    """Rows exact (last step), columns within the 20-round convergence error, entries ≥ 0."""
    n, d = 4, 6
    impl = mhc.make(n, d, seed=22)
    with torch.no_grad():
        impl.alpha_res.fill_(logit_std)           # x' φ_res has unit variance per entry
        impl.b_res.zero_()
    _, _, H_res = impl.weights(state((3, 5, n, d), seed=23))
    assert (H_res >= 0).all()
    assert_close(H_res.sum(-1), torch.ones(3, 5, n, dtype=F64), 1e-13, "row sums")
    assert_close(H_res.sum(-2), torch.ones(3, 5, n, dtype=F64), column_bound, "column sums")


def test_sinkhorn_2x2_limit_closed_form() -> None:
    """For 2×2 positive M the Sinkhorn limit is [[a,1−a],[1−a,a]], a = √r/(1+√r),
    r = M₁₁M₂₂/(M₁₂M₂₁) (the diagonal-scaling invariant cross ratio)."""
    logits = torch.tensor([[0.3, -1.2], [0.7, 1.1]], dtype=F64)
    r = math.exp(0.3 + 1.1 - (-1.2) - 0.7)
    a = math.sqrt(r) / (1 + math.sqrt(r))
    want = torch.tensor([[a, 1 - a], [1 - a, a]], dtype=F64)
    assert_close(sinkhorn_knopp(logits, 60), want, 1e-14, "2x2 Sinkhorn limit")


@pytest.mark.parametrize("scale", [1e2, 1e4, 1e30])
def test_sinkhorn_huge_logits_finite_no_dropped_stream(scale: float) -> None:
    n = 5
    logits = (scale * state((4, n, n), seed=24)).requires_grad_(True)
    H = sinkhorn_knopp(logits)
    assert torch.isfinite(H).all() and (H >= 0).all()
    assert_close(H.sum(-1), torch.ones(4, n, dtype=F64), 1e-12, "rows exact")
    assert (H.sum(-2) >= 1 / n - 1e-12).all(), "a column (stream) was dropped"
    (grad,) = torch.autograd.grad((H * state((4, n, n), seed=25)).sum(), logits)
    assert torch.isfinite(grad).all()


def test_mhc_huge_parameters_give_finite_weights_and_gradients() -> None:
    """Stress Sinkhorn through the weight-generating parameters (the input is normalised)."""
    n, d = 4, 5
    impl = mhc.make(n, d, seed=26)
    with torch.no_grad():
        impl.alpha_res.fill_(1e6)
        impl.alpha_pre.fill_(1e6)
        impl.alpha_post.fill_(1e6)
    x = state((2, 3, n, d), seed=27).requires_grad_(True)
    out = impl(x, make_branch(d, seed=28))
    h_pre, h_post, H_res = impl.weights(x)
    assert torch.isfinite(out).all()
    assert ((h_pre >= 0) & (h_pre <= 1)).all() and ((h_post >= 0) & (h_post <= 2)).all()
    assert (H_res.sum(-2) >= 1 / n - 1e-12).all()
    out.square().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in impl.parameters())


def test_mhc_ranges_open_intervals() -> None:
    impl = perturb(mhc.make(4, 6, seed=29), seed=30)
    h_pre, h_post, _ = impl.weights(state((3, 4, 4, 6), seed=31))
    assert ((h_pre > 0) & (h_pre < 1)).all(), "H_pre must lie in (0, 1)"
    assert ((h_post > 0) & (h_post < 2)).all(), "H_post must lie in (0, 2)"
    assert h_post.max() > 1, "H_post uses 2σ: values above 1 must be reachable"


def test_mhc_mixing_preserves_stream_sum_and_is_non_expansive() -> None:
    n, d = 4, 6
    impl = perturb(mhc.make(n, d, seed=32), seed=33)
    x = state((2, 3, n, d), seed=34)
    out = impl(x, torch.zeros_like)                          # F ≡ 0 leaves H_res X
    H_res = impl.weights(x)[2].detach()
    column_sums = H_res.sum(-2)                              # [B, T, n]; rows are exact
    column_error = (column_sums - 1).abs().amax(-1, keepdim=True)
    # |1ᵀHX − 1ᵀX| ≤ max_j |(1ᵀH)_j − 1| · Σ_j |X_j|  (per feature)
    drift = (out.sum(-2) - x.sum(-2)).abs()
    assert (drift <= column_error * x.abs().sum(-2) + 1e-13).all(), "stream sum not preserved"
    assert float(column_error.max()) < 0.05
    # ‖H‖₂ ≤ sqrt(‖H‖₁ ‖H‖_∞) = sqrt(max column sum · 1): non-expansive up to the column error
    gain = column_sums.amax(-1, keepdim=True).sqrt()
    assert (out.norm(dim=-2) <= gain * x.norm(dim=-2) + 1e-13).all(), "mixing expands"


# --- gradcheck ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(KINDS))
def test_gradcheck_inputs_and_parameters(kind: str) -> None:
    n, d = 3, 2
    impl = perturb(KINDS[kind].make(n, d, layer_index=1, seed=35), seed=36)
    names = [name for name, _ in impl.named_parameters()]
    leaves = [p.detach().clone().requires_grad_(True) for p in impl.parameters()]
    x = state((2, 2, n, d), seed=37).requires_grad_(True)
    branch = make_branch(d, seed=38)

    def run(x_: Tensor, *params: Tensor) -> Tensor:
        out: Tensor = torch.func.functional_call(
            impl, dict(zip(names, params, strict=True)), (x_, branch))
        return out

    assert torch.autograd.gradcheck(run, (x, *leaves), eps=1e-6, atol=1e-7, rtol=1e-5)


# --- reductions -----------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 4])
def test_static_init_is_eq_14(n: int) -> None:
    for k in range(6):
        impl = hc_static.make(n, 3, layer_index=k)
        h_pre, h_post, H_res = impl.weights(state((1, 2, n, 3), seed=k))
        assert h_pre[0, 0].tolist() == torch.eye(n, dtype=F64)[k % n].tolist()
        assert h_post[0, 0].tolist() == [1.0] * n
        assert H_res[0, 0].tolist() == torch.eye(n, dtype=F64).tolist()


@pytest.mark.parametrize("kind", ["hc-static", "hc-dynamic"])
@pytest.mark.parametrize("n", [1, 3])
def test_fresh_stack_is_a_pre_norm_residual_network(kind: str, n: int) -> None:
    """expand → 5 fresh sublayers (layer_index 0..4) → reduce  ==  n · pre-norm residual stack."""
    d, layers = 4, 5
    blocks = [make_branch(d, seed=40 + k) for k in range(layers)]

    def pre_norm(f: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
        return lambda h: f(F.layer_norm(h, (d,)))

    h0 = state((2, 3, d), seed=39)
    impls = [KINDS[kind].make(n, d, layer_index=k) for k in range(layers)]
    x = impls[0].expand(h0)
    h = h0
    for impl, f in zip(impls, blocks, strict=True):
        x = impl(x, pre_norm(f))
        h = h + pre_norm(f)(h)
    assert_close(impls[-1].reduce(x), n * h, 1e-12, "reduce(HC stack) vs n·pre-norm")
    if kind == "hc-static":     # every stream holds exactly h₀ + Σ outputs
        assert_close(x, h.unsqueeze(-2).expand_as(x), 1e-12, "each stream = pre-norm state")


def test_n1_unit_weights_is_pre_norm_residual_forward_and_backward() -> None:
    """n = 1, h_pre = h_post = H_res = [1]: x' = x + F(x), g_x = g' + Jᵀ g'."""
    d = 4
    impl = hc_static.make(1, d)
    f = make_branch(d, seed=44)
    x = state((2, 3, 1, d), seed=45).requires_grad_(True)
    g = state((2, 3, 1, d), seed=46)
    out = impl(x, f)
    assert_close(out, x + f(x[:, :, 0]).unsqueeze(-2), 1e-14, "x + F(x)")
    (gx,) = torch.autograd.grad((out * g).sum(), x)
    _, jt_g = vjp(f, x.detach()[:, :, 0], g[:, :, 0])
    assert_close(gx, g + jt_g.unsqueeze(-2), 1e-14, "g' + Jᵀ g'")


@pytest.mark.parametrize(("n", "layer_index"), [(1, 0), (3, 4), (4, 2)])
def test_dynamic_at_init_equals_static(n: int, layer_index: int) -> None:
    d = 5
    dyn = hc_dynamic.make(n, d, layer_index=layer_index)
    sta = hc_static.make(n, d, layer_index=layer_index)
    x = state((2, 3, n, d), seed=47)
    for got, want in zip(dyn.weights(x), sta.weights(x), strict=True):
        assert torch.equal(got, want)
    f = make_branch(d, seed=48)
    assert torch.equal(dyn(x, f), sta(x, f))


def test_mhc_n1_H_res_is_exactly_one() -> None:
    impl = perturb(mhc.make(1, 3), seed=49)
    _, _, H_res = impl.weights(state((2, 2, 1, 3), seed=50))
    assert torch.equal(H_res, torch.ones(2, 2, 1, 1, dtype=F64))


# --- independence, state, expand/reduce, dtypes ----------------------------------------

@pytest.mark.parametrize("kind", list(KINDS))
def test_batch_and_token_independence(kind: str) -> None:
    n, d = 3, 4
    impl = perturb(KINDS[kind].make(n, d, seed=51), seed=52)
    f = make_branch(d, seed=53)
    x = state((3, 4, n, d), seed=54)
    base = impl(x, f)
    y = x.clone()
    y[1] += 5.0                                   # another batch element
    y[0, 2] -= 3.0                                # another token of batch element 0
    changed = impl(y, f)
    assert torch.equal(changed[2], base[2])
    assert torch.equal(changed[0, [0, 1, 3]], base[0, [0, 1, 3]])


@pytest.mark.parametrize("kind", list(KINDS))
def test_forward_leaves_input_and_parameters_unchanged(kind: str) -> None:
    impl = perturb(KINDS[kind].make(2, 3, seed=55), seed=56)
    before = {k: v.clone() for k, v in impl.state_dict().items()}
    x = state((2, 2, 2, 3), seed=57)
    x_copy = x.clone()
    first = impl(x, make_branch(3, seed=58))
    assert torch.equal(x, x_copy)
    assert all(torch.equal(v, before[k]) for k, v in impl.state_dict().items())
    assert torch.equal(impl(x, make_branch(3, seed=58)), first)


def test_expand_replicates_and_reduce_sums() -> None:
    impl = hc_static.make(3, 4)
    h = state((2, 5, 4), seed=59)
    x = impl.expand(h)
    assert x.shape == (2, 5, 3, 4)
    for i in range(3):
        assert torch.equal(x[:, :, i], h)
    x[:, :, 0] += 1.0
    assert not torch.equal(x[:, :, 0], h), "expand must return a fresh tensor"
    assert torch.equal(impl1 := hc_static.make(1, 4).expand(h)[:, :, 0], h) and impl1 is not h
    y = state((2, 5, 3, 4), seed=60)
    assert_close(impl.reduce(y), y[:, :, 0] + y[:, :, 1] + y[:, :, 2], 1e-15, "reduce = sum")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mhc_low_precision_close_to_float64(dtype: torch.dtype) -> None:
    n, d = 4, 8
    ref = perturb(mhc.make(n, d, seed=61), seed=62)
    low = mhc.make(n, d, seed=61, dtype=dtype)
    low.load_state_dict({k: v.to(dtype) for k, v in ref.state_dict().items()})
    x = state((2, 3, n, d), seed=63)
    out64 = ref(x, make_branch(d, seed=64))
    out_low = low(x.to(dtype), make_branch(d, seed=64, dtype=dtype))
    assert out_low.dtype == dtype
    # relative to max |out|: a few units of the dtype's eps (bf16 eps = 2⁻⁷; measured 7e-3 and,
    # for float32, 2e-7) — the branch itself also runs in the low dtype
    eps = torch.finfo(dtype).eps
    assert_close(out_low, out64, 4 * eps * float(out64.detach().abs().max()), f"{dtype} vs float64")
    _, _, H_res = low.weights(x.to(dtype))
    # weights are made in float32 and rounded once to the dtype: ≤ n half-ulps per row sum
    assert_close(H_res.sum(-1), torch.ones(2, 3, n, dtype=F64), n * eps, "rows after the cast")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_dynamic_norm_of_constant_streams_is_finite(dtype: torch.dtype) -> None:
    """Regression (found by the conformance kit, dtype.low_precision): with d = 1 (or any
    constant stream) the centred stream is exactly 0 and, once eps/scale² underflowed in
    float16, the normalisation computed 0·inf = NaN. H̄ of a constant stream must be 0."""
    n, d = 2, 1
    impl = hc_dynamic.make(n, d, dtype=dtype)
    big = 1e20 if dtype == torch.float32 else 19.5
    x = torch.tensor([-10.58, big], dtype=F64).reshape(1, 1, n, d).to(dtype)
    assert torch.equal(hc_dynamic.normalise_columns(x.transpose(-1, -2)), torch.zeros(1, 1, d, n,
                                                                                       dtype=dtype))
    out = impl(x, torch.zeros_like)
    assert torch.isfinite(out).all()
    assert torch.equal(out, x), "at init with F ≡ 0 the state passes through unchanged"


# --- bad input ----------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(KINDS))
def test_bad_input_raises_clear_errors(kind: str) -> None:
    make = KINDS[kind].make
    impl = make(3, 4)
    good = state((2, 2, 3, 4), seed=65)
    with pytest.raises(ValueError, match=r"expected shape \[B, T, n=3, d=4\], got \(2, 2, 4, 3\)"):
        impl(good.transpose(-1, -2), torch.zeros_like)
    with pytest.raises(ValueError, match=r"got \(2, 3, 4\)"):
        impl.weights(good[:, 0])
    with pytest.raises(ValueError, match=r"expected dtype torch\.float64.*got torch\.float32"):
        impl(good.float(), torch.zeros_like)
    with pytest.raises(ValueError, match=r"branch output: expected shape \(2, 2, 4\)"):
        impl(good, lambda h: h[..., :2])
    with pytest.raises(TypeError, match=r"branch output: expected a torch\.Tensor"):
        impl(good, lambda h: (h,))
    with pytest.raises(TypeError, match="branch: expected a callable"):
        impl(good, None)
    with pytest.raises(ValueError, match=r"h: expected shape \[B, T, d=4\]"):
        impl.expand(good)
    with pytest.raises(ValueError, match="n: expected an integer >= 1, got 0"):
        make(0, 4)
    with pytest.raises(ValueError, match="d: expected an integer >= 1, got -2"):
        make(3, -2)
    with pytest.raises(ValueError, match="layer_index: expected an integer >= 0"):
        make(3, 4, layer_index=-1)
    with pytest.raises(ValueError, match="dtype: expected one of"):
        make(3, 4, dtype=torch.int64)
    with pytest.raises(TypeError, match="n: expected int, got float"):
        make(3.0, 4)


def test_sinkhorn_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="iterations: expected >= 1, got 0"):
        sinkhorn_knopp(torch.zeros(3, 3), 0)
    with pytest.raises(ValueError, match=r"expected shape \[\.\.\., n, n\], got \(3, 2\)"):
        log_sinkhorn_knopp(torch.zeros(3, 2))
    with pytest.raises(TypeError, match="floating-point"):
        sinkhorn_knopp(torch.zeros(3, 3, dtype=torch.int64))
