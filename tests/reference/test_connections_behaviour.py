"""Connections: gradcheck, the n = 1 reduction, dtypes, devices, bad input, NaN/inf, state."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.func import functional_call

from hcspec.reference import (
    DynamicHyperConnection,
    HyperConnection,
    ManifoldHyperConnection,
    StaticHyperConnection,
)

D = 5
FACTORIES: dict[str, Callable[..., HyperConnection]] = {
    "hc-static": lambda n, d=D, **kw: StaticHyperConnection(n, d, 1, **kw),
    "hc-dynamic": lambda n, d=D, **kw: DynamicHyperConnection(n, d, 1, **kw),
    "mhc": lambda n, d=D, **kw: ManifoldHyperConnection(n, d, 1, **kw),
}
KINDS = list(FACTORIES)


Fn = Callable[[torch.Tensor], torch.Tensor]


def _branch(d: int = D, dtype: torch.dtype = torch.float64) -> Fn:
    w = torch.randn(d, d, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    w = (w / d**0.5).to(dtype)
    return lambda x_in: torch.tanh(x_in @ w)


def _x(n: int, d: int = D, dtype: torch.dtype = torch.float64, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, n, d, generator=g, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("kind", KINDS)
def test_gradcheck_inputs_and_parameters(kind: str, perturb) -> None:
    n, d = 3, 4
    module = FACTORIES[kind](n, d, dtype=torch.float64)
    perturb(module, 0.5, seed=3)
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in module.parameters()]
    branch = _branch(d)
    x = torch.randn(1, 2, n, d, dtype=torch.float64, requires_grad=True)

    def f(x_: torch.Tensor, *ps: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = functional_call(module, dict(zip(names, ps, strict=True)), (x_, branch))
        return out

    assert torch.autograd.gradcheck(f, (x, *params))


@pytest.mark.parametrize("layer_index", [0, 3])
def test_n1_static_is_the_residual_forward_and_backward(layer_index: int) -> None:
    module = StaticHyperConnection(1, D, layer_index, dtype=torch.float64)
    branch = _branch()
    x = _x(1).requires_grad_(True)
    x_plain = x.detach()[:, :, 0, :].clone().requires_grad_(True)
    out = module(x, branch)
    ref = x_plain + branch(x_plain)
    torch.testing.assert_close(out[:, :, 0, :], ref, rtol=0, atol=1e-15)
    G = torch.randn(ref.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    out.backward(G.unsqueeze(-2))
    ref.backward(G)
    assert x.grad is not None and x_plain.grad is not None
    torch.testing.assert_close(x.grad[:, :, 0, :], x_plain.grad, rtol=0, atol=1e-15)
    # g_x = g' + Jᵀ g' and the unit weights' gradients are the spec's: Σ G∘X, Σ G∘z, Σ X∘g_in
    assert module.h_pre.grad is not None and module.h_pre.grad.abs().sum() > 0


@pytest.mark.parametrize("kind", KINDS)
def test_branch_called_once_with_the_aggregate_shape(kind: str) -> None:
    module = FACTORIES[kind](4, dtype=torch.float64)
    shapes: list[tuple[int, ...]] = []

    def branch(x_in: torch.Tensor) -> torch.Tensor:
        shapes.append(tuple(x_in.shape))
        return x_in.sin()

    out = module(_x(4), branch)
    assert shapes == [(2, 3, D)]
    assert out.shape == (2, 3, 4, D)


@pytest.mark.parametrize("kind", KINDS)
def test_input_and_parameters_unchanged_and_deterministic(kind: str, perturb) -> None:
    module = perturb(FACTORIES[kind](3, dtype=torch.float64))
    before = {k: v.clone() for k, v in module.state_dict().items()}
    x = _x(3)
    x_copy = x.clone()
    first = module(x, _branch())
    second = module(x, _branch())
    assert torch.equal(x, x_copy)
    assert torch.equal(first, second)
    for k, v in module.state_dict().items():
        assert torch.equal(v, before[k]), k


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_low_precision_close_to_float64(kind: str, dtype: torch.dtype, perturb) -> None:
    n = 4
    module64 = perturb(FACTORIES[kind](n, dtype=torch.float64), 0.3)
    module_lo = FACTORIES[kind](n, dtype=dtype)
    module_lo.load_state_dict(module64.state_dict())
    x = _x(n)
    expected = module64(x, _branch())
    got = module_lo(x.to(dtype), _branch(dtype=dtype))
    assert got.dtype == dtype
    assert all(w.dtype == dtype for w in module_lo.weights(x.to(dtype)))
    # measured worst error relative to the output scale: 0.4–1.4 eps (parameters, input and
    # every op rounded); 4 eps leaves a margin and still catches a wrong op or a lost cast
    tol = 4 * torch.finfo(dtype).eps * expected.abs().max().item()
    assert (got.double() - expected).abs().max().item() <= tol


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_input_stays_in_its_token(kind: str, bad: float, perturb) -> None:
    """The documented behaviour: no error; the token is poisoned, the other tokens are not.

    NaN spreads over the whole token (x_in sums all streams and 0·NaN = NaN). ±inf does too
    where the weights are computed from a normalised state (DHC's LayerNorm, mHC's RMSNorm
    turn it into NaN); in static HC it reaches the entries it touches (and their inf − inf).
    """
    module = perturb(FACTORIES[kind](3, dtype=torch.float64))
    x = _x(3)
    x[1, 2, 0, 4] = bad
    out = module(x, _branch())  # token-wise branch: tokens do not mix
    whole_token = math.isnan(bad) or kind != "hc-static"
    poisoned = ~torch.isfinite(out[1, 2])
    assert poisoned.all() if whole_token else poisoned[:, 4].all()
    keep = torch.ones(2, 3, dtype=torch.bool)
    keep[1, 2] = False
    assert torch.isfinite(out[keep]).all()


@pytest.mark.parametrize("kind", KINDS)
def test_bad_input_names_expected_and_received(kind: str) -> None:
    module = FACTORIES[kind](4, dtype=torch.float64)
    x = _x(4)
    with pytest.raises(ValueError, match=r"expected x of shape \[B, T, n=4, d=5\], got \(3, 4,"):
        module(x[0], _branch())
    with pytest.raises(ValueError, match=r"n=4, d=5\], got \(2, 3, 3, 5\)"):
        module(x[:, :, :3], _branch())
    with pytest.raises(ValueError, match=r"n=4, d=5\], got \(2, 3, 4, 6\)"):
        module(torch.zeros(2, 3, 4, 6, dtype=torch.float64), _branch())
    with pytest.raises(ValueError, match=r"got \(2, 3, 4, 5, 1\)"):
        module.weights(x.unsqueeze(-1))
    with pytest.raises(ValueError, match=r"\[B, T, d\] = \(2, 3, 5\), got \(2, 3, 4, 5\)"):
        module(x, lambda x_in: x_in.unsqueeze(-2).expand(2, 3, 4, 5))
    with pytest.raises(ValueError, match=r"\(2, 3, 5\), got \(3, 5\)"):
        module(x, lambda x_in: x_in[0])
    with pytest.raises(TypeError, match=r"branch output must be a torch\.Tensor, got ndarray"):
        module(x, lambda x_in: x_in.detach().numpy())
    with pytest.raises(TypeError, match=r"dtype torch\.float32 but the module's parameters are"):
        module(x.float(), _branch())
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor"):
        module([[1.0]], _branch())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("n", "d"), [(0, 4), (2, 0), (-1, 4), (2.0, 4)])
def test_bad_sizes_rejected(kind: str, n: object, d: object) -> None:
    with pytest.raises(ValueError, match="must be a positive integer"):
        FACTORIES[kind](n, d)


def test_bad_layer_index_and_options_rejected() -> None:
    with pytest.raises(ValueError, match="layer_index must be a non-negative integer, got -1"):
        StaticHyperConnection(2, 4, -1)
    with pytest.raises(ValueError, match="sinkhorn_iterations must be a positive integer"):
        ManifoldHyperConnection(2, 4, sinkhorn_iterations=0)
    with pytest.raises(ValueError, match=r"diagonal must lie in \(0, 1\)"):
        ManifoldHyperConnection(2, 4, res_init_diagonal=1.0)
    with pytest.raises(ValueError, match="norm_eps must be > 0"):
        DynamicHyperConnection(2, 4, 0, norm_eps=0.0)


def test_protocol_attributes() -> None:
    for kind, factory in FACTORIES.items():
        module = factory(3, 7)
        assert (module.n, module.d, module.kind) == (3, 7, kind)
        assert isinstance(module, nn.Module)
    assert ManifoldHyperConnection(3, 7, sinkhorn_iterations=9).sinkhorn_iterations == 9


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device available")


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_cuda_matches_cpu(kind: str, dtype: torch.dtype, perturb) -> None:
    cpu = perturb(FACTORIES[kind](4, dtype=dtype))
    gpu = FACTORIES[kind](4, dtype=dtype, device="cuda")
    gpu.load_state_dict(cpu.state_dict())
    assert all(p.device.type == "cuda" for p in gpu.parameters())
    x = _x(4, dtype=dtype)
    expected = cpu(x, _branch(dtype=dtype))
    w = torch.randn(D, D, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    w_gpu = (w / D**0.5).to(dtype=dtype, device="cuda")
    got = gpu(x.cuda(), lambda x_in: torch.tanh(x_in @ w_gpu))
    assert got.device.type == "cuda" and got.dtype == dtype
    tol = 1e-10 if dtype == torch.float64 else 4 * torch.finfo(dtype).eps * 4
    torch.testing.assert_close(got.cpu(), expected, rtol=tol, atol=tol)
