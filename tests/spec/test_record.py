"""The step records (:mod:`hcspec.spec.record`) and the published layouts' records
(:func:`hcspec.spec.published.formula`): validation on construction, the resolved count, and
the one record every reader of the step's degrees of freedom shares."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hcspec.spec import published
from hcspec.spec.record import DEFAULT_ITERATIONS, Formula, Gate, GatedFormula, SinkhornSpec


@pytest.mark.parametrize(("make", "words"), [
    (lambda: SinkhornSpec(start="log"), ["sinkhorn.start", "'log'"]),  # type: ignore[arg-type]
    (lambda: SinkhornSpec(count="pairs"), ["sinkhorn.count", "'pairs'"]),  # type: ignore[arg-type]
    (lambda: SinkhornSpec(exact_axis="both"), ["sinkhorn.exact_axis"]),  # type: ignore[arg-type]
    (lambda: SinkhornSpec(count="rounds_from_softmax"), ["needs start='softmax'"]),
    (lambda: SinkhornSpec(additive_eps=1.0), ["sinkhorn.additive_eps", "0 <= eps < 1"]),
    (lambda: SinkhornSpec(denominator_eps=-1e-9), ["sinkhorn.denominator_eps"]),
    (lambda: SinkhornSpec(iterations=0), ["sinkhorn.iterations", ">= 1"]),
    (lambda: SinkhornSpec(iterations=True), ["sinkhorn.iterations"]),
    (lambda: Gate(multiplier=0.0), ["gate.multiplier", "> 0"]),
    (lambda: Gate(multiplier=float("inf")), ["gate.multiplier", "finite"]),
    (lambda: Gate(eps=2.0), ["gate.eps"]),
    (lambda: Formula(scales=(0, 0, 1)), ["formula.scales", "permutation"]),
    (lambda: Formula(norm="after"), ["formula.norm"]),  # type: ignore[arg-type]
    (lambda: Formula(sinkhorn=Gate()), ["formula.sinkhorn", "SinkhornSpec"]),  # type: ignore[arg-type]
    (lambda: Formula(transposed=1), ["formula.transposed", "bool"]),  # type: ignore[arg-type]
])
def test_a_record_rejects_a_value_naming_the_field(make: object, words: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        make()  # type: ignore[operator]
    assert all(w in str(info.value) for w in words), str(info.value)


def test_the_defaults_are_the_mhc_paper_and_an_undeclared_count_is_its_t_max() -> None:
    f = Formula()
    assert (f.h_pre, f.h_post) == (Gate(1.0, 0.0), Gate(2.0, 0.0))
    assert (f.sinkhorn.start, f.sinkhorn.count, f.sinkhorn.exact_axis) == ("exp", "rounds", "rows")
    assert f.sinkhorn.iterations is None and f.sinkhorn.effective_iterations == DEFAULT_ITERATIONS
    assert SinkhornSpec(iterations=7).effective_iterations == 7
    assert hash(f) == hash(Formula()) and f == Formula()  # frozen: usable as a search key


def test_the_published_records_follow_the_settings() -> None:
    v4 = published.formula("deepseek-v4", {"hc_eps": 1e-3, "sinkhorn_iters": 4, "hc_fn": None})
    assert v4 == dataclasses.replace(
        published.DEEPSEEK_V4_FORMULA, h_pre=Gate(1.0, 1e-3),
        sinkhorn=SinkhornSpec("softmax", "rounds_from_softmax", "columns", 1e-3, 1e-3, 4))
    assert v4.transposed and v4.h_post == Gate(2.0, 0.0)
    assert published.formula("mhc-paper") == Formula(sinkhorn=SinkhornSpec(iterations=20))
    assert published.formula("hc-static") is None and published.formula("hc-dynamic") is None
    with pytest.raises(ValueError, match="unknown published parameterization"):
        published.formula("deepseek-v5")
    with pytest.raises(ValueError, match=r"sinkhorn\.iterations"):
        published.formula("deepseek-v4", {"sinkhorn_iters": 0})
    assert published.formula("qwen4-exp") is None  # the gated read: GatedFormula
    assert set(published.SETTINGS) | {published.QWEN4_EXP} == set(published.PARAMETERIZATIONS)


def test_the_records_do_not_import_torch() -> None:
    code = ("import sys, hcspec.spec.record, hcspec.spec.published\n"
            "assert 'torch' not in sys.modules\n")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.parametrize(("change", "field"), [
    ({"streams": "max"}, "gated.streams"),
    ({"gate_input": "norm"}, "gated.gate_input"),
    ({"gate_activation": "relu"}, "gated.gate_activation"),
    ({"post_multiplier": 0.0}, "gated.post_multiplier"),
    ({"post_multiplier": float("inf")}, "gated.post_multiplier"),
    ({"norm_offset": float("nan")}, "gated.norm_offset"),
    ({"gate_after_mean": 1}, "gated.gate_after_mean"),
])
def test_the_gated_record_rejects_a_value_naming_the_field(change: dict[str, object],
                                                           field: str) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        GatedFormula(**change)  # type: ignore[arg-type]


def test_the_step_records_are_told_apart_by_kind() -> None:
    from hcspec.formulas.gated import PUBLISHED_GATED

    assert GatedFormula() == PUBLISHED_GATED and GatedFormula().kind == "gated"
    assert Formula().kind == "mhc"
    assert GatedFormula(post_multiplier=1.0) != GatedFormula()  # frozen: a search key too
