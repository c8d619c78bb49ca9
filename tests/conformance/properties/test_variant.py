"""Declared-variant family: the declared Sinkhorn variant and gates at the target's own logits,
and the declared Sinkhorn backward (unrolled, or implicit at the fixed point)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hcspec.conformance.machinery.base import Inconclusive, PropertyFailure
from hcspec.conformance.machinery.sinkhorn_variant import diagnose, fixed_point_tolerance
from hcspec.conformance.protocol import Conventions
from hcspec.conformance.strategies import Case
from hcspec.reference import ManifoldHyperConnection, sinkhorn
from hcspec.spec.record import Formula, SinkhornSpec
from tests.conformance.properties.support import context, run, unmet
from tests.mutants import sinkhorn_grad_stopped, sinkhorn_implicit_backward
from tests.mutants._base import build, mhc_conventions

VARIANT = ("variant.h_res", "variant.gates", "variant.sinkhorn_gradient")
SPREAD = Case(2, 3, 4, 8, seed=0, perturb=1.0)
"""Perturbed far enough that 20 rounds have not converged to rounding."""
CONVERGING = Case(2, 3, 4, 8, seed=1, perturb=0.3)
"""Perturbed less: 20 rounds converge enough for the fixed-point gradient to be determined."""


@pytest.mark.parametrize("target", ["reference:mhc", "reference:mhc-fast"])
def test_reference_passes(target: str) -> None:
    for pid in VARIANT:
        run(pid, target, SPREAD)


@pytest.mark.parametrize(("mutant", "named"), [
    ("sinkhorn_logits_transposed", "the declared variant applied to H̃ᵀ"),
    ("sinkhorn_softmax_eps_undeclared", "the softmax-first variant, not the declared exp-first"),
    ("sinkhorn_iterations_mislabelled", "not the declared 10 rounds"),
    ("sinkhorn_one_round_short", "matches 19 rounds, not the declared 20 rounds"),
    ("sinkhorn_f32_weights_one_round_short",
     "matches 19 rounds_from_softmax, not the declared 20"),
])
def test_a_mislabelled_variant_fails_naming_what_it_matches(mutant: str, named: str) -> None:
    with pytest.raises(PropertyFailure) as failure:
        run("variant.h_res", f"mutant:{mutant}", SPREAD)
    assert named in str(failure.value)


SERVING = "tests.mutants.sinkhorn_f32_weights_one_round_short"


def test_a_declared_weights_dtype_judges_reported_weights_in_it() -> None:
    """A bfloat16-state target reporting float32 weights under ``weights_dtype=float32`` has
    its H_res judged in float32 (the law's 256·eps = 3e-5, not bfloat16's 0.031), where its
    20 declared rounds pass and 19 fail (the mutant, above); shape.weights takes float32
    weights from it, and refuses them from the same target without the declaration."""
    ctx = run("variant.h_res", f"{SERVING}:make_declared", SPREAD)
    assert ctx.record.worst.tolerance == pytest.approx(2 ** -15), ctx.record.worst
    assert ctx.record.worst.error < 1e-6, ctx.record.worst
    run("shape.weights", f"{SERVING}:make_declared")
    with pytest.raises(PropertyFailure, match="declared output_dtype"):
        run("shape.weights", f"{__name__}:undeclared_float32_weights")


def undeclared_float32_weights(n: int, d: int, **kwargs: object) -> object:
    """The serving-style target reporting float32 weights without declaring
    ``weights_dtype`` (a factory of the test above)."""
    from tests.mutants.sinkhorn_f32_weights_one_round_short import make_declared

    impl = make_declared(n, d, **kwargs)  # type: ignore[arg-type]
    impl.conventions = dataclasses.replace(impl.conventions, weights_dtype=None)
    return impl


def test_the_diagnosis_names_the_iteration_count_and_the_transpose() -> None:
    logits = torch.randn(3, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    declared = Formula(sinkhorn=SinkhornSpec(iterations=20))
    three = sinkhorn.sinkhorn_variant(logits, SinkhornSpec(iterations=3))
    assert "matches 3 rounds, not the declared 20 rounds" in diagnose(three, logits, declared,
                                                                       1e-11)
    transposed = sinkhorn.sinkhorn_variant(logits, SinkhornSpec(iterations=20)).transpose(-1, -2)
    assert "Hᵀ (the transpose" in diagnose(transposed, logits, declared, 1e-11)
    deepseek = sinkhorn.sinkhorn_variant(logits, SinkhornSpec(
        "softmax", "rounds_from_softmax", "columns", 1e-6, 1e-6, 20))
    text = diagnose(deepseek, logits, declared, 1e-11)
    assert "softmax-first" in text and "columns normalised last" in text, text
    noise = torch.rand(3, 4, 4, dtype=torch.float64)
    assert "matches no variant" in diagnose(noise, logits, declared, 1e-11)


def test_the_diagnosis_composes_a_structure_and_a_count() -> None:
    """No candidate (a structure at the declared count, or the declared at another count)
    matches; the greedy part of the search finds the two changes together."""
    logits = 2 * torch.randn(3, 4, 4, dtype=torch.float64,
                             generator=torch.Generator().manual_seed(1))
    declared = Formula(sinkhorn=SinkhornSpec(iterations=20))
    H = sinkhorn.sinkhorn_variant(logits, SinkhornSpec("sigmoid", "rounds", "columns",
                                                       iterations=19))
    text = diagnose(H, logits, declared, 1e-11)
    assert text.startswith("H_res matches the sigmoid-first variant, not the declared "
                           "exp-first; 19 rounds, not the declared 20 rounds; columns "
                           "normalised last"), text


def test_h_post_sigma_fails_the_gates_naming_the_multiplier() -> None:
    with pytest.raises(PropertyFailure,
                       match=r"h_post matches 1·σ\(H̃_post\), not the declared 2·σ"):
        run("variant.gates", "mutant:h_post_sigma", SPREAD)


def test_undeclared_implicit_backward_fails_naming_the_cause() -> None:
    with pytest.raises(PropertyFailure, match=r"matches the implicit \(fixed-point\) gradient"):
        run("variant.sinkhorn_gradient", "mutant:sinkhorn_implicit_backward", SPREAD)


def declared_implicit(n: int, d: int, *, layer_index: int = 0,
                       dtype: torch.dtype = torch.float64, device: str = "cpu",
                       seed: int = 0):  # type: ignore[no-untyped-def]
    declared = dataclasses.replace(mhc_conventions(20), sinkhorn_gradient="implicit")
    return build(sinkhorn_implicit_backward.ImplicitBackward, n, d, layer_index, dtype, device,
                 seed, declared)


def declared_implicit_stopped(n: int, d: int, *, layer_index: int = 0,
                              dtype: torch.dtype = torch.float64, device: str = "cpu",
                              seed: int = 0):  # type: ignore[no-untyped-def]
    declared = dataclasses.replace(mhc_conventions(20), sinkhorn_gradient="implicit")
    return build(sinkhorn_grad_stopped.NoSinkhornGrad, n, d, layer_index, dtype, device, seed,
                 declared)


def test_declared_implicit_backward_is_checked_against_the_fixed_point_gradient() -> None:
    here = "tests.conformance.properties.test_variant"
    run("variant.sinkhorn_gradient", f"{here}:declared_implicit", CONVERGING)
    # declared implicit, the finite differences do not apply: a stopped Sinkhorn gradient is
    # caught here
    with pytest.raises(PropertyFailure, match=r"weights\(x\) carries no autograd graph"):
        run("variant.sinkhorn_gradient", f"{here}:declared_implicit_stopped", CONVERGING)
    with pytest.raises(Inconclusive, match="not converged enough"):  # vacuous tolerance
        run("variant.sinkhorn_gradient", f"{here}:declared_implicit", SPREAD)


class _DetachedWeights(ManifoldHyperConnection):
    """The reference mHC whose ``weights(x)`` returns detached tensors (the forward is
    differentiable)."""

    def weights(self, x):  # type: ignore[no-untyped-def,override]
        return tuple(w.detach() for w in super().weights(x))


def detached_weights(n: int, d: int, *, layer_index: int = 0,
                     dtype: torch.dtype = torch.float64, device: str = "cpu",
                     seed: int = 0):  # type: ignore[no-untyped-def]
    return build(_DetachedWeights, n, d, layer_index, dtype, device, seed, mhc_conventions())


@pytest.mark.parametrize("target", ["tests.conformance.properties.test_variant:detached_weights",
                                    "mutant:sinkhorn_grad_stopped"])
def test_weights_without_a_graph_name_the_cause(target: str) -> None:
    """Not "unrolled gradient error" against a zero gradient: the verdict says weights(x)
    has no graph."""
    with pytest.raises(PropertyFailure, match=r"weights\(x\) carries no autograd graph"):
        run("variant.sinkhorn_gradient", target, SPREAD)


def test_the_fixed_point_tolerance_follows_the_convergence() -> None:
    ctx = context("reference:mhc")
    logits = torch.randn(2, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    loose = fixed_point_tolerance(ctx, sinkhorn.sinkhorn_knopp(logits, 3), "rows")
    tight = fixed_point_tolerance(ctx, sinkhorn.sinkhorn_knopp(logits, 200), "rows")
    assert tight < 1e-10 < 1e-4 < loose


def test_declared_implicit_makes_finite_differences_not_applicable() -> None:
    reason = unmet("gradients.fd_input", conventions=Conventions(sinkhorn_gradient="implicit"))
    assert reason is not None and "sinkhorn_gradient='implicit'" in reason
    assert unmet("gradients.fd_parameters", conventions=Conventions()) is None


def test_variant_needs_the_logits_capability() -> None:
    reason = unmet("variant.h_res", capabilities=frozenset({"weights"}))
    assert reason is not None and "logits" in reason
    assert unmet("variant.h_res", kind="hc-dynamic") is not None


@pytest.mark.slow
def test_the_cited_theorem_proves() -> None:
    from hcspec.spec.registry import get

    result = get("sinkhorn.implicit_gradient").prove()
    assert result.ok, result.error


@pytest.mark.parametrize("target", ["reference:mhc", "reference:mhc-fast"])
def test_reference_logits_are_affine_in_the_normalised_state(target: str) -> None:
    ctx = run("variant.logits_affine", target)
    assert ctx.worst.error < 1e-13


def test_a_tanh_inside_the_logits_is_not_affine() -> None:
    with pytest.raises(PropertyFailure, match="affine prediction: error"):
        run("variant.logits_affine", "mutant:logits_tanh_projection")


MHC_LITE_CASE = Case(2, 3, 3, 7, seed=0, perturb=1.0)


def test_mhc_lite_is_its_declared_construction() -> None:
    for pid in ("variant.h_res", "variant.gates"):
        run(pid, "reference:mhc-lite", MHC_LITE_CASE)


def test_mhc_lite_with_a_duplicated_permutation_set_fails_h_res() -> None:
    with pytest.raises(PropertyFailure) as failure:
        run("variant.h_res", "mutant:birkhoff_duplicated_permutations", MHC_LITE_CASE)
    assert "birkhoff" in str(failure.value)


def test_a_softmax_h_post_passes_declared_softmax_and_fails_declared_2sigma() -> None:
    run("variant.gates", "tests.mutants.h_post_softmax_declared_sigmoid:make_declared", SPREAD)
    with pytest.raises(PropertyFailure) as failure:
        run("variant.gates", "mutant:h_post_softmax_declared_sigmoid", SPREAD)
    assert "2·σ(H̃_post)" in str(failure.value)

