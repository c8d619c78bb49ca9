"""The parallel harness on gloo ranks: the reference passes (the CI check at world size 2),
a target without the capability or a device without enough GPUs is not applicable with the
reason, a rank that raises or hangs gives one report naming it, and nothing is left behind."""

from __future__ import annotations

import json
import multiprocessing
import tempfile
import time
from pathlib import Path

import pytest
import torch

from hcspec.conformance import assert_parallel_conforms, check_parallel, cli
from hcspec.conformance import families as catalogue
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.parallel import harness
from hcspec.conformance.subjects.targets import TargetError
from tests.conformance.parallel import bad_targets

BY_ID = {p.id: p for p in catalogue.CATALOGUE if p.family == "parallel"}
PROPERTIES = tuple(BY_ID.values())


def _statuses(report: rp.Report) -> dict[str, str]:
    return {r.id: r.status for r in report.results}


def test_reference_mhc_passes_on_two_ranks() -> None:
    """The CI check: every parallel property passes for reference:mhc on 2 gloo ranks, each
    having compared real cases, with errors at float64 rounding."""
    report = check_parallel("reference:mhc", world_size=2, device="cpu")
    assert report.setup_error is None
    assert _statuses(report) == {pid: rp.PASSED for pid in BY_ID}
    for result in report.results:
        assert result.examples >= 6, result.id
        assert result.achieved is not None
        tolerance = 0.0 if result.id == "parallel.replicated_init" else 1e-12
        assert float(result.achieved["error"]) <= max(tolerance, 1e-13), result.achieved
    assert report.conventions["parallel.splits"] == "tokens, hidden"
    declared = " ".join(v for k, v in report.conventions.items()
                        if k.startswith("parallel.parameters"))
    assert "hidden: sharded, gradient completed by the target: phi_post, phi_pre, phi_res" in (
        declared)
    assert "the kit sums it over the group" in declared
    assert not multiprocessing.active_children()


@pytest.mark.slow
@pytest.mark.parametrize("target", ["reference:mhc", "reference:hc-dynamic",
                                    "reference:hc-static", "reference:mhc-fast"])
def test_reference_targets_pass_on_four_ranks(target: str) -> None:
    report = check_parallel(target, world_size=4, device="cpu")
    assert _statuses(report) == {pid: rp.PASSED for pid in BY_ID}, report.results


def test_cli_world_size_writes_the_report(tmp_path: Path) -> None:
    path = tmp_path / "parallel.json"
    code = cli.main(["run", "reference:hc-dynamic", "--world-size", "2", "--device", "cpu",
                     "--only", "parallel.forward,parallel.parameter_gradients",
                     "--json", str(path)])
    assert code == 0
    data = json.loads(path.read_text(encoding="utf-8"))
    assert [r["id"] for r in data["results"]] == ["parallel.forward",
                                                  "parallel.parameter_gradients"]
    assert all(r["status"] == "passed" for r in data["results"])
    assert data["conventions"]["parallel.world_size"] == "2 (gloo)"


