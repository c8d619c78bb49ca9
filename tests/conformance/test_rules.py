"""Tolerance rules as objects the harness applies (hcspec.conformance.rules): the meta-test that
every check applies its declared rules and none computes its own allowance, the rules' figures
along a dtype chain, the recorder's enforcement, the failure text, and the generated docs
table."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from hcspec.conformance import rules
from hcspec.conformance.families import BY_ID, CATALOGUE
from hcspec.conformance.machinery.declaration import Property
from hcspec.conformance.machinery.errors import DeclarationError, Inconclusive, PropertyFailure
from hcspec.conformance.machinery.recording import Recorder
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.outputs.failure import from_exception
from hcspec.conformance.run.session import check_implementation

ROOT = Path(__file__).resolve().parents[2]
BF16 = rules.eps(torch.bfloat16)
F32 = rules.eps(torch.float32)
SERVING = rules.Precision.of(torch.float64, torch.float32, torch.bfloat16)
"""A serving engine's chain: float32 weights inside, bfloat16 residual state and output."""


def _applied(target: str) -> dict[str, list[str]]:
    report = check_implementation(target, profile="quick", device="cpu")
    bad = [(r.id, r.status, r.message) for r in report.results
           if r.status not in (rp.PASSED, rp.NOT_APPLICABLE)]
    assert bad == []
    return {r.id: list(r.achieved.get("rules", [])) for r in report.results
            if r.status == rp.PASSED and r.achieved}


@pytest.mark.slow
@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-dynamic",
                                    "reference:hc-static"])
def test_every_check_applies_its_declared_rules(target: str) -> None:
    """The meta-test: run every property on a reference target; each comparison recorded the
    rule it applied, and that rule is the property's declared rule or a declared secondary
    one (a comparison under another rule would have been an error, which the run would show)
    and an object of :data:`rules.ALL`."""
    applied = _applied(target)
    assert applied, "no property recorded a comparison"
    for pid, names in applied.items():
        declared = {r.name for r in BY_ID[pid].rules}
        assert names and set(names) <= declared <= set(rules.BY_NAME), (pid, names, declared)


def test_a_rule_the_property_does_not_declare_is_a_kit_error() -> None:
    recorder = Recorder(declared=(rules.LAW,))
    recorder.expect("declared", 0.0)
    with pytest.raises(DeclarationError, match="exact_axis"):
        recorder.expect("undeclared", 0.0, rule=rules.EXACT_AXIS, n=4)
    assert recorder.applied == {"law"}


def test_a_check_cannot_pass_an_allowance_of_its_own() -> None:
    """The transition form ``expect(label, error, tolerance)`` is gone: a third positional
    argument is refused (it would otherwise be read as the detail text), and no rule records an
    allowance the check computed (``explicit``)."""
    recorder = Recorder(declared=(rules.LAW,))
    with pytest.raises(TypeError, match="positional"):
        recorder.expect("old form", 1e-3, 1e-2)  # type: ignore[misc]
    assert recorder.applied == set()
    assert "explicit" not in rules.BY_NAME
    for gone in ("EXPLICIT", "named", "transitional", "_TRANSITIONAL"):
        assert not hasattr(rules, gone), gone


def test_a_rule_names_its_inputs() -> None:
    with pytest.raises(TypeError, match="missing \\['n'\\]"):
        rules.EXACT_AXIS.apply(SERVING)
    with pytest.raises(TypeError, match="unknown inputs \\['scale'\\]"):
        rules.LAW.apply(SERVING, scale=2.0)


def test_failure_message_shows_error_floor_allowance_and_rule() -> None:
    recorder = Recorder(SERVING, declared=(rules.EXACT_AXIS,))
    with pytest.raises(PropertyFailure) as caught:
        recorder.expect("max |row sum − 1|", 0.5, n=4)
    exc = caught.value
    allowance = rules.EXACT_AXIS.apply(SERVING, n=4)
    assert exc.rule == "exact_axis" and exc.floor == pytest.approx(allowance.floor)
    text = str(exc)
    assert f"> allowance {allowance.allowance:.3g}" in text
    assert f"[rule exact_axis: floor {allowance.floor:.3g}, error = " in text
    failure = from_exception(exc, failed=True)
    assert (failure.rule, failure.floor, failure.tolerance) == (
        "exact_axis", exc.floor, exc.tolerance)
    # the text is never parsed back: an exception without attributes has no figures
    bare = from_exception(AssertionError(text), failed=True)
    assert (bare.rule, bare.floor, bare.tolerance) == (None, None, None)


