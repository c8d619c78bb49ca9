"""The kit rejects known-bad implementations: every mutant in tests/mutants is caught under
``ci``, by the property ids its docstring and ``CAUGHT_BY`` name, and the corpus covers every
bug class docs/conformance.md lists (including the twelve public bug reports).

Each mutant is run in-process with ``only=CAUGHT_BY``: a property's status depends only on its
own check and on its prerequisites (which ``only`` adds), so this is the verdict a full ``ci``
run gives for those ids, at a fraction of the time. One test runs the real CLI in a
subprocess; ``python -m tools.mutation`` runs the full catalogue per mutant (the table).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hcspec.conformance.families import BY_ID
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation
from hcspec.conformance.strategies import Case
from tools import mutation

ROOT = Path(__file__).resolve().parents[2]
MUTANTS = mutation.discover()
BY_NAME = {m.name: m for m in MUTANTS}

BUG_CLASSES = {  # the documented bug classes -> the mutant(s) that stand for them
    "layout: H_resᵀ for H_res": ["h_res_transposed"],
    "layout: h_pre and h_post swapped": ["h_pre_h_post_swapped"],
    "layout: folded as [n·B] vs [B·n]": ["folded_wrong_order"],
    "layout: streams on the wrong axis": ["streams_wrong_axis"],
    "layout: reduce mean vs sum": ["reduce_mean_declared_sum", "reduce_sum_declared_mean"],
    "sublayer: branch once per stream": ["branch_per_stream"],
    "sublayer: branch fed the concatenation": ["branch_concat_streams"],
    "sublayer: output written to one stream": ["branch_one_stream"],
    "Sinkhorn: rows only": ["sinkhorn_rows_only"],
    "Sinkhorn: columns only": ["sinkhorn_columns_only"],
    "Sinkhorn: too few iterations": ["sinkhorn_too_few_iterations",
                                     "sinkhorn_bf16_state_two_rounds"],
    "Sinkhorn: plain-domain exp overflows": ["sinkhorn_plain_domain"],
    "Sinkhorn: softmax in place of Sinkhorn": ["sinkhorn_softmax_flat", "sinkhorn_rows_only"],
    "Sinkhorn: ε so large that sums drift": ["sinkhorn_large_eps"],
    "Sinkhorn: wrong axes of [B,T,n,n]": ["sinkhorn_mixes_tokens"],
    "ranges: H_post = σ": ["h_post_sigma"],
    "ranges: H_pre = tanh": ["h_pre_tanh"],
    "ranges: additive gate eps dropped (σ + eps)": ["published_gate_eps_dropped"],
    "ranges: static init A_m = ones": ["static_init_ones"],
    "gradients: residual detached": ["residual_detached"],
    "gradients: Sinkhorn gradient stopped": ["sinkhorn_grad_stopped"],
    "gradients: custom backward transposed": ["backward_transposed"],
    "gradients: wrong only in float32": ["grad_float32_cast"],
    "state: input modified in place": ["input_in_place"],
    "state: parameters updated during forward": ["running_stat_in_eval"],
    "dtype: H_res in bfloat16, not cast back": ["mixing_bfloat16"],
    "device: hard-coded .cuda()/.cpu()": ["hardcoded_cuda", "hardcoded_cpu"],
}


def test_corpus_size_and_the_eight_classic_bugs() -> None:
    assert len(MUTANTS) >= 25
    assert {"h_res_transposed", "sinkhorn_rows_only", "sinkhorn_plain_domain",
            "branch_per_stream", "h_post_sigma", "folded_wrong_order", "input_in_place",
            "residual_detached"} <= set(BY_NAME)


@pytest.mark.parametrize("bug_class", sorted(BUG_CLASSES))
def test_every_bug_class_has_a_mutant(bug_class: str) -> None:
    for name in BUG_CLASSES[bug_class]:
        assert name in BY_NAME, (bug_class, name)


def test_every_public_bug_report_has_a_mutant() -> None:
    reports = {int(n) for m in MUTANTS for n in re.findall(r"report #(\d+)", m.bug_class)}
    assert reports == set(range(1, 13))


def test_a_malformed_mutant_is_refused(tmp_path: Path) -> None:
    bad = type(sys)("bad_mutant")
    bad.__doc__ = "no ids named here"
    bad.make = lambda *a, **k: None  # type: ignore[attr-defined]
    bad.BUG_CLASS = "x"  # type: ignore[attr-defined]
    bad.CAUGHT_BY = ("law.reported",)  # type: ignore[attr-defined]
    with pytest.raises(mutation.MutantError, match="docstring must name"):
        mutation.load(bad)
    bad.CAUGHT_BY = ("law.no_such_property",)  # type: ignore[attr-defined]
    with pytest.raises(mutation.MutantError, match="unknown property ids"):
        mutation.load(bad)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_mutant_is_caught_by_its_properties_under_ci(name: str) -> None:
    mutant = BY_NAME[name]
    reason = mutation.skip_reason(mutant)
    if reason is not None:
        pytest.skip(reason)
    assert all(pid in BY_ID for pid in mutant.caught_by)
    report = check_implementation(mutant.module.make, profile="ci", device="cpu",
                                  only=mutant.caught_by)
    results = {r.id: r for r in report.results}
    for pid in mutant.caught_by:
        result = results[pid]
        assert result.status == rp.FAILED, (pid, result.status, result.message)
        assert result.message
        assert result.counterexample and result.reproduce and pid in result.reproduce
    assert not report.ok


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_mutant_is_caught_by_its_properties_under_quick(name: str) -> None:
    """``quick`` gates too: every mutant is caught by the properties that name its bug, except
    the ones :data:`tools.mutation.QUICK_GIVES_UP` lists with the reason."""
    mutant = BY_NAME[name]
    reason = mutation.skip_reason(mutant)
    if reason is not None:
        pytest.skip(reason)
    given_up = mutation.QUICK_GIVES_UP.get(name, {})
    report = check_implementation(mutant.module.make, profile="quick", device="cpu",
                                  only=mutant.caught_by)
    results = {r.id: r for r in report.results}
    for pid in mutant.caught_by:
        if pid in given_up:
            assert results[pid].status != rp.FAILED, (
                f"{name}: quick now catches {pid}; remove it from QUICK_GIVES_UP")
            continue
        assert results[pid].status == rp.FAILED, (pid, results[pid].status,
                                                  results[pid].message)


def test_recipe_of_public_report_1_is_an_explicit_example() -> None:
    """n = 4, d = 8, B = 1, T = 3, stream i constant i + 1, H_res a cyclic permutation,
    F ≡ 0: the unmixed mutant fails at that very case (the explicit example the failure is
    shrunk from), and the message of the shrunk case (two streams) still shows them."""
    report = check_implementation(BY_NAME["width_returns_unmixed"].module.make, profile="ci",
                                  device="cpu", only=["law.permutation_mixing"])
    result = next(r for r in report.results if r.id == "law.permutation_mixing")
    assert result.status == rp.FAILED
    case = json.loads(result.shrunk_from or "{}")
    assert (case["n"], case["d"], case["batch"], case["tokens"]) == (4, 8, 1, 3)
    assert case["branch"] == "zero" and case["perturb"] == 0.0
    shrunk = json.loads(result.counterexample or "{}")
    assert (shrunk["n"], shrunk["batch"], shrunk["tokens"]) == (2, 1, 1)
    assert "came out as [1, 2], expected [2, 1]" in result.message
    replay = check_implementation(BY_NAME["width_returns_unmixed"].module.make, device="cpu",
                                  only=["law.permutation_mixing"],
                                  case=Case(**case))
    recipe = next(r for r in replay.results if r.id == "law.permutation_mixing")
    assert "came out as [1, 2, 3, 4], expected [2, 3, 4, 1]" in recipe.message


@pytest.mark.slow
def test_cli_subprocess_exits_1_and_names_the_property(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("HC_CONFORMANCE_TARGET", None)
    done = subprocess.run(
        [sys.executable, "-m", "hcspec.conformance", "run", "tests.mutants.sinkhorn_rows_only:make",
         "--profile", "ci", "--device", "cpu", "--only", "constraints.h_res_other_axis",
         "--json", str(path), "--no-progress"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED constraints.h_res_other_axis" in done.stdout
    data = json.loads(path.read_text(encoding="utf-8"))
    statuses = {r["id"]: r["status"] for r in data["results"]}
    assert statuses["constraints.h_res_other_axis"] == "failed"


@pytest.mark.slow
def test_mutation_table_reports_kill_and_time(capsys: pytest.CaptureFixture[str]) -> None:
    code = mutation.main(["h_res_transposed", "branch_per_stream", "--no-expected"])
    out = capsys.readouterr().out
    assert code == 0
    assert "kill rate: 2/2 = 100.0% under ci" in out
    assert "law.reported (failed)" in out and "shape.branch_once (failed)" in out
    result = mutation.run_mutant(BY_NAME["h_res_transposed"])
    assert result.killed and result.first == "law.reported" and result.expected
    assert 0.0 < result.seconds < mutation.KILL_GOAL_SECONDS


def test_needs_cuda_mutant_is_skipped_with_reason_without_cuda() -> None:
    result = mutation.run_mutant(BY_NAME["hardcoded_cpu"])
    if torch.cuda.is_available():
        assert result.killed
    else:
        assert result.killed is None and result.skipped and "CUDA" in result.skipped
