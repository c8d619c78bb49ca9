"""Depth family: a stack of sublayers keeps mHC's doubly stochastic bounds; HC's growth is
reported."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hcspec.conformance.families import BY_ID
from hcspec.conformance.families.depth import GROWTH, depth, mhc_bounds, run_stack
from hcspec.conformance.machinery.base import PropertyFailure
from hcspec.conformance.machinery.errors import Inconclusive
from hcspec.conformance.profiles import PROFILE_NAMES
from hcspec.conformance.protocol import Conventions
from hcspec.conformance.strategies import Case
from tests.conformance.properties.precision_standins import RoundedDynamicHC, _rounded
from tests.conformance.properties.support import context, run, unmet

PERTURBED_MLP = Case(2, 3, 4, 8, seed=1, perturb=0.3, branch="mlp")


@pytest.mark.parametrize("target", ["reference:mhc", "reference:mhc-fast"])
def test_reference_mhc_keeps_its_bounds_at_depth(target: str) -> None:
    for example in range(2):  # the quick profile's examples
        run("depth.mhc_bounded", target, example=example)
    run("depth.mhc_bounded", target, Case(1, 2, 3, 7, seed=2, perturb=1.0, branch="zero"))


def test_skipping_sinkhorn_in_deep_layers_fails_the_stream_sum() -> None:
    with pytest.raises(PropertyFailure, match=r"1ᵀX_L − 1ᵀX_0 .* after 16 sublayers"):
        run("depth.mhc_bounded", "mutant:depth_deep_layers_unnormalised", example=0)


def test_a_stack_of_mhc_preserves_the_stream_sum_and_contracts() -> None:
    ctx = context("reference:mhc")
    at_init = run_stack(ctx, Case(2, 3, 4, 8, seed=2, perturb=0.0, branch="zero"), 16,
                        weights=True)
    first, last = at_init[0].X, at_init[-1].out
    assert (last.sum(dim=-2) - first.sum(dim=-2)).abs().max() < 1e-9
    assert bool((last.norm(dim=-2) <= first.norm(dim=-2) + 1e-9).all())
    assert float(last.norm()) < 0.9 * float(first.norm())  # mixing contracts towards the mean
    # perturbed, 20 rounds leave column errors: the drift is real and within the bound
    perturbed = run_stack(ctx, Case(2, 3, 4, 8, seed=2, perturb=0.3, branch="zero"), 16,
                          weights=True)
    drift = (perturbed[-1].out.sum(dim=-2) - perturbed[0].X.sum(dim=-2)).abs()
    bound, _ = mhc_bounds(ctx, perturbed)
    assert float(drift.max()) > 1e-6 and bool((drift <= bound).all())


def test_hc_growth_is_reported_not_failed() -> None:
    ctx = run("depth.hc_growth", "reference:hc-dynamic", PERTURBED_MLP)
    assert "sublayers" in ctx.worst.label and ctx.worst.error > 1.0


# Found by the false-positive soak: a correct float16 dynamic HC whose stack grows past 65504
# (the float64 reference grows this case 3.1e6-fold in 16 sublayers).
FLOAT16_OVERFLOW = Case(1, 1, 3, 2, seed=0, perturb=1.0, branch="zero")
STANDINS = "tests.conformance.properties.precision_standins"


def test_hc_growth_past_the_output_range_is_inconclusive_not_failed() -> None:
    with pytest.raises(Inconclusive, match=r"sublayer 12 .* HC's growth is not bounded"):
        run("depth.hc_growth", f"{STANDINS}:make_float16_hc_dynamic", FLOAT16_OVERFLOW)


class InfAtDepth(RoundedDynamicHC):
    """A float16 dynamic HC that returns inf from its fourth sublayer on, whatever the size of
    the state (the bug: a division by a vanishing norm)."""

    poisoned = False

    def forward(self, x: torch.Tensor, branch: Any) -> torch.Tensor:
        out = super().forward(x, branch)
        return out / 0.0 if self.poisoned else out


def make_float16_inf_at_depth(n: int, d: int, *, layer_index: int = 0, **kwargs: Any) -> Any:
    module = _rounded(n, d, layer_index=layer_index, output=torch.float16, cls=InfAtDepth,
                      **kwargs)
    module.poisoned = layer_index >= 3
    return module


def test_hc_overflow_far_inside_the_range_still_fails() -> None:
    with pytest.raises(PropertyFailure, match=r"sublayer 3 of the stack is non-finite$"):
        run("depth.hc_growth", f"{__name__}:make_float16_inf_at_depth", PERTURBED_MLP)


def test_depth_needs_weights_and_any_state() -> None:
    reason = unmet("depth.mhc_bounded", conventions=Conventions(state_domain="replicated"))
    assert reason is not None and "not stream-replicated" in reason
    assert unmet("depth.mhc_bounded", capabilities=frozenset()) is not None
    assert unmet("depth.hc_growth", kind="mhc") is not None


@pytest.mark.parametrize("prop_id", ["depth.mhc_bounded", "depth.hc_growth"])
def test_the_statement_names_the_depth_of_every_profile(prop_id: str) -> None:
    """The statement is the same under every profile, so it names each profile's depth."""
    statement = BY_ID[prop_id].statement
    for name in PROFILE_NAMES:
        ctx = context("reference:mhc", profile=name)
        assert f"{depth(ctx)} sublayers" in statement or f"{depth(ctx)} under {name}" in \
            statement, (name, statement)


def test_the_stack_records_its_norm_after_every_sublayer() -> None:
    """The curve the HTML report plots: ‖X_l‖ / ‖X_0‖ for l = 0 … 16, one per case."""
    at_init = Case(2, 3, 4, 8, seed=0, perturb=0.0, branch="zero")
    ctx = run("depth.hc_growth", "reference:hc-static", at_init)
    (label, values), = ctx.record.series[GROWTH].items()
    assert "zero branch" in label and "seed 0" in label
    # static HC at init has H_res = I: with F ≡ 0 every sublayer returns its input
    assert values == pytest.approx([1.0] * 17, abs=1e-12)
    ctx = run("depth.hc_growth", "reference:hc-dynamic", PERTURBED_MLP)
    values = ctx.record.series[GROWTH][next(iter(ctx.record.series[GROWTH]))]
    assert len(values) == 17 and values[0] == 1.0
    assert values[-1] == pytest.approx(ctx.worst.error, rel=1e-12)  # the reported growth


def test_a_failing_stack_still_records_its_curve() -> None:
    """The depth mutant follows mHC for 8 sublayers, then grows: the curve shows where."""
    ctx = context("reference:mhc")
    prop = BY_ID["depth.mhc_bounded"]
    case = next(iter(prop.examples(ctx)))
    ctx = context("mutant:depth_deep_layers_unnormalised")
    with pytest.raises(PropertyFailure):
        prop.run(ctx, case)
    values = next(iter(ctx.record.series[GROWTH].values()))
    assert len(values) == 17 and max(values[:9]) <= 1.0 + 1e-9 and values[16] > 5 * values[8]
