"""hc-spec exit codes, --help, and the docs render/check cycle (using the session's proofs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hcspec.spec import cli, docs
from hcspec.spec.registry import ProofResult, Theorem

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cached(monkeypatch: pytest.MonkeyPatch, proof_results: dict[str, ProofResult]) -> None:
    """Make the CLI reuse the session's proofs instead of proving everything again."""
    monkeypatch.setattr(cli, "_prove", lambda theorems: [proof_results[t.id] for t in theorems])


def test_prove_only_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["prove", "--only", "ds.n1_unique", "layout.paper_rows"]) == 0
    out = capsys.readouterr().out
    assert "ds.n1_unique" in out and "layout.paper_rows" in out and "2/2 proven" in out


def test_prove_unknown_id_exits_2_with_a_clear_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["prove", "--only", "ds.n1_unique", "no.such_theorem"]) == 2
    err = capsys.readouterr().err
    assert "unknown theorem id 'no.such_theorem'" in err
    assert "ds.n1_unique" in err  # the known ids are listed


def test_prove_exits_1_when_a_proof_fails(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    def failing() -> list[object]:
        raise RuntimeError("deliberate")

    bad = Theorem("test.failing", "fails", ("none",), "test", "test", failing)  # type: ignore[arg-type]
    monkeypatch.setattr(cli, "get", lambda theorem_id: bad)
    assert cli.main(["prove", "--only", "test.failing"]) == 1
    captured = capsys.readouterr()
    assert "NOT PROVEN: test.failing" in captured.err and "0/1 proven" in captured.out


def test_list_prints_ids_and_statements(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "backward.closed_form\tall sizes\tDifferentiating L" in out
    assert "ds.n1_unique\tinstance\t" in out
    assert len(out.strip().splitlines()) >= 31


@pytest.mark.parametrize(("argv", "expected"), [
    ([], "prove"),
    (["prove"], "--only"),
    (["list"], "statement"),
    (["docs"], "--check"),
])
def test_help_explains_every_command(argv: list[str], expected: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*argv, "--help"])
    assert exit_info.value.code == 0
    assert expected in capsys.readouterr().out


def test_missing_command_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([])
    assert exit_info.value.code == 2


def test_committed_docs_match_a_fresh_render(theorems: list[Theorem],
                                             proof_results: dict[str, ProofResult]) -> None:
    pages = docs.render(theorems, list(proof_results.values()))
    report = docs.check(pages, REPO / "docs" / "derivations")
    assert report.ok, f"run `hc-spec docs`: stale {report.stale}, missing {report.missing}, " \
                      f"extra {report.extra}"


def test_render_is_deterministic(theorems: list[Theorem],
                                 proof_results: dict[str, ProofResult]) -> None:
    results = list(proof_results.values())
    assert docs.render(theorems, results) == docs.render(theorems, list(reversed(results)))


def test_docs_check_detects_stale_missing_and_extra_pages(
        tmp_path: Path, cached: None, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "derivations"
    assert cli.main(["docs", "--out", str(out)]) == 0
    assert (out / "index.md").is_file() and (out / "backward.closed_form.md").is_file()
    assert cli.main(["docs", "--check", "--out", str(out)]) == 0

    page = out / "ds.nonexpansive.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nhand edit\n", encoding="utf-8")
    (out / "ds.n1_unique.md").unlink()
    (out / "old.theorem.md").write_text(docs.GENERATED_NOTE + "\ngone\n", encoding="utf-8")
    (out / "notes.md").write_text("the user's own notes\n", encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["docs", "--check", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"stale: {out / 'ds.nonexpansive.md'}" in err
    assert f"missing: {out / 'ds.n1_unique.md'}" in err
    assert f"extra: {out / 'old.theorem.md'}" in err

    assert cli.main(["docs", "--out", str(out)]) == 0  # regenerating repairs all three
    assert not (out / "old.theorem.md").exists()
    assert (out / "notes.md").read_text(encoding="utf-8") == "the user's own notes\n"
    assert cli.main(["docs", "--check", "--out", str(out)]) == 0


def test_pages_carry_statement_assumptions_cases_source_steps_and_examples(
        theorems: list[Theorem], proof_results: dict[str, ProofResult]) -> None:
    pages = docs.render(theorems, list(proof_results.values()))
    page = pages["backward.closed_form.md"]
    theorem = next(t for t in theorems if t.id == "backward.closed_form")
    for text in (theorem.statement, theorem.cases, theorem.source, *theorem.assumptions,
                 *theorem.setting):
        assert text in page
    assert page.count("$$") >= 2 and "## Worked example" in page
    assert "0.905148" in page  # tanh(1.5), by hcspec.spec.numeric for the n = 2, d = 1 example
    assert "394,048" in pages["counts.params.md"]
    for theorem in theorems:
        assert f"({theorem.id}.md)" in pages["index.md"]


def test_docs_refuse_to_render_a_failed_proof(theorems: list[Theorem],
                                              proof_results: dict[str, ProofResult]) -> None:
    results = list(proof_results.values())
    broken = ProofResult(results[0].theorem_id, False, (), 0.0, "deliberate")
    with pytest.raises(ValueError, match=rf"not proven \['{results[0].theorem_id}'\]"):
        docs.render(theorems, [broken, *results[1:]])


def test_spec_never_imports_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, hcspec.spec as spec, hcspec.spec.theorems, hcspec.spec.cli, "
            "hcspec.spec.numeric, hcspec.spec.counts, hcspec.spec.docs; "
            "spec.all_theorems(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": ""})
    assert out.stdout.strip() == "False"


def test_docs_check_outside_the_repository_names_the_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["docs", "--check"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "docs" / "derivations") in " ".join(err.split())
    assert "--out DIR" in err and "missing:" not in err


def test_docs_check_names_the_checked_directory_when_pages_differ(
        tmp_path: Path, cached: None, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pages").mkdir()
    assert cli.main(["docs", "--check", "--out", "pages"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"checked pages ({tmp_path / 'pages'})" in err and "--out DIR" in err


def test_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["prove"], ["list"], ["docs"]):
        with pytest.raises(SystemExit):
            cli.main([*argv, "--help"])
        text = capsys.readouterr().out
        assert "``" not in text and "::" not in text, argv


def test_closed_stdout_ends_quietly() -> None:
    """`hc-spec list | head`: the reader is gone before anything is written; exit 1 with no
    BrokenPipeError traceback."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "hcspec.spec", "list"], cwd=REPO,
                              env={"PYTHONPATH": str(REPO), "PATH": ""}, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    finally:
        os.close(write_end)
    assert done.returncode == 1, done.stderr
    assert "BrokenPipe" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_docs_outside_the_repository_refuses_without_out_and_keeps_user_files(
        tmp_path: Path, cached: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A user's project with its own docs/derivations/: `hc-spec docs` refuses (exit 2, nothing
    written or deleted); with --out it writes there and leaves the user's file alone."""
    project = tmp_path / "project"
    notes = project / "docs" / "derivations" / "my_notes.md"
    notes.parent.mkdir(parents=True)
    notes.write_text("# my notes\n", encoding="utf-8")
    (project / "pyproject.toml").write_text('[project]\nname = "theirs"\n', encoding="utf-8")
    monkeypatch.chdir(project)
    assert cli.main(["docs"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "is not the hcspec repository" in err and "--out DIR" in err
    assert sorted(p.name for p in notes.parent.iterdir()) == ["my_notes.md"]

    assert cli.main(["docs", "--out", "docs/derivations"]) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "removed" not in out and " s)" in out
    assert notes.read_text(encoding="utf-8") == "# my notes\n"
    assert (notes.parent / "index.md").is_file() and (notes.parent / docs.MANIFEST).is_file()
    assert cli.main(["docs", "--check", "--out", "docs/derivations"]) == 0  # the notes are ignored


def test_docs_removes_only_stale_generated_pages_and_names_them(
        tmp_path: Path, cached: None, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pages"
    assert cli.main(["docs", "--out", str(out)]) == 0
    stale = out / "retired.theorem.md"
    stale.write_text(docs.GENERATED_NOTE + "\nold page\n", encoding="utf-8")
    manifest = docs.read_manifest(out)
    manifest[stale.name] = {"sha256": "", "key": ""}
    import json
    (out / docs.MANIFEST).write_text(json.dumps({"pages": manifest}), encoding="utf-8")
    mine = out / "user.md"  # no marker: never removed, even when named in the manifest
    mine.write_text("mine\n", encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["docs", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "removed stale generated pages: retired.theorem.md" in " ".join(said.split())
    assert not stale.exists() and mine.read_text(encoding="utf-8") == "mine\n"


def test_docs_reuse_unchanged_pages_without_proving(
        tmp_path: Path, proof_results: dict[str, ProofResult], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    proven: list[str] = []

    def counting(theorems: list[Theorem]) -> list[ProofResult]:
        proven.extend(t.id for t in theorems)
        return [proof_results[t.id] for t in theorems]

    monkeypatch.setattr(cli, "_prove", counting)
    out = tmp_path / "pages"
    assert cli.main(["docs", "--out", str(out)]) == 0
    assert len(proven) == len(proof_results)
    proven.clear()
    assert cli.main(["docs", "--check", "--out", str(out)]) == 0
    assert proven == []  # nothing changed: every page reused
    page = out / "ds.nonexpansive.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nhand edit\n", encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["docs", "--check", "--out", str(out)]) == 1
    assert proven == ["ds.nonexpansive"]  # the edited page is re-proven and found stale
    assert "stale:" in capsys.readouterr().err


def test_the_seed_claims_page_names_registered_theorems_and_known_statuses() -> None:
    from hcspec.spec import docs
    from hcspec.spec.registry import all_theorems
    from hcspec.spec.seed_claims import CLAIMS

    known = {t.id for t in all_theorems()}
    page = docs.render_seed_claims(known)
    assert page.count("\n| ") == len(CLAIMS) + 2  # header, separator, one row per claim
    assert "|θ_norm|" not in page  # a cell never breaks the table
    assert all(claim.note for claim in CLAIMS if claim.status != "proven")
    with pytest.raises(ValueError, match="unknown theorems"):
        docs.render_seed_claims(known - {"ds.nonexpansive"})


def test_the_statement_formula_is_typeset_from_the_marked_proven_step() -> None:
    from hcspec.spec import docs
    from hcspec.spec.registry import get

    theorem = get("published.hc_static_step")
    result = theorem.prove()
    assert result.ok and result.formula == 1
    page = docs.render_page(theorem, result)
    _, shown = docs.display(*result.steps[0])
    head = page[:page.index("## Derivation")]
    assert "In formulas (step 1, as proven):" in head and shown in head
    assert get("published.hc_dynamic_step").prove().formula == 1  # the step, not its entry
