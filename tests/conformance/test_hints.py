"""Hints from the divergence: a Sinkhorn-family failure names the round
count and eps that match the target's H_res; TorchDynamo's missing-module error and a
deliberate ``torch.compiler.disable`` get a hint naming what to do."""

from __future__ import annotations

import pytest
import torch

from hcspec.conformance.families.compile import known_dynamo_cause
from hcspec.conformance.machinery.variant_fit import declared_formula, fit, fit_text, rounds_bound
from hcspec.conformance.protocol import Conventions
from hcspec.conformance.run.session import check_implementation
from hcspec.formulas.sinkhorn import sinkhorn_variant
from hcspec.spec.record import SinkhornSpec

PAPER = declared_formula(Conventions(sinkhorn_iterations=20))


def _hints(target: str, only: list[str]) -> dict[str, str | None]:
    report = check_implementation(target, profile="quick", device="cpu", only=only)
    return {r.id: r.failure.hint if r.failure is not None else None
            for r in report.results if r.id in only}


def test_a_layer_running_5_rounds_while_declaring_20_is_told_so() -> None:
    hints = _hints("tests.conformance.five_rounds:make",
                   ["constraints.h_res_other_axis", "constraints.stream_sum_preserved"])
    for hint in hints.values():
        assert hint is not None and hint.startswith(
            "the output matches 5 Sinkhorn–Knopp rounds, not the declared 20")


def test_without_logits_the_hint_bounds_the_rounds() -> None:
    hint = _hints("tests.conformance.five_rounds:make_no_logits",
                  ["constraints.h_res_other_axis"])["constraints.h_res_other_axis"]
    assert hint is not None and "not the declared 20" in hint
    most = int(hint.split("at most ")[1].split()[0])
    assert 5 <= most < 20  # an upper bound on the rounds run, below the declared count


def test_the_fit_names_an_undeclared_eps() -> None:
    logits = torch.randn(6, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    H = sinkhorn_variant(logits, SinkhornSpec(iterations=20, additive_eps=1e-3))
    found = fit(logits, H, PAPER)
    assert (found.variant.sinkhorn.iterations, found.variant.sinkhorn.additive_eps) == (20, 1e-3)
    text = fit_text(found, PAPER, torch.float64)
    assert text is not None and text.startswith(
        "eps 0.001 added and 0 in the denominators, not the declared 0 / 0")
    exact = fit(logits, sinkhorn_variant(logits, SinkhornSpec(iterations=20)), PAPER)
    assert exact.variant == PAPER and fit_text(exact, PAPER, torch.float64) is None


@pytest.mark.parametrize("rounds", [1, 2, 3, 5, 8])
def test_the_rounds_bound_never_undercuts_the_rounds_run(rounds: int) -> None:
    generator = torch.Generator().manual_seed(rounds)
    for std in (0.3, 1.0, 2.0):
        logits = std * torch.randn(50, 4, 4, dtype=torch.float64, generator=generator)
        H = sinkhorn_variant(logits, SinkhornSpec(iterations=rounds))
        errors = (H.sum(dim=-2) - 1).abs().amax(dim=-1)
        for h, e in zip(H, errors, strict=True):
            most = rounds_bound(h, float(e))
            if float(e) > 1e-13 and most is not None:  # above rounding
                assert most >= rounds, (std, float(e), most)
    assert rounds_bound(torch.full((2, 2), 0.5, dtype=torch.float64), 0.1) is None  # Δ = 0


def test_dynamo_missing_module_and_deliberate_disable_hints() -> None:
    from torch._dynamo.exc import InternalTorchDynamoError

    try:
        try:
            raise ModuleNotFoundError("No module named 'hc_adapter_impl'")
        except ModuleNotFoundError as inner:
            raise InternalTorchDynamoError(f"ModuleNotFoundError: {inner}") from inner
    except InternalTorchDynamoError as exc:
        hint = known_dynamo_cause(exc)
    assert hint is not None and "'hc_adapter_impl' is not there" in hint
    assert "sys.modules['hc_adapter_impl'] = module" in hint

    @torch.compiler.disable
    def dispatch(t: torch.Tensor) -> torch.Tensor:
        return t * 2

    def step(t: torch.Tensor) -> torch.Tensor:
        return dispatch(t) + 1

    with pytest.raises(Exception) as raised:
        torch.compile(step, fullgraph=True, backend="eager")(torch.ones(2))
    hint = known_dynamo_cause(raised.value)
    assert hint is not None and "declare conventions untraceable='why'" in hint
    assert known_dynamo_cause(RuntimeError("a shape mismatch")) is None