def test_cli_world_size_usage_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.main(["run", "reference:mhc", "--world-size", "0"]) == 2
    assert cli.main(["run", "no_such_module_xyz:make", "--world-size", "2"]) == 2
    for name, value in {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "localhost",
                        "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(name, value)
    # under a launcher, a --world-size other than the launcher's is refused before joining
    assert cli.main(["run", "reference:mhc", "--world-size", "3", "--only", "parallel"]) == 2
    monkeypatch.setenv("RANK", "x")
    assert cli.main(["run", "reference:mhc", "--only", "parallel"]) == 2


def test_world_size_runs_the_catalogue_and_the_family_in_one_report() -> None:
    """--world-size adds the multi-process properties to the run: one report, one selection
    (prerequisites, families, globs), the common exit code."""
    report = check_parallel("reference:mhc", world_size=2, device="cpu",
                            only=["shape.output", "parallel.forward"])
    assert _statuses(report) == {"shape.output": rp.PASSED, "parallel.forward": rp.PASSED}
    assert "sharding" in report.capabilities
    assert report.conventions["parallel.world_size"] == "2 (gloo)"


def test_single_process_run_reports_the_family_not_applicable() -> None:
    from hcspec.conformance.run.session import check_implementation

    report = check_implementation("reference:mhc", device="cpu", only=["parallel"])
    assert _statuses(report) == {pid: rp.NOT_APPLICABLE for pid in BY_ID}
    assert all(r.message.startswith("runs across torch.distributed ranks, and this run is "
                                    "single-process: give --world-size N") for r in report.results)
    assert "sharding" not in report.capabilities and "parallel.run" not in report.conventions


def test_target_without_sharding_is_not_applicable() -> None:
    report = check_parallel("hcspec.conformance.adapters.reference:make_mhc", world_size=2,
                            device="cpu")
    assert set(_statuses(report).values()) == {rp.NOT_APPLICABLE}
    assert all("declares no sharding capability" in r.message for r in report.results)
    assert report.ok


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="this host has 2 CUDA devices")
def test_cuda_without_enough_devices_is_not_applicable_with_the_reason() -> None:
    if not torch.cuda.is_available():  # the common device resolution refuses it outright
        with pytest.raises(ValueError, match="--device cuda: no CUDA device"):
            check_parallel("reference:mhc", world_size=2, device="cuda")
        assert "2 ranks, 0 CUDA device(s) here" in (harness.ranks_problem("cuda", 2, None) or "")
        return
    report = check_parallel("reference:mhc", world_size=2, device="cuda")
    assert set(_statuses(report).values()) == {rp.NOT_APPLICABLE}
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert all(f"2 ranks, {found} CUDA device(s) here" in r.message for r in report.results)
    assert harness.ranks_problem("cpu", 2, None) is None
    assert "at most 8 CPU ranks" in (harness.ranks_problem("cpu", 9, None) or "")


def test_a_rank_that_raises_is_named_once(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    report = check_parallel(bad_targets.make_raising, world_size=2, device="cpu",
                            only=["parallel.forward", "parallel.replicated_init"])
    forward = report.results[1]
    assert forward.id == "parallel.forward" and forward.status == rp.ERROR
    assert forward.message.startswith(
        "RanksFailed: rank 1 raised in case 0, step 'sharded forward': RuntimeError: boom on "
        "rank 1")
    assert forward.traceback is not None and "boom on rank 1" in forward.traceback
    # no case completed on every rank: the init property cannot pass either
    assert report.results[0].status == rp.ERROR
    assert report.results[0].message == forward.message
    assert not report.ok
    assert not multiprocessing.active_children()
    assert list(tmp_path.iterdir()) == []  # the store and the results are removed


def _hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeout: float) -> rp.PropertyResult:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    start = time.monotonic()
    report = check_parallel(bad_targets.make_hanging, world_size=2, device="cpu",
                            only=["parallel.forward"], timeout=timeout)
    assert time.monotonic() - start < timeout + 60
    assert not multiprocessing.active_children()
    assert list(tmp_path.iterdir()) == []  # the store and the results are removed
    (result,) = report.results
    assert result.status == rp.ERROR
    assert f"did not finish within {timeout:g} s and were terminated" in result.message
    return result


def test_a_rank_that_hangs_is_terminated_at_the_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _hang(tmp_path, monkeypatch, timeout=2.0)
    assert "rank 1 was at: " in result.message


def test_what_a_hung_rank_saves_while_being_terminated_is_not_its_result(
        tmp_path: Path) -> None:
    """At the deadline both ranks were waiting; terminating rank 0 closes rank 1's connection,
    and rank 1 may still save that error before it is terminated too. It was reported as rank
    1's failure ('remote worker crashing') and rank 0 alone as hung, under load."""
    from hcspec.conformance.parallel import harness, worker

    for rank in (0, 1):
        worker.progress_path(tmp_path, rank).write_text(f"case 0 (step of rank {rank})")
    torch.save({"cases": {}, "error": {"time": 1.0, "case": 0, "step": "sharded forward",
                                       "type": "DistBackendError",
                                       "message": "Connection closed by peer",
                                       "traceback": "..."}},
               worker.results_path(tmp_path, 1))
    outcome = harness.RankOutcome()
    harness._collect(outcome, str(tmp_path), 2, 15.0, None, hung=[0, 1])
    assert outcome.problem is not None
    assert outcome.problem.startswith("ranks [0, 1] did not finish within 15 s")
    assert "rank 1 was at: case 0 (step of rank 1)" in outcome.problem
    assert "Connection closed" not in outcome.problem and outcome.ranks[1] == {}