def test_a_bound_that_cannot_fail_is_inconclusive() -> None:
    recorder = Recorder(declared=(rules.SINKHORN_OTHER_AXIS,))
    with pytest.raises(Inconclusive, match="sinkhorn_other_axis"):
        recorder.expect("column sums", 0.1, n=4, convergence=math.inf)


def test_float64_and_float32_keep_the_fixed_budgets() -> None:
    for dtype in (torch.float64, torch.float32):
        p = rules.Precision.of(dtype, None, None)
        assert rules.LAW.apply(p).allowance == rules.law(dtype)
        assert rules.EXACT_AXIS.apply(p, n=4).allowance == rules.exact_axis(dtype, 4, False)
        assert rules.EXACT_AXIS.apply(p, n=4, probed=True).allowance == rules.exact_axis(
            dtype, 4, True)
        assert rules.SELF_CONSISTENCY.apply(p).allowance == rules.self_consistency(dtype)


def test_below_float32_the_sums_are_held_to_the_dtype_chain() -> None:
    """A float32-inside, bfloat16-out target: the exact axis is allowed 4 × (the float32
    normalisation + one bfloat16 rounding), not bfloat16's 16·(n + 1)·eps = 0.625 at n = 4;
    the stream sum adds the mixing's chain rounding, not the law's 256·eps = 2.0."""
    exact = rules.EXACT_AXIS.apply(SERVING, n=4)
    assert exact.floor == pytest.approx(5 * F32 + BF16)
    assert exact.allowance == pytest.approx(4 * (5 * F32 + BF16))
    assert exact.allowance < 0.04 < rules.exact_axis(torch.bfloat16, 4, False)
    stream = rules.SINKHORN_OTHER_AXIS.apply(SERVING, n=4, convergence=0.0, mixing=True)
    assert stream.allowance == pytest.approx(exact.allowance + 4 * (BF16 + 4 * F32))
    assert stream.allowance < 0.07
    # computed in bfloat16 itself: its own budget is kept
    own = rules.Precision.of(torch.float64, torch.bfloat16, None)
    assert rules.EXACT_AXIS.apply(own, n=4).allowance == pytest.approx(
        rules.exact_axis(torch.bfloat16, 4, False))


def test_law_below_float32_is_a_multiple_of_the_oracle() -> None:
    got = rules.LAW.apply(SERVING, oracle=0.01)
    assert (got.floor, got.allowance) == (0.01, 0.08)
    floor = rules.LAW.apply(SERVING, oracle=0.0)
    assert floor.allowance == pytest.approx(4 * BF16)


def test_every_declared_rule_is_an_object_of_the_module() -> None:
    for p in CATALOGUE:
        for r in p.rules:
            assert r in rules.ALL, (p.id, r.name)


def test_docs_rules_table_is_generated_from_the_rule_objects() -> None:
    doc = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")
    assert rules.with_table(doc) == doc, (
        "docs/conformance.md: run python -m hcspec.conformance.rules --write")
    for r in rules.ALL:
        assert f"| `{r.name}` |" in doc


def test_a_rule_is_declared_as_an_object_never_by_name() -> None:
    with pytest.raises(DeclarationError, match="'law' is not a rule object"):
        Property(id="law.synthetic", statement="s", check=lambda ctx, case: None,
                 tolerance="law")  # type: ignore[arg-type]


def test_the_run_precision_has_one_name() -> None:
    """Checks read the run's dtype chain as ``ctx.precision`` only: the former spellings
    (``ctx.tol_dtype``, ``ctx.record.precision``) appear nowhere in the kit, its tools or its
    tests, and a context has no ``tol_dtype``."""
    former = ("tol_dtype", "record.precision")
    offenders = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for folder in ("conformance", "tools", "tests", "docs")
        for path in (ROOT / folder).rglob("*.py")
        if path != Path(__file__).resolve()
        for name in former if name in path.read_text(encoding="utf-8"))
    assert offenders == []
    from tests.conformance.properties.support import context

    ctx = context("reference:mhc")
    assert ctx.precision is ctx.record.precision and not hasattr(ctx, "tol_dtype")
    assert ctx.precision.output == torch.float64
