"""The venv parts of the benchmark: subject lists, merging, the kept tail of the report."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from benchmarks import run, venvs
from benchmarks.connection import ConfigResult, Row
from benchmarks.subjects import Config


def _result(rows: list[Row]) -> ConfigResult:
    return ConfigResult(Config("main", 1, 2, 4, 8, torch.bfloat16), 3, rows)


def test_every_part_remeasures_the_reference_rows_and_owns_its_prefixes() -> None:
    for part in venvs.PARTS:
        names = part.subjects()
        assert names[:4] == ["branch only", "residual", "reference:mhc", "reference:mhc-fast"]
        assert all(n.split(":", 1)[0] in part.prefixes for n in names[4:]
                   if n not in part.extra_subjects)
    assert "transformers:deepseek-v4" in venvs.BY_NAME["tf523"].subjects()
    assert "tile_kernels:mhc" in venvs.BY_NAME["pkgs"].subjects()
    assert [p.name for p in venvs.chosen("all")] == ["pkgs", "tf523", "nemo", "mlx"]
    assert [p.name for p in venvs.chosen("mlx,pkgs")] == ["pkgs", "mlx"]
    with pytest.raises(ValueError, match="unknown venv part"):
        venvs.chosen("pkgs,nope")


def test_merge_replaces_skipped_rows_appends_new_ones_and_keeps_the_parent_reference() -> None:
    parent = _result([Row("reference:mhc-fast", "hcspec", "mhc", minus_branch=0.1, relative=1.0),
                      Row("transformers:deepseek-v4", "third-party", skipped="not importable")])
    child = _result([Row("reference:mhc-fast", "hcspec", "mhc", minus_branch=0.3, relative=1.0,
                         run="tf523"),
                     Row("transformers:deepseek-v4", "third-party", "mhc", minus_branch=1.2,
                         relative=4.0, run="tf523"),
                     Row("transformers:hy-v4", "third-party", "mhc", minus_branch=0.6,
                         relative=2.0, run="tf523", peak=5)])
    mlx = _result([Row("mlx_lm:deepseek-v41", "third-party", "mhc", minus_branch=0.6,
                       relative=3.0, run="mlx", peak=0, saved=0)])
    runs = [venvs.PartRun(venvs.BY_NAME["tf523"], {"main": child}),
            venvs.PartRun(venvs.BY_NAME["mlx"], {"main": mlx})]
    merged = venvs.merge(parent, runs)
    names = [r.name for r in merged.rows]
    assert names == ["reference:mhc-fast", "transformers:deepseek-v4", "transformers:hy-v4",
                     "mlx_lm:deepseek-v41"]
    assert merged.rows[0].minus_branch == 0.1 and merged.rows[0].run == ""
    assert merged.rows[1].relative == 4.0 and merged.rows[1].run == "tf523"
    assert merged.rows[3].peak is None and "bridge" in merged.rows[3].note
    assert venvs.reference_time(runs[0], "main") is child.rows[0]


def test_config_result_round_trips_through_json_fields() -> None:
    result = _result([Row("residual", "hcspec", "residual", minus_branch=0.5, relative=0.1,
                          step_iqr=(1.0, 2.0), run="pkgs")])
    back = ConfigResult.from_dict(result.to_dict())
    assert back.config == result.config and back.rows == result.rows


def test_missing_venv_is_reported_not_run(tmp_path: Path) -> None:
    part = venvs.Part("ghost", str(tmp_path / "absent"), ("x",), "nothing")
    got = venvs.run_part(part, ["main"], 1, 1, quick=True)
    assert got.results == {} and "not built" in got.problem


def test_the_kept_tail_survives_regeneration(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    assert run.kept_tail(out) == ""
    out.write_text(f"# old\n\n{run.KEEP_MARKER}\n\n## Time to verdict\n\nfigures\n")
    assert run.kept_tail(out) == "## Time to verdict\n\nfigures"
    out.write_text("# old\n\n## Goals\n\nx\n\n## Time to verdict\n\nfigures\n")
    assert run.kept_tail(out) == "## Time to verdict\n\nfigures"
    out.write_text("# old\n\n## Goals\n")
    assert run.kept_tail(out) == ""


@pytest.mark.slow
def test_a_part_runs_in_a_child_process_and_remeasures_the_reference() -> None:
    """The ``mlx`` part run by this interpreter (as if it were the part's venv): its reference
    rows are measured there with a same-run ratio, its own targets are rows (skipped with the
    reason where MLX is not installed)."""
    part = venvs.Part("mlx", sys.prefix, ("mlx_lm",), "this interpreter", torch_memory=False)
    got = venvs.run_part(part, ["main"], 1, 1, quick=True)
    assert got.problem == "", got.problem
    rows = {r.name: r for r in got.results["main"].rows}
    assert rows["reference:mhc-fast"].relative == 1.0
    assert rows["reference:mhc-fast"].run == "mlx"
    assert rows["reference:mhc"].relative is not None and rows["reference:mhc"].relative > 0
    assert "mlx_lm:deepseek-v41" in rows


def test_kit_section_times_a_target_in_the_venv_that_holds_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import kit

    calls: list[tuple[str, str, Path | None, str]] = []

    def fake_run_kit(target: str, profile: str, threads: int, extra_paths: list[str],
                     timeout: float, python: Path | None = None, venv: str = "") -> kit.KitRun:
        calls.append((target, profile, python, venv))
        return kit.KitRun(f"{target} ({venv})", profile, 1.0, 0)

    monkeypatch.setattr(kit, "run_kit", fake_run_kit)
    here = venvs.Part("here", str(Path(sys.executable).parents[1]), ("transformers",), "x")
    gone = venvs.Part("gone", ".venv-that-does-not-exist", ("x_transformers",), "y")
    runs: list[kit.KitRun] = []
    left = run._kit_in_venvs([here, gone], [("transformers:hy-v4", "no module"),
                                            ("x_transformers:hc", "no module"),
                                            ("vllm:mhc-torch", "no checkout")], runs, 1, 60.0)
    assert calls == [("transformers:hy-v4", "ci", here.python, "here")]
    assert [r.label for r in runs] == ["transformers:hy-v4 (here)"]
    assert left == [("x_transformers:hc", "no module"), ("vllm:mhc-torch", "no checkout")]