@pytest.mark.slow
def test_a_rank_that_hangs_in_a_collective_is_named_with_its_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With time to reach the hang even on a loaded machine, the step is the forward."""
    result = _hang(tmp_path, monkeypatch, timeout=15.0)
    assert "rank 1 was at: case 0 (split=tokens" in result.message
    assert result.message.count("sharded forward") == 2  # rank 1 waits in recv, rank 0 in
    # the all-gather that rank 1 never joins


def test_select_and_bad_arguments() -> None:
    assert [p.id for p in catalogue.select(["parallel.*grad*"])] == [
        "parallel.input_gradients", "parallel.parameter_gradients"]
    assert [p.id for p in catalogue.select(["parallel"], ["parallel"])] == []
    with pytest.raises(catalogue.SelectionError, match="unknown property id or family"):
        catalogue.select(["parallel.nope"])
    with pytest.raises(ValueError, match="world_size must be an int >= 1"):
        check_parallel("reference:mhc", world_size=0)
    with pytest.raises(ValueError, match="--device: expected"):
        check_parallel("reference:mhc", device="tpu")
    with pytest.raises(TargetError):
        check_parallel("no_such_module_xyz:make")


def test_failure_report_names_rank_case_and_reproduction() -> None:
    from tests.mutants._parallel import rank_seeded_init

    report = check_parallel(rank_seeded_init.make, world_size=2, device="cpu",
                            only=["parallel.replicated_init"])
    (result,) = report.results
    assert result.status == rp.FAILED
    assert result.message.startswith("case 0 (split=tokens n=4 d=4 B=2 T=4 layer_index=0 "
                                     "seed=101): parameters at init, rank 1: error")
    assert result.reproduce is not None
    assert "--only parallel.replicated_init" in result.reproduce
    assert "--world-size 2 --case" in result.reproduce
    assert result.achieved is not None
    assert float(result.achieved["error"]) > 0.1 and result.achieved["tolerance"] == 0.0


def test_an_unsharded_run_that_raises_is_an_error_not_a_crash() -> None:
    report = check_parallel(bad_targets.make_unsharded_raising, world_size=2, device="cpu",
                            only=["parallel.forward"])
    (result,) = report.results
    assert result.status == rp.ERROR
    assert result.message.startswith("RanksFailed: the unsharded run raised in case 0 "
                                     "(split=tokens")
    assert "ValueError: unsharded forward refused" in result.message


def test_assert_parallel_conforms() -> None:
    from tests.mutants._parallel import partial_projection_not_summed as mutant

    report = assert_parallel_conforms("reference:hc-dynamic", world_size=2, device="cpu",
                                      only=["parallel.forward"])
    assert [r.status for r in report.results] == [rp.PASSED]
    with pytest.raises(AssertionError, match=r"parallel.forward failed: case 3 \(split=hidden"):
        assert_parallel_conforms(mutant.make, world_size=2, device="cpu",
                                 only=["parallel.forward"])


@pytest.mark.slow
def test_spawned_ranks_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The start method CUDA needs (spawn: the job is pickled, each rank imports the kit)."""
    monkeypatch.setattr(harness, "_start_method", lambda device: "spawn")
    report = check_parallel("reference:mhc", world_size=2, device="cpu",
                            only=["parallel.forward", "parallel.parameter_gradients"])
    assert [r.status for r in report.results] == [rp.PASSED, rp.PASSED]
    assert "(gloo, spawn)" in report.conventions["parallel.run"]


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 1, reason="no CUDA device available")
def test_nccl_one_rank_per_gpu() -> None:
    """NCCL with as many ranks as GPUs (at most 2): the reference passes on CUDA."""
    world = min(2, torch.cuda.device_count())
    report = check_parallel("reference:mhc", world_size=world, device="cuda")
    assert report.device == "cuda"
    expected = {p.id: rp.PASSED for p in PROPERTIES}
    if world < 2:
        expected["parallel.world_size"] = rp.NOT_APPLICABLE
    assert {r.id: r.status for r in report.results} == expected, report.results
