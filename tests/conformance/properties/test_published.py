"""Published family: the reference passes for every published parameterization; each
divergence class is named; a malformed published_parameters() fails with the key named."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from hcspec.conformance import metrics
from hcspec.conformance.families import BY_ID
from hcspec.conformance.machinery import divergence, published_divergence, saturated_gates
from hcspec.conformance.machinery.base import PropertyFailure
from hcspec.conformance.protocol import CAPABILITIES, Conventions
from hcspec.conformance.strategies import Case
from hcspec.reference import published as pub
from hcspec.reference import targets
from hcspec.reference.deepseek_v4 import DeepSeekV4HyperConnection
from hcspec.spec.record import Gate
from tests.conformance.properties.support import run, unmet

REFERENCE = ["reference:hc-static", "reference:hc-dynamic", "reference:mhc",
             "hcspec.reference.targets:deepseek_v4"]
PROPERTIES = ["published.step", "published.gradients", "published.load_roundtrip"]


@pytest.mark.parametrize("target", REFERENCE)
@pytest.mark.parametrize("prop_id", PROPERTIES)
def test_the_reference_passes_for_every_parameterization(target: str, prop_id: str) -> None:
    for example in range(3):
        ctx = run(prop_id, target, example=example)
        assert ctx.worst.label  # something was compared


def test_without_a_declared_layout_the_family_is_not_applicable() -> None:
    reason = unmet("published.step", conventions=Conventions())
    assert reason is not None and "conventions.published" in reason
    declared = Conventions(published="deepseek-v4")
    caps = frozenset(c for c in CAPABILITIES if c != "published_parameters")
    assert "published_parameters" in str(unmet("published.step", conventions=declared,
                                               capabilities=caps))
    assert unmet("published.load_roundtrip", conventions=declared,
                 capabilities=frozenset(c for c in CAPABILITIES if c != "load_published"))


def test_an_unknown_layout_is_refused_by_the_conventions() -> None:
    with pytest.raises(ValueError, match="published"):
        Conventions(published="deepseek-v5")


@pytest.mark.parametrize(("mutant", "named"), [
    ("published_comb_orientation", "orientation: X' = comb X"),
    ("published_post_sigma", "post = σ(·) where DeepSeek-V4 has 2σ(·)"),
    ("published_sigmoid_start", "starts from sigmoid(·) + eps"),
    ("published_eps_placement", "no hc_eps in the Sinkhorn–Knopp denominators"),
    ("published_rounds", "the rounds: the iteration count counts rounds"),
    ("published_scale_block", "the post block uses hc_scale[2], the comb block uses hc_scale[1]"),
    ("published_norm_after", "the RMS norm is applied after the projection"),
])
def test_each_divergence_is_named(mutant: str, named: str) -> None:
    # example 1 (n = 2, perturbation 1): Sinkhorn–Knopp far from converged, so the rounds show
    with pytest.raises(PropertyFailure) as failure:
        run("published.step", f"mutant:{mutant}", example=1 if mutant.endswith("rounds") else 0)
    assert named in str(failure.value)
    assert "the output matches that variant's step" in str(failure.value)


def test_the_search_names_four_compounded_divergences() -> None:
    """The combination of transformers 5.8.0 (and nano-deepseek-v4): no single change brings the
    output closer, every combination of the core divergences is tried."""
    torch.manual_seed(0)
    n, d = 4, 8
    params = {"hc_fn": torch.randn((n + 2) * n, n * d, dtype=torch.float64) * 0.5,
              "hc_scale": 1 + 0.5 * torch.randn(3, dtype=torch.float64),
              "hc_base": 0.5 * torch.randn((n + 2) * n, dtype=torch.float64)}
    x = torch.randn(2, 3, n, d, dtype=torch.float64)

    def branch(z: torch.Tensor) -> torch.Tensor:
        return torch.tanh(z) * 1.3

    published = pub.DEEPSEEK_V4_FORMULA
    first_release = dataclasses.replace(
        published, transposed=False, h_post=Gate(1.0, published.h_pre.eps),
        sinkhorn=dataclasses.replace(published.sinkhorn, start="sigmoid", count="rounds"))
    got = pub.step("deepseek-v4", params, x, branch, first_release)

    def error_of(formula: pub.Formula) -> float:
        return divergence.output_error(got, pub.step("deepseek-v4", params, x, branch, formula),
                                       float(x.abs().max()))

    match = published_divergence.search(error_of, 1e-12)
    assert match.exact and match.formula == first_release
    text = published_divergence.message(match, published)
    for phrase in ("orientation", "post = σ(·) + hc_eps", "starts from sigmoid"):
        assert phrase in text
    assert published_divergence.search(
        lambda f: error_of(first_release) if f == first_release else 1.0,
        1e-12).formula == first_release


class _WrongShape:
    """The reference DeepSeek-V4 module whose published_parameters() has hc_base of n(n+2)-1."""

    def __init__(self, impl: Any) -> None:
        self._impl = impl

    def __getattr__(self, name: str) -> Any:
        return getattr(self._impl, name)

    def published_parameters(self) -> dict[str, object]:
        params = dict(self._impl.published_parameters())
        params["hc_base"] = params["hc_base"][:-1]
        return params


def test_a_malformed_layout_fails_with_the_key_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conformance.properties import support

    monkeypatch.setattr(support, "factory", lambda target: (
        lambda *a, **k: _WrongShape(targets.deepseek_v4(*a, **k))))
    with pytest.raises(PropertyFailure, match=r"'hc_base' should be \[15\], got \[14\]"):
        run("published.step", "wrong-shape", Case(1, 2, 3, 5, seed=0, perturb=0.3))
    assert BY_ID["published.step"].theorem == "published.deepseek_v4_step"


class _Bfloat16Output(DeepSeekV4HyperConnection):
    """The reference DeepSeek-V4 module computing in float32 and returning bfloat16 (as
    TileKernels' references do), declaring so."""

    def forward(self, x: torch.Tensor, branch: Any) -> torch.Tensor:  # type: ignore[override]
        def in_float32(z: torch.Tensor) -> torch.Tensor:
            return branch(z.to(torch.bfloat16).to(x.dtype)).float()

        out = super().forward(x.float(), in_float32)
        return out.to(torch.bfloat16)

    def weights(self, x: torch.Tensor) -> Any:
        return tuple(w.to(torch.bfloat16) for w in super().weights(x.float()))

    @property
    def conventions(self) -> Any:  # type: ignore[override]
        return {**super().conventions, "compute_dtype": "float32", "output_dtype": "bfloat16"}


def _bfloat16_target(formula: pub.Formula | None) -> Any:
    def make(n: int, d: int, *, layer_index: int = 0, dtype: torch.dtype = torch.float64,
             device: str = "cpu", seed: int = 0) -> _Bfloat16Output:
        torch.manual_seed(seed)
        module = _Bfloat16Output(n, d, layer_index, dtype=torch.float32)
        module.formula = formula
        return module
    return make


def test_below_float32_the_floor_passes_a_correct_target_and_names_a_slip(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conformance.properties import support

    monkeypatch.setattr(support, "factory", lambda target: _bfloat16_target(
        None if target == "right" else dataclasses.replace(pub.DEEPSEEK_V4_FORMULA,
                                                          transposed=False)))
    for example in range(3):
        ctx = run("published.step", "right", example=example)
        assert ctx.worst.tolerance >= 4 * torch.finfo(torch.bfloat16).eps  # the floor applies
        assert ctx.worst.error <= ctx.worst.tolerance
    with pytest.raises(PropertyFailure, match="orientation: X' = comb X"):
        run("published.step", "wrong", example=0)


def test_a_checkpoint_loaded_across_a_stack_chains_the_published_steps() -> None:
    ctx = run("published.stack_checkpoint", "hcspec.reference.targets:deepseek_v4")
    assert "layers.{i}.hc_{attn,ffn}_*" in ctx.worst.label
    with pytest.raises(PropertyFailure, match="loaded from a DeepSeek-V4 checkpoint") as failure:
        run("published.stack_checkpoint", "mutant:published_checkpoint_sites_swapped")
    assert "attention ↔ FFN" in str(failure.value.hint)


def test_the_checkpoint_key_names_are_deepseek_v4s() -> None:
    from hcspec.spec.published import deepseek_v4_checkpoint_key

    assert [deepseek_v4_checkpoint_key(k, "hc_scale") for k in range(4)] == [
        "layers.0.hc_attn_scale", "layers.0.hc_ffn_scale", "layers.1.hc_attn_scale",
        "layers.1.hc_ffn_scale"]
    with pytest.raises(ValueError):
        deepseek_v4_checkpoint_key(0, "hc_other")


# --- the gates at saturated logits (issue #39: an additive gate eps dropped) -------------------

@pytest.mark.parametrize("layout", ["deepseek-v4", "mhc-paper"])
def test_saturated_sets_both_gate_logits_to_minus_twenty(layout: str) -> None:
    """Every token's pre and post logit is exactly −20: the gates are σ(−20)·c + eps."""
    n, d = 3, 5
    torch.manual_seed(0)
    params: dict[str, Any] = {k: torch.randn(s, dtype=torch.float64)
                              for k, s in pub.layout(layout).shapes(n, d).items()}
    sat = saturated_gates.saturated(layout, params, n)
    assert sat is not None
    x = 5.0 * torch.randn(2, 3, n, d, dtype=torch.float64)
    h_pre, h_post, _ = pub.weights(layout, sat, x)
    sigma = 1.0 / (1.0 + torch.exp(torch.tensor(20.0, dtype=torch.float64)))
    eps = 1e-6 if layout == "deepseek-v4" else 0.0
    assert torch.allclose(h_pre, torch.full_like(h_pre, float(sigma) + eps), rtol=1e-12, atol=0)
    assert torch.allclose(h_post, torch.full_like(h_post, 2 * float(sigma)), rtol=1e-12, atol=0)
    unchanged = [k for k in params if torch.equal(params[k], sat[k])]  # type: ignore[arg-type]
    assert unchanged and all(not torch.equal(params[k], sat[k])  # type: ignore[arg-type]
                             for k in params if k not in unchanged)
    assert saturated_gates.saturated("hc-static", params, n) is None


def test_relative_error_divides_by_the_gates_own_magnitude() -> None:
    want = torch.full((4,), 1.002e-6, dtype=torch.float64)
    got = want - 1e-6
    assert metrics.relative_error(got, want) == pytest.approx(1e-6 / 1.002e-6, rel=1e-12)
    assert metrics.scaled_error(got, want) == pytest.approx(1e-6, rel=1e-9)
    assert metrics.relative_error(want, want) == 0.0
    assert metrics.relative_error(torch.ones(2), torch.zeros(2)) == float("inf")


def test_a_dropped_gate_eps_is_named_at_saturated_logits() -> None:
    """The float32-weights mutant passes the output comparison (1e-6 under 3.1e-5) and fails
    the saturated gates by 0.998 of the gate; the same module with the eps passes."""
    with pytest.raises(PropertyFailure) as failure:
        run("published.step", "mutant:published_gate_eps_dropped")
    text = str(failure.value)
    assert "h_pre at saturated gate logits" in text
    assert "without its additive eps" in text
    assert failure.value.error == pytest.approx(0.998, abs=1e-3)  # type: ignore[attr-defined]
    ctx = run("published.step", "tests.mutants.published_gate_eps_dropped:make_declared")
    assert ctx.record.worst.error < 1e-6
