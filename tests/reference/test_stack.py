"""The reference stack (hcspec.reference.stack): the single pass with a carried pre-mix equals
running the sublayers one by one, reports the coefficients it used, and keeps every
sublayer's parameters trainable."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
import torch

from hcspec.reference import ManifoldHyperConnection, StaticHyperConnection, targets
from hcspec.reference.stack import HyperConnectionStack

FACTORIES = {"hc-static": targets.hc_static, "hc-dynamic": targets.hc_dynamic,
             "mhc": targets.mhc, "mhc-fast": targets.mhc_fast}


def _branches(d: int, layers: int) -> list[Callable[[torch.Tensor], torch.Tensor]]:
    gen = torch.Generator().manual_seed(7)
    weights = [torch.randn(d, d, generator=gen, dtype=torch.float64) / d ** 0.5
               for _ in range(layers)]
    return [lambda t, w=w: torch.tanh(t @ w) for w in weights]


def _perturbed(stack: HyperConnectionStack) -> HyperConnectionStack:
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in stack.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return stack


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("carry", [True, False])
def test_the_stack_equals_the_sublayers_built_by_the_factory_one_by_one(name: str,
                                                                         carry: bool) -> None:
    make = FACTORIES[name]
    first = make(3, 5, layer_index=2, seed=4)
    stack = first.stack(3, carry=carry)
    x = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    branches = _branches(5, 3)
    want = x
    for k in range(3):  # what the factory builds for layer_index + k, seed + k
        want = make(3, 5, layer_index=2 + k, seed=4 + k)(want, branches[k])
    torch.testing.assert_close(stack(x, branches), want, rtol=0, atol=1e-13)
    assert stack.sublayer(0) is first and stack.layers == 3
    assert [getattr(stack.sublayer(k), "layer_index", None) for k in range(3)] == [2, 3, 4]


@pytest.mark.parametrize("name", ["hc-dynamic", "mhc"])
def test_the_reported_coefficients_are_each_sublayers_on_its_input(name: str) -> None:
    stack = _perturbed(FACTORIES[name](3, 5, seed=1).stack(3))
    x = torch.randn(1, 3, 3, 5, dtype=torch.float64)
    branches = _branches(5, 3)
    used = stack.weights(x, branches)
    state = x
    for k, branch in enumerate(branches):
        module = stack.sublayer(k)
        for got, want in zip(used[k], module.weights(state), strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=1e-14)
        state = module(state, branch)
    torch.testing.assert_close(stack(x, branches), state, rtol=0, atol=1e-13)
    # the coefficients do change from sublayer to sublayer (the comparison above can fail)
    assert float((used[1][0] - used[0][0]).detach().abs().max()) > 1e-3


def test_each_branch_is_called_once_with_the_carried_pre_mix() -> None:
    stack = _perturbed(targets.mhc(2, 4, seed=0).stack(3))
    x = torch.randn(1, 2, 2, 4, dtype=torch.float64)
    seen: list[torch.Tensor] = []

    def branch(t: torch.Tensor) -> torch.Tensor:
        seen.append(t)
        return torch.sin(t)

    out = stack(x, [branch] * 3)
    assert len(seen) == 3
    state = x
    for k in range(3):  # the pre-mix carried into sublayer k is h_pre,kᵀ X_k
        h_pre = stack.sublayer(k).weights(state)[0]
        torch.testing.assert_close(seen[k], (h_pre.unsqueeze(-2) @ state).squeeze(-2),
                                   rtol=0, atol=1e-14)
        state = stack.sublayer(k)(state, torch.sin)
    torch.testing.assert_close(out, state, rtol=0, atol=1e-13)


def test_gradients_reach_every_sublayers_parameters_through_the_carried_coefficients() -> None:
    stack = _perturbed(targets.mhc(2, 4, seed=0).stack(3))
    x = torch.randn(1, 2, 2, 4, dtype=torch.float64)
    stack(x, _branches(4, 3)).square().sum().backward()
    for k in range(3):
        module = stack.sublayer(k)
        assert isinstance(module, ManifoldHyperConnection)
        assert module.phi_pre.grad is not None and float(module.phi_pre.grad.abs().max()) > 0
    assert len(list(stack.parameters())) == 3 * len(list(stack.sublayer(0).parameters()))


def test_a_module_built_directly_stacks_copies_of_itself() -> None:
    module = StaticHyperConnection(2, 3, 1, dtype=torch.float64)
    stack = module.stack(2)
    assert stack.sublayer(0) is module and stack.sublayer(1) is not module
    assert all(torch.equal(p, q) for p, q in zip(stack.sublayer(1).parameters(),
                                                 module.parameters(), strict=True))
    assert stack.sublayer(1).h_pre.data_ptr() != module.h_pre.data_ptr()


def test_bad_stacks_and_calls_are_refused() -> None:
    module = targets.mhc(2, 3)
    with pytest.raises(ValueError, match=r"layers"):
        module.stack(0)
    with pytest.raises(ValueError, match=r"at least one sublayer"):
        HyperConnectionStack([])
    with pytest.raises(ValueError, match=r"sublayer 1 has n=3"):
        HyperConnectionStack([module, targets.mhc(3, 3)])
    with pytest.raises(TypeError, match=r"expected a hyper-connection module"):
        HyperConnectionStack([module, torch.nn.Linear(2, 2)])  # type: ignore[list-item]
    stack = module.stack(2)
    x = torch.zeros(1, 1, 2, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"one branch per sublayer \(2\), got 1"):
        stack(x, [torch.sin])
    with pytest.raises(ValueError, match=r"expected x of shape \[B, T, n=2, d=3\]"):
        stack(torch.zeros(1, 2, 3), [torch.sin, torch.sin])
    with pytest.raises(IndexError, match=r"expected an int in 0 … 1"):
        stack.sublayer(2)


class _OwnForward(StaticHyperConnection):
    """A subclass whose forward is not the reference's (it scales the branch output)."""

    def forward(self, x: torch.Tensor, branch: Callable[[torch.Tensor], torch.Tensor],
                ) -> torch.Tensor:
        return super().forward(x, lambda t: 0.5 * branch(t))


def test_a_subclass_with_its_own_forward_is_stacked_through_that_forward() -> None:
    module = _OwnForward(2, 3, 0, dtype=torch.float64)
    stack = module.stack(2)
    assert not stack.carry and targets.mhc(2, 3).stack(2).carry
    x = torch.randn(1, 2, 2, 3, dtype=torch.float64)
    want = stack.sublayer(1)(module(x, torch.sin), torch.cos)
    torch.testing.assert_close(stack(x, [torch.sin, torch.cos]), want, rtol=0, atol=0)


class _WrappedForward(ManifoldHyperConnection):
    """A subclass whose forward wraps the reference's with ``functools.wraps`` (which copies the
    function's attributes) and changes what it computes."""

    @functools.wraps(ManifoldHyperConnection.forward)
    def forward(self, x: torch.Tensor, branch: Callable[[torch.Tensor], torch.Tensor],
                ) -> torch.Tensor:
        return super().forward(x, lambda t: 0.5 * branch(t))


def test_only_the_marked_forwards_are_carried_not_a_wrapper_of_one() -> None:
    assert targets.mhc(2, 3).stack(2).carry and targets.hc_dynamic(2, 3).stack(2).carry
    assert not _WrappedForward(2, 3, 0).stack(2).carry
