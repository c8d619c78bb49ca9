"""Declared-conventions family: what an adapter declares holds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, cast

import pytest
import torch

from hcspec.conformance.families import BY_ID
from hcspec.conformance.machinery.base import Context, Inconclusive, PropertyFailure
from hcspec.conformance.profiles import get_profile
from hcspec.conformance.protocol import Conventions, HyperConnectionImpl, conventions_of
from hcspec.conformance.run.inspection import inspect_target
from hcspec.reference import ManifoldHyperConnection
from hcspec.reference.connection import apply_connection
from tests.conformance.properties.support import run, unmet
from tests.mutants._base import build, mhc_conventions


def test_reference_passes() -> None:
    for pid in ("conventions.declaration", "conventions.branch_input",
                "conventions.expand_replicates", "conventions.reduce_scale"):
        run(pid, "reference:mhc")


def test_reduce_that_sums_while_declaring_mean_fails() -> None:
    with pytest.raises(PropertyFailure, match="declared mean"):
        run("conventions.reduce_scale", "mutant:reduce_sum_declared_mean")


def test_expand_and_reduce_need_their_capability() -> None:
    assert unmet("conventions.expand_replicates", capabilities=frozenset()) is not None
    assert unmet("conventions.reduce_scale", capabilities=frozenset({"expand"})) is not None


class _RmsNormedInput(ManifoldHyperConnection):
    """A correct mHC that gives the branch ``u·rsqrt(mean(u²) + eps)`` (declared), with
    ``b_pre = −7`` on every stream: ``h_pre ≈ σ(−7) ≈ 9e-4``, so ``mean(u²)`` is near or
    below eps and the normalised input's mean square is well below 1."""

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        with torch.no_grad():
            self.b_pre.fill_(-7.0)

    def forward(self, x, branch):  # type: ignore[no-untyped-def,override]
        def normed(u: torch.Tensor) -> torch.Tensor:
            return branch(u * torch.rsqrt(u.square().mean(-1, keepdim=True) + EPS))

        h_pre, h_post, H_res = self._weights(self._check_state(x))
        return apply_connection(x, normed, h_pre, h_post, H_res)


