"""The benchmark runs end to end at smoke-test size, and its measuring tools measure right.

No timing is asserted anywhere: only that the run completes and writes the expected tables,
and that the memory and work counts equal values worked out by hand.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from benchmarks import markdown as md
from benchmarks import roofline, run
from benchmarks.measure import Step, peak_bytes, saved_bytes, time_interleaved
from benchmarks.subjects import Config, is_third_party, subjects

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


@pytest.mark.slow
def test_quick_run_writes_every_table(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    out.write_text(f"# old\n\n{run.KEEP_MARKER}\n\n## Time to verdict\n\nkept figures\n")
    assert run.main(["--quick", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.endswith(f"{run.KEEP_MARKER}\n\n## Time to verdict\n\nkept figures\n")
    assert "# old" not in text and text.count(run.KEEP_MARKER) == 1
    for title in ("**Machine**", "**Connection cost, main: B=1 T=8 n=4 d=32 float32 cpu",
                  "**Connection cost, deepseek-v4: B=1 T=8 n=4 d=64 bfloat16 cpu",
                  "**Roofline, deepseek-v4:",
                  "**Machine limits (cpu, float32)**", "**Roofline, main:",
                  "**Allocator effect, main:",
                  "**Sinkhorn–Knopp error,", "**Sinkhorn–Knopp cost,",
                  "**The kit itself", "## GPU", "**Goals, at the main"):
        assert title in text, title
    for subject in ("| branch only |", "| residual |", "| reference:hc-static |",
                    "| reference:hc-dynamic |", "| reference:mhc |", "| reference:mhc-fast |",
                    "| reference:mhc recompute |", "| reference:mhc-fast recompute |",
                    "| hc-spec prove --only counts.params |"):
        assert subject in text, subject
    if torch.cuda.is_available():
        assert "(GPU)" in text
    else:
        assert "Skipped: no CUDA device" in text
    plots = [tmp_path / "benchmarks" / "connection.png", tmp_path / "benchmarks" / "sinkhorn.png"]
    if HAS_MATPLOTLIB:
        assert all(p.stat().st_size > 0 for p in plots)
        assert "](benchmarks/sinkhorn.png)" in text
    else:
        assert "no plot: matplotlib is not installed" in text


def test_unknown_section_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run.main(["--sections", "connection,nope"])
    assert exc.value.code == 2
    assert "unknown section(s) nope" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.main(["--sections", "roofline"])  # needs the connection section's times


def test_unknown_subject_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run.main(["--quick", "--sections", "connection", "--subjects", "nope",
                     "--out", str(tmp_path / "b.md")])
    assert code == 2
    assert "unknown subject(s) nope" in capsys.readouterr().err


def test_peak_and_saved_bytes_are_exact() -> None:
    # y = exp(2x): forward keeps exp's output (1 unit); backward makes grad·y, then ·2, then
    # x.grad, while y and the upstream gradient's product are alive: peak 3 units, 1 saved
    # (plus the few bytes of the scalar 2 as a tensor).
    unit = 1000 * 1000 * 4
    x = torch.randn(1000, 1000, requires_grad=True)
    step = Step(lambda: (2 * x).exp(), torch.ones(1000, 1000), [x])
    assert saved_bytes(step) == unit
    assert 3 * unit <= peak_bytes(step, "cpu") <= 3 * unit + 64
    assert x.grad is None  # the measurements leave no gradient behind


def test_interleaved_timing_runs_every_subject_each_round() -> None:
    calls: list[str] = []
    x = torch.ones(3, requires_grad=True)

    def forward(name: str) -> torch.Tensor:
        calls.append(name)
        return x * 2

    steps = {name: Step(lambda name=name: forward(name), torch.ones(3), [x])  # type: ignore[misc]
             for name in ("a", "b", "c")}
    timings = time_interleaved(steps, rounds=12, warmup=1, device="cpu")
    assert calls[:3] == ["a", "b", "c"]  # warm-up, in the given order
    rounds = [calls[i:i + 3] for i in range(3, len(calls), 3)]
    assert len(rounds) == 12 and all(sorted(r) == ["a", "b", "c"] for r in rounds)
    # the order is shuffled per round: no subject always follows the same neighbour
    followers = {name: {r[r.index(name) + 1] for r in rounds if r[-1] != name} for name in "abc"}
    assert all(len(f) == 2 for f in followers.values()), followers
    assert all(len(t.step) == 12 and len(t.forward) == 12 for t in timings.values())
    calls.clear()
    time_interleaved(steps, rounds=12, warmup=1, device="cpu")
    assert [calls[i:i + 3] for i in range(3, len(calls), 3)] == rounds  # seeded: runs repeat
    with pytest.raises(ValueError, match="rounds >= 1"):
        time_interleaved(steps, rounds=0, warmup=0, device="cpu")


def test_work_counts_by_hand() -> None:
    config = Config("t", batch=2, tokens=3, n=2, d=5)  # float32: 4 bytes
    tokens, state, stream = 6, 6 * 2 * 5 * 4, 6 * 5 * 4
    # residual: 3 streams forward (x, z, out) + 3 backward; 1 add per element each way
    assert roofline.work("residual", config) == (6 * stream, 3 * tokens * 5)
    # static HC, n = 2, d = 5: 2nd(n+2) = 80 FLOPs per token forward; params n(n+2) = 8
    assert roofline.work("hc-static", config) == (5 * state + 5 * stream + 3 * 8 * 4,
                                                  3 * tokens * 80)
    # mHC, t = 20: m = n² + 2n = 8; connection 80 + φ 2·10·8 + RMS 2·10 + 3 + gates 3·8 + 3·2
    # + exp 4 + Sinkhorn 4·20·4 = 617 FLOPs per token
    nbytes, flops = roofline.work("mhc", config)  # type: ignore[misc]
    assert flops == 3 * tokens * 617
    assert nbytes == 5 * state + 5 * stream + 3 * (10 * 8 + 8 + 3) * 4
    assert roofline.work("something-else", config) is None


def test_markdown_table() -> None:
    t = md.Table("T", ["name", "ms", "what"])
    t.add("a|b", "1.5", "text")
    t.add("c", "–", "more")
    assert t.markdown().splitlines() == [
        "**T**", "", "| name | ms | what |", "| --- | ---: | --- |",
        "| a\\|b | 1.5 | text |", "| c | – | more |"]
    with pytest.raises(ValueError, match="row has 2 cells"):
        t.add("x", "y")


def test_subjects_include_builtin_targets_and_classify_origin() -> None:
    names = [s.name for s in subjects(["some_pkg.adapter:make"])]
    assert names[:2] == ["branch only", "residual"]
    assert {"reference:mhc", "reference:mhc-fast", "reference:mhc recompute"} <= set(names)
    assert names[-1] == "some_pkg.adapter:make"
    assert is_third_party("hyper_connections:mhc") and is_third_party("some_pkg.adapter:make")
    assert not is_third_party("reference:mhc")
    assert not is_third_party("hcspec.reference.targets:mhc")
    assert not is_third_party("residual")


@pytest.mark.slow
def test_the_ggml_forward_rows_have_a_ratio_to_the_reference() -> None:
    from benchmarks import connection, ggml_forward
    from benchmarks.subjects import Config
    from hcspec.conformance.native import build

    if build.unavailable() is not None:
        pytest.skip(str(build.unavailable()))
    config = Config("tiny", 1, 4, 4, 16)
    rows = ggml_forward.measure_ggml_forward(config, rounds=2, warmup=1)
    names = [r.name for r in rows]
    assert names[0] == connection.BASELINE and len(names) == 4
    assert rows[0].relative == 1.0
    assert all(r.forward and r.forward > 0 and r.relative and r.bound for r in rows)
    text = ggml_forward.ggml_table(config, 2, rows).markdown()
    assert "llama_cpp:deepseek-v4 (2 threads)" in text
