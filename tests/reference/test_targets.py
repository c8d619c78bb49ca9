"""hcspec.reference.targets: the kit-protocol factories."""

from __future__ import annotations

import pytest
import torch

from hcspec.reference.targets import TARGETS


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_factory_builds_the_kind_in_the_dtype(kind: str, dtype: torch.dtype) -> None:
    module = TARGETS[kind](3, 6, layer_index=4, dtype=dtype, device="cpu", seed=1)
    assert (module.kind, module.n, module.d, module.layer_index) == (kind, 3, 6, 4)
    assert all(p.dtype == dtype and p.device.type == "cpu" for p in module.parameters())
    x = torch.randn(2, 5, 3, 6).to(dtype)
    assert module(x, torch.tanh).shape == x.shape


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_seed_decides_the_parameters_and_leaves_the_global_rng_alone(kind: str) -> None:
    state = torch.random.get_rng_state()
    a = TARGETS[kind](4, 8, seed=3).state_dict()
    b = TARGETS[kind](4, 8, seed=3).state_dict()
    c = TARGETS[kind](4, 8, seed=4).state_dict()
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a[k], b[k]) for k in a)
    differs = any(not torch.equal(a[k], c[k]) for k in a)
    assert differs == (kind == "mhc")  # only mHC draws random parameters (φ)


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_modules_declare_their_conventions_as_a_plain_mapping(kind: str) -> None:
    from hcspec.conformance.protocol import Conventions, conventions_of

    module = TARGETS[kind](2, 3, seed=0)
    layout = {"mhc": "mhc-paper"}.get(kind, kind)  # the published parameterization it holds
    assert dict(module.conventions) == {
        "branch_input": "x_in", "reduce": "sum", "published": layout,
        "notes": "hcspec reference: branch receives x_in, reduce sums the streams"}
    rounds = 20 if kind == "mhc" else None  # mHC's rounds come from its attribute
    assert conventions_of(module) == Conventions(
        branch_input="x_in", reduce="sum", sinkhorn_iterations=rounds, published=layout,
        notes="hcspec reference: branch receives x_in, reduce sums the streams")
    h = torch.randn(1, 2, 3, dtype=torch.float64)
    torch.testing.assert_close(module.reduce(module.expand(h)), 2 * h)  # the declared sum
