"""The three connections against the spec's closed forms (hcspec.spec.numeric), in float64 to 1e-10.

Every module is perturbed first (static init hides transposes). For each one the test reads
the module's own reported weights, then checks

* forward: ``module(x, F)`` equals ``spec.forward(X, h_post, H_res, F(spec.aggregate(X, h_pre)))``;
* backward with the weights held fixed: autograd's gradients w.r.t. X and the three effective
  weights (with ``g_in`` taken from autograd on the branch) equal ``spec.backward``;
* the module's full backward: ``dL/dX`` = spec's bypass + branch terms + the vector–Jacobian
  product of the weight generator with spec's weight gradients, and the same for parameters.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import nn

from hcspec.reference import (
    DynamicHyperConnection,
    HyperConnection,
    ManifoldHyperConnection,
    StaticHyperConnection,
    apply_connection,
)
from hcspec.spec import numeric

TOL = 1e-10
B, T, D = 2, 3, 5
KINDS: dict[str, Callable[[int, int], HyperConnection]] = {
    "hc-static": lambda n, k: StaticHyperConnection(n, D, k, dtype=torch.float64),
    "hc-dynamic": lambda n, k: DynamicHyperConnection(n, D, k, dtype=torch.float64),
    "mhc": lambda n, k: ManifoldHyperConnection(n, D, k, dtype=torch.float64),
}


class Branch(nn.Module):
    """A nonlinear branch that also mixes tokens (causal cumulative sum)."""

    def __init__(self, d: int, seed: int = 7) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w1 = nn.Parameter(torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5)
        self.w2 = nn.Parameter(torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5)
        self.calls = 0

    def forward(self, x_in: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return torch.tanh(x_in @ self.w1) @ self.w2 + 0.3 * x_in.cumsum(dim=1)


def _state(n: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, n, D, generator=g, dtype=torch.float64)


def _module(kind: str, n: int, layer_index: int, perturb: Callable[..., nn.Module]) -> nn.Module:
    module = KINDS[kind](n, layer_index)
    perturb(module, 0.5, seed=n + 10 * layer_index)
    return module


CASES = [(kind, n, k) for kind in KINDS for n in (1, 2, 4) for k in (0, 5)]
IDS = [f"{kind}-n{n}-k{k}" for kind, n, k in CASES]


@pytest.mark.parametrize(("kind", "n", "layer_index"), CASES, ids=IDS)
def test_forward_equals_spec(kind: str, n: int, layer_index: int, perturb, as_numpy) -> None:
    module = _module(kind, n, layer_index, perturb)
    branch, x = Branch(D), _state(n)
    out = module(x, branch)
    assert branch.calls == 1
    h_pre, h_post, H_res = (as_numpy(w) for w in module.weights(x))
    x_in = numeric.aggregate(as_numpy(x), h_pre)
    z = as_numpy(branch(torch.from_numpy(x_in)))
    expected = numeric.forward(as_numpy(x), h_post, H_res, z)
    np.testing.assert_allclose(as_numpy(out), expected, rtol=0, atol=TOL)


@pytest.mark.parametrize(("kind", "n", "layer_index"), CASES, ids=IDS)
def test_fixed_weight_backward_equals_spec(
    kind: str, n: int, layer_index: int, perturb, as_numpy
) -> None:
    module = _module(kind, n, layer_index, perturb)
    branch = Branch(D)
    x = _state(n).requires_grad_(True)
    weights = [w.detach().clone().requires_grad_(True) for w in module.weights(x)]
    seen: dict[str, torch.Tensor] = {}

    def recording_branch(x_in: torch.Tensor) -> torch.Tensor:
        x_in.retain_grad()
        z = branch(x_in)
        z.retain_grad()
        seen.update(x_in=x_in, z=z)
        return z

    out = apply_connection(x, recording_branch, *weights)
    G = torch.randn(out.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    out.backward(G)
    h_pre, h_post, H_res = (as_numpy(w) for w in weights)
    g_in = seen["x_in"].grad
    assert g_in is not None and seen["z"].grad is not None
    np.testing.assert_allclose(
        as_numpy(seen["z"].grad), numeric.branch_cotangent(as_numpy(G), h_post), rtol=0, atol=TOL
    )
    spec = numeric.backward(
        as_numpy(G), as_numpy(x), h_pre, h_post, H_res, as_numpy(seen["z"]), as_numpy(g_in)
    )
    for name, got, expected in (
        ("X", x.grad, spec.X),
        ("h_pre", weights[0].grad, spec.h_pre),
        ("h_post", weights[1].grad, spec.h_post),
        ("H_res", weights[2].grad, spec.H_res),
    ):
        assert got is not None, name
        np.testing.assert_allclose(as_numpy(got), expected, rtol=0, atol=TOL, err_msg=name)


@pytest.mark.parametrize(("kind", "n", "layer_index"), CASES, ids=IDS)
def test_module_backward_equals_spec_plus_weight_generator(
    kind: str, n: int, layer_index: int, perturb, as_numpy
) -> None:
    module = _module(kind, n, layer_index, perturb)
    branch = Branch(D)
    x = _state(n).requires_grad_(True)
    G = torch.randn(B, T, n, D, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    module(x, branch).backward(G)
    assert x.grad is not None

    # Spec side: the connection's closed form at the module's weights; g_in from autograd.
    weights = module.weights(x)
    h_pre, h_post, H_res = (as_numpy(w) for w in weights)
    x_in = torch.from_numpy(numeric.aggregate(as_numpy(x), h_pre)).requires_grad_(True)
    z = branch(x_in)
    g_z = torch.from_numpy(numeric.branch_cotangent(as_numpy(G), h_post))
    (g_in,) = torch.autograd.grad(z, x_in, g_z)
    spec = numeric.backward(
        as_numpy(G), as_numpy(x), h_pre, h_post, H_res, as_numpy(z), as_numpy(g_in)
    )
    weight_grads = tuple(torch.from_numpy(g) for g in (spec.h_pre, spec.h_post, spec.H_res))

    # Chain rule through the weight generator (zero for static HC: weights do not see X).
    params = list(module.parameters())
    through_weights = torch.autograd.grad(
        weights, [x, *params], weight_grads, allow_unused=True, materialize_grads=True
    )
    expected_x = spec.X + as_numpy(through_weights[0])
    np.testing.assert_allclose(as_numpy(x.grad), expected_x, rtol=0, atol=TOL)
    for p, expected in zip(params, through_weights[1:], strict=True):
        assert p.grad is not None
        np.testing.assert_allclose(as_numpy(p.grad), as_numpy(expected), rtol=0, atol=TOL)
    if kind == "hc-static":
        assert np.abs(as_numpy(through_weights[0])).max() == 0.0
        assert isinstance(module, StaticHyperConnection)
        for p, g in ((module.h_pre, spec.h_pre), (module.h_post, spec.h_post),
                     (module.H_res, spec.H_res)):
            assert p.grad is not None
            np.testing.assert_allclose(as_numpy(p.grad), g.sum(axis=(0, 1)), rtol=0, atol=TOL)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("n", "d"), [(1, 3), (2, 5), (4, 7)])
def test_parameter_count_is_the_specs(kind: str, n: int, d: int) -> None:
    """The reference modules' parameters, counted with ``numel``, are the spec's per-module
    count (an independent count of the formulas in hcspec.spec.counts)."""
    from hcspec.spec import counts

    classes = {"hc-static": StaticHyperConnection, "hc-dynamic": DynamicHyperConnection,
               "mhc": ManifoldHyperConnection}
    module = classes[kind](n, d, 0, dtype=torch.float64)
    assert module.kind == kind
    assert sum(p.numel() for p in module.parameters()) == counts.params_per_module(kind, n, d)
