"""Determinism family: repeated eval-mode forwards and backwards are bitwise equal, or the
declared non-deterministic impl's spread is recorded."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hcspec.conformance.families import BY_ID
from hcspec.conformance.machinery.base import Context, PropertyFailure
from hcspec.conformance.profiles import get_profile
from hcspec.conformance.protocol import HyperConnectionImpl
from hcspec.conformance.run.inspection import inspect_target
from hcspec.reference import ManifoldHyperConnection
from tests.conformance.properties.support import context, factory, run
from tests.mutants._base import build, mhc_conventions


@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-static",
                                    "reference:mhc-fast"])
def test_reference_passes(target: str) -> None:
    ctx = run("determinism.forward_backward", target)
    assert ctx.worst.error == 0.0


def test_a_backward_accumulated_in_a_changing_order_fails() -> None:
    with pytest.raises(PropertyFailure, match=r"pass \d differs from pass 1 in ∂L/∂x"):
        run("determinism.forward_backward", "mutant:backward_atomic_order")


def test_declared_non_determinism_records_the_spread() -> None:
    ctx = context("mutant:backward_atomic_order")
    ctx.conventions = dataclasses.replace(ctx.conventions, deterministic=False)
    prop = BY_ID["determinism.forward_backward"]
    prop.run(ctx, prop.examples(ctx)[0])
    assert "run-to-run spread (declared deterministic=False)" in ctx.worst.label
    assert 0.0 < ctx.worst.error < 1e-14


class _OutputShapeChanges(ManifoldHyperConnection):
    """Drops the last token from the second call on (a cache that shortens the output)."""

    calls = 0

    def forward(self, x, branch):  # type: ignore[no-untyped-def,override]
        self.calls += 1
        out = super().forward(x, branch)
        return out if self.calls == 1 else out[:, :-1]


class _ParameterUsedOnce(ManifoldHyperConnection):
    """Adds ``0 · extra`` on the first call only, so ∂L/∂extra is zeros in pass 1 and absent
    (None) in the passes after it."""

    calls = 0

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.extra = torch.nn.Parameter(torch.zeros((), dtype=torch.float64))

    def forward(self, x, branch):  # type: ignore[no-untyped-def,override]
        self.calls += 1
        out = super().forward(x, branch)
        return out + 0 * self.extra if self.calls == 1 else out


def _context_of(cls: type[torch.nn.Module]) -> Context:
    def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
        return build(cls, n, d, layer_index, dtype, device, seed, mhc_conventions())

    info = inspect_target(make, "cpu", 0)
    return Context(factory=make, target_name=cls.__name__, kind=info.kind,
                   conventions=info.conventions, capabilities=info.capabilities,
                   dtype=info.dtype, device="cpu", profile=get_profile("quick"))


def test_an_output_shape_that_changes_between_passes_is_a_verdict() -> None:
    """The second pass's shorter output is a verdict (not a broadcast error comparing it)."""
    ctx = _context_of(_OutputShapeChanges)
    prop = BY_ID["determinism.forward_backward"]
    with pytest.raises(PropertyFailure,
                       match=r"forward returned shape \[2, 2, 4, 8\], expected \[2, 3, 4, 8\]"):
        prop.run(ctx, prop.examples(ctx)[0])


def test_a_gradient_present_in_one_pass_only_is_named() -> None:
    ctx = _context_of(_ParameterUsedOnce)
    prop = BY_ID["determinism.forward_backward"]
    with pytest.raises(PropertyFailure,
                       match=r"pass 2 has no ∂L/∂\(parameter extra\) but pass 1 has one"):
        prop.run(ctx, prop.examples(ctx)[0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_noise_fails_unless_declared() -> None:
    """On CUDA too, run-to-run noise in the backward fails (it passed within the device
    tolerance there)."""
    make = factory("mutant:backward_atomic_order")
    info = inspect_target(make, "cuda", 0)
    ctx = Context(factory=make, target_name="mutant:backward_atomic_order", kind=info.kind,
                  conventions=info.conventions, capabilities=info.capabilities,
                  dtype=info.dtype, device="cuda", profile=get_profile("quick"))
    prop = BY_ID["determinism.forward_backward"]
    with pytest.raises(PropertyFailure, match=r"pass \d differs from pass 1 in ∂L/∂x"):
        prop.run(ctx, prop.examples(ctx)[0])


def test_an_output_without_autograd_graph_is_not_applicable_not_an_error() -> None:
    """Before: ``element 0 of tensors does not require grad`` (status error)."""
    from hcspec.conformance.outputs import report as rp
    from hcspec.conformance.run.session import check_implementation
    from tests.conformance import standins

    report = check_implementation(standins.make_no_graph, profile="quick", device="cpu",
                                  only=["determinism.forward_backward"])
    result = next(r for r in report.results if r.id == "determinism.forward_backward")
    assert result.status == rp.NOT_APPLICABLE, (result.status, result.message)
    assert "no autograd graph" in result.message and "forwards were compared" in result.message


class _NoGraphNoisy(torch.nn.Module):
    """A detached output that changes in its last bit on every call (a forward with
    run-to-run noise and no graph)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner, self.calls = inner, 0
        self.n, self.d, self.kind = inner.n, inner.d, inner.kind
        self.conventions = inner.conventions

    def forward(self, x, branch):  # type: ignore[no-untyped-def]
        self.calls += 1
        out = self.inner(x, branch).detach()
        return out * (1 + self.calls * torch.finfo(out.dtype).eps)


def test_a_forward_that_differs_without_graph_is_a_verdict() -> None:
    def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
        inner = build(ManifoldHyperConnection, n, d, layer_index, dtype, device, seed,
                      mhc_conventions())
        return _NoGraphNoisy(inner)  # type: ignore[arg-type,return-value]

    info = inspect_target(make, "cpu", 0)
    ctx = Context(factory=make, target_name="noisy", kind=info.kind,
                  conventions=info.conventions, capabilities=info.capabilities,
                  dtype=info.dtype, device="cpu", profile=get_profile("quick"))
    prop = BY_ID["determinism.forward_backward"]
    with pytest.raises(PropertyFailure, match=r"pass 2 differs from pass 1 in X'"):
        prop.run(ctx, prop.examples(ctx)[0])