class _WithoutWeights(torch.nn.Module):
    """Hides ``weights`` of the module it wraps (the forward is the same)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.n, self.d, self.kind = inner.n, inner.d, inner.kind
        self.conventions = inner.conventions

    def forward(self, x, branch):  # type: ignore[no-untyped-def]
        return self.inner(x, branch)


EPS = 1e-6
NORMED = Conventions(**{**mhc_conventions().__dict__, "branch_input": "rms_norm", "norm_eps": EPS})


def _normed(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
            device: str = "cpu", seed: int = 0) -> HyperConnectionImpl:
    return build(_RmsNormedInput, n, d, layer_index, dtype, device, seed, NORMED)


def _normed_hidden(n: int, d: int, **kwargs: Any) -> HyperConnectionImpl:
    inner = cast(torch.nn.Module, _normed(n, d, **kwargs))
    return cast(HyperConnectionImpl, _WithoutWeights(inner))


def _run_on(make: Callable[..., HyperConnectionImpl]) -> Context:
    info = inspect_target(make, "cpu", 0)
    ctx = Context(factory=make, target_name="normed", kind=info.kind,
                  conventions=info.conventions, capabilities=info.capabilities,
                  dtype=info.dtype, device="cpu", profile=get_profile("quick"))
    prop = BY_ID["conventions.branch_input"]
    for case in prop.examples(ctx):
        prop.run(ctx, case)
    return ctx


def test_a_declared_rms_norm_of_a_tiny_aggregate_passes() -> None:
    """h_pre ≈ σ(−7) everywhere: mean(u²) ~ eps, so the input's mean square is ≈ 0.7, not 1;
    compared with u·rsqrt(mean(u²) + eps) it is exact (the unit-RMS check failed here)."""
    ctx = _run_on(_normed)
    assert "from weights(x)" in ctx.worst.label
    assert ctx.worst.error < 1e-12


def test_without_weights_a_tiny_aggregate_is_inconclusive() -> None:
    make = cast(Callable[..., HyperConnectionImpl], _normed_hidden)
    info = inspect_target(make, "cpu", 0)
    ctx = Context(factory=make, target_name="normed", kind=info.kind,
                  conventions=info.conventions, capabilities=info.capabilities,
                  dtype=info.dtype, device="cpu", profile=get_profile("quick"))
    prop = BY_ID["conventions.branch_input"]
    with pytest.raises(Inconclusive, match="without weights"):
        prop.run(ctx, prop.examples(ctx)[0])


def test_a_norm_with_the_wrong_eps_fails() -> None:
    """Declared eps 1e-2 while the impl uses 1e-6: at mean(u²) ~ eps the two differ."""
    wrong = dataclasses.replace(NORMED, norm_eps=1e-2)

    def make(n: int, d: int, **kwargs: Any) -> HyperConnectionImpl:
        impl = _normed(n, d, **kwargs)
        impl.conventions = wrong  # type: ignore[attr-defined]
        return impl

    with pytest.raises(PropertyFailure, match=r"rsqrt\(mean\(u²\) \+ eps\)"):
        _run_on(make)


def test_declared_rms_norm_without_a_norm_fails_without_weights() -> None:
    """The branch gets h_preᵀX itself although rms_norm is declared: its mean square is above 1
    somewhere (b_pre = 0, h_pre ≈ 1/2 on 4 streams of unit entries)."""
    def make(n: int, d: int, **kwargs: Any) -> HyperConnectionImpl:
        impl = _WithoutWeights(cast(torch.nn.Module, build(
            ManifoldHyperConnection, n, d, kwargs.get("layer_index", 0),
            kwargs.get("dtype", torch.float64), kwargs.get("device", "cpu"),
            kwargs.get("seed", 0), NORMED)))
        return cast(HyperConnectionImpl, impl)

    with pytest.raises(PropertyFailure, match="mean square of the branch input − 1"):
        _run_on(make)


@pytest.mark.parametrize("target", ["reference:mhc", "reference:mhc-fast"])
def test_mhc_weights_are_scale_invariant(target: str) -> None:
    ctx = run("conventions.weights_scale_invariant", target, example=1)
    assert ctx.worst.label.endswith("(w_∞ + A/c²)") and ctx.worst.error < ctx.worst.tolerance


def test_weights_from_the_unnormalised_state_fail_scale_invariance() -> None:
    with pytest.raises(PropertyFailure,
                       match=r"at 4·X vs its prediction from X and 2·X .*: error .* > allowance"):
        run("conventions.weights_scale_invariant", "mutant:weights_unnormalised_state",
            example=1)


def test_scale_invariance_applies_to_mhc_unless_declared_otherwise() -> None:
    assert unmet("conventions.weights_scale_invariant") is None
    assert "hc-dynamic" in str(unmet("conventions.weights_scale_invariant", kind="hc-dynamic"))
    assert unmet("conventions.weights_scale_invariant", kind="hc-dynamic",
                 conventions=Conventions(weights_scale_invariant=True)) is None
    declared = unmet("conventions.weights_scale_invariant",
                     conventions=Conventions(weights_scale_invariant=False))
    assert declared is not None and "weights_scale_invariant=False" in declared
    with pytest.raises(ValueError, match="weights_scale_invariant"):
        Conventions(weights_scale_invariant="yes")  # type: ignore[arg-type]


def test_the_reference_dynamic_hc_declared_normalised_passes() -> None:
    """HC's dynamic weights read a parameter-free LayerNorm of each stream (HC Eq. 10): scale
    invariant too, when a target declares it."""
    from hcspec.conformance.subjects.targets import resolve

    make = resolve("reference:hc-dynamic").factory

    def declared(n: int, d: int, **kwargs: Any) -> HyperConnectionImpl:
        impl = make(n, d, **kwargs)
        impl.conventions = dataclasses.replace(  # type: ignore[attr-defined]
            conventions_of(impl), weights_scale_invariant=True)
        return impl  # type: ignore[no-any-return]

    info = inspect_target(declared, "cpu", 0)
    ctx = Context(factory=declared, target_name="hc-dynamic", kind=info.kind,
                  conventions=info.conventions, capabilities=info.capabilities,
                  dtype=info.dtype, device="cpu", profile=get_profile("quick"))
    prop = BY_ID["conventions.weights_scale_invariant"]
    assert prop.unmet(ctx.subject) is None
    for case in prop.examples(ctx):
        prop.run(ctx, case)
    assert ctx.worst.error < ctx.worst.tolerance
