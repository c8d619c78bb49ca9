"""Exact family: one-hot h_pre copies a stream, a permutation H_res permutes and a cancelling
branch gives zero, to the last bit in every precision."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance.families import exact
from hcspec.conformance.machinery.base import Inconclusive, PropertyFailure
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from tests.conformance.properties.support import run
from tests.mutants._v4_serving import STATE, ServingV4
from tests.mutants._v4_serving import make as make_v4

IDS = ("exact.one_hot_copy", "exact.permutation_mixing", "exact.cancelling_streams")


@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-static",
                                    "reference:hc-dynamic"])
def test_reference_passes(target: str) -> None:
    for pid in IDS:
        run(pid, target)


def test_the_masks_are_exact() -> None:
    h = torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 1.0], [0.0, 1.0 - 1e-16, 0.0]],
                     dtype=torch.float64)
    assert exact._one_hot(h).tolist() == [True, False, False]
    P = torch.tensor([[[0.0, 1.0], [1.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]]])
    assert exact._permutation(P).tolist() == [True, False]
    assert exact._power_of_two(torch.tensor([1.0, 2.0, 0.5, 3.0, 0.0])).tolist() == [
        True, True, True, False, False]


def test_a_centred_aggregate_does_not_copy_exactly() -> None:
    with pytest.raises(PropertyFailure, match="branch input vs stream k"):
        run("exact.one_hot_copy", "mutant:aggregate_centred")


def test_mixing_as_identity_plus_offset_does_not_permute_exactly() -> None:
    with pytest.raises(PropertyFailure, match="X' vs P X"):
        run("exact.permutation_mixing", "mutant:mixing_identity_plus_delta")
    with pytest.raises(PropertyFailure, match="expected 0"):
        run("exact.cancelling_streams", "mutant:mixing_identity_plus_delta")


def test_weights_that_are_never_exact_are_inconclusive() -> None:
    with pytest.raises(Inconclusive, match="exactly one-hot"):
        run("exact.one_hot_copy", "reference:mhc", perturb=0.3, param_scale=1.0)


# --- DeepSeek-V4 formulas: exact up to the declared ε ---------------------------------------
class _TransposedMixing(ServingV4):
    """The serving DeepSeek-V4 stand-in mixing with H_resᵀ (reports H_res)."""

    def forward(self, x: torch.Tensor, branch: object) -> torch.Tensor:  # type: ignore[override]
        xb = x.to(STATE)
        pre, post, H = self._weights32(xb)
        x32 = xb.to(torch.float32)
        collapsed = (pre.unsqueeze(-2) @ x32).squeeze(-2).to(STATE)
        z = branch(collapsed.to(x.dtype)).to(torch.float32)  # type: ignore[operator]
        out = H.transpose(-1, -2) @ x32 + post.unsqueeze(-1) * z.unsqueeze(-2)
        return out.to(STATE)


def _transposed(n: int, d: int, **kw: object) -> ServingV4:
    module = make_v4(n, d, **kw)  # type: ignore[arg-type]
    module.__class__ = _TransposedMixing
    return module


def test_deepseek_v4_formulas_are_demonstrated_up_to_the_declared_eps() -> None:
    """σ + ε pre and softmax + ε Sinkhorn–Knopp never give an exact one-hot or permutation; up
    to the declared ε every exact property is demonstrated (conclusive) on the bfloat16-state
    serving stand-in, each well inside its allowance."""
    report = check_implementation(make_v4, profile="ci", device="cpu", only=IDS)
    for pid in IDS:
        r = next(r for r in report.results if r.id == pid)
        assert r.status == rp.PASSED, (pid, r.status, r.message)
        assert r.achieved is not None and r.achieved["rule"] == "exact_up_to_eps"
        assert r.achieved["error"] <= 0.5 * r.achieved["tolerance"], (pid, r.achieved)


def test_a_transposed_mixing_fails_up_to_the_declared_eps() -> None:
    report = check_implementation(_transposed, profile="ci", device="cpu",
                                  only=("exact.permutation_mixing",))
    r = next(r for r in report.results if r.id == "exact.permutation_mixing")
    assert r.status == rp.FAILED, (r.status, r.message)
    assert "up to the declared ε" in r.message and "rule exact_up_to_eps" in r.message


def test_a_sigmoid_start_says_why_it_is_never_exact() -> None:
    from hcspec.conformance.protocol import Conventions

    ctx = type("C", (), {"conventions": Conventions(sinkhorn_variant="sigmoid",
                                                     sinkhorn_additive_eps=1e-6)})()
    assert "never exact" in exact._never_reached(ctx, "H_res")  # type: ignore[arg-type]


def test_the_near_masks_allow_only_the_declared_eps() -> None:
    h = torch.tensor([[1e-6, 1 + 1e-6, 1e-6], [1e-6, 1 + 1e-6, 1e-2]], dtype=torch.float64)
    mask, pattern = exact._near_one_hot(h, 1e-6)
    assert mask.tolist() == [True, False]
    assert pattern[0].tolist() == [0.0, 1.0, 0.0]
