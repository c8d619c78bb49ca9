"""The parts of a property run: building, inputs, observing (recording: test_shape.py)."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance.machinery.base import PropertyFailure
from hcspec.conformance.machinery.building import Builder, floating_parameters
from hcspec.conformance.machinery.errors import FactoryRejected
from hcspec.conformance.machinery.inputs import Inputs
from hcspec.conformance.machinery.observing import Observer
from hcspec.conformance.protocol import Conventions
from hcspec.conformance.strategies import Case
from hcspec.spec import numeric
from tests.conformance.properties.support import factory


def test_builder_perturbs_reproducibly_and_aligns_across_dtypes() -> None:
    build = Builder(factory("reference:mhc"), torch.float64, "cpu")
    case = Case(2, 3, 4, 8, seed=3, perturb=0.3)
    a, b = build.make(case), build.make(case)
    at_init = build.make(case, perturb=False)
    pa, pb, p0 = (floating_parameters(i) for i in (a, b, at_init))
    assert all(torch.equal(x, y) for x, y in zip(pa, pb, strict=True))
    assert any(not torch.equal(x, y) for x, y in zip(pa, p0, strict=True))
    low = build.make(case, dtype=torch.float32, perturb=False)
    build.align(a, low)
    assert all(torch.allclose(x.double(), y.double(), atol=1e-6)
               for x, y in zip(pa, floating_parameters(low), strict=True))


def test_builder_records_a_rejected_configuration() -> None:
    def refuse(n: int, d: int, **kwargs: object) -> object:
        raise ValueError("only n=4")

    build = Builder(refuse, torch.float64, "cpu")
    with pytest.raises(FactoryRejected, match="only n=4"):
        build.make(Case())
    assert len(build.rejected) == 1 and "ValueError: only n=4" in build.rejected[0]


def test_inputs_follow_the_declared_state_domain() -> None:
    case = Case(2, 3, 4, 8, seed=1)
    free, replicated = Inputs(torch.float64, "cpu"), Inputs(torch.float64, "cpu", True)
    x = replicated.state(case)
    assert torch.equal(x, x[..., :1, :].expand_as(x))
    assert not torch.equal(free.state(case)[..., 0, :], free.state(case)[..., 1, :])
    branch = free.branch(case)
    branch(torch.zeros(2, 3, 8, dtype=torch.float64))
    with pytest.raises(PropertyFailure, match=r"received tensor \[6, 8\]"):
        branch(torch.zeros(6, 8, dtype=torch.float64))


def test_observer_refuses_weights_of_the_wrong_shape() -> None:
    class Flat:
        n, d, kind = 2, 3, "mhc"

        def weights(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return torch.ones(2), torch.ones(2), torch.eye(2)

        def forward(self, x: torch.Tensor, branch: object) -> torch.Tensor:
            return x

    x = torch.zeros(1, 1, 2, 3, dtype=torch.float64)
    with pytest.raises(PropertyFailure, match=r"h_pre has shape \[2\], expected \[1, 1, 2\]"):
        Observer(Conventions()).weights(Flat(), x)  # type: ignore[arg-type]
    assert Observer(Conventions(branch_input="rms_norm")).branch_input(
        torch.full((1, 3), 2.0, dtype=torch.float64)).pow(2).mean().item() == pytest.approx(
            1.0, abs=1e-5)


@pytest.mark.parametrize("name", ["rms_norm", "layer_norm"])
def test_observer_branch_input_is_the_spec_norm(name: str) -> None:
    # the kit keeps a torch copy of the norm (its gradients go through autograd); it must be the
    # spec's formula, not a re-typed variant
    x = torch.randn(3, 5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    eps = 1e-3
    got = Observer(Conventions(branch_input=name, norm_eps=eps)).branch_input(x)
    want = getattr(numeric, name)(x.numpy(), eps)
    assert torch.allclose(got, torch.from_numpy(want), rtol=0, atol=1e-13)
    assert not torch.allclose(got, x)
