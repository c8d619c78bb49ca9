"""``hc-conformance report REPORT.json --markdown``: every property's status and achieved
error, each failure's counterexample and reproduction line, the header and warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from hcspec.conformance import cli
from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp


def _report() -> rp.Report:
    report = rp.Report(target="pkg:t", kit_version="0.1.0", profile="thorough", seed=0,
                       device="cpu", dtype="float64", kind="mhc", description="a | target",
                       capabilities=["weights"], conventions={"sinkhorn_exact_axis": "columns"},
                       versions={"torch": "2.13.0", "pkg": "1.2"},
                       warnings=["forward is not deterministic"])
    report.results = [
        rp.PropertyResult("law.reported", "law", "the law", "layout.paper_rows", rp.PASSED,
                          examples=107, seconds=1.5,
                          worst={"label": "X'", "error": 7.1e-7, "tolerance": 3.1e-5}),
        rp.PropertyResult("constraints.extreme_logits", "constraints", "extreme", None,
                          rp.FAILED, examples=3, failure=rp.failure_from_fields(
                              rp.FAILED, message="an H_res column sums to 0",
                              achieved={"label": "sum", "error": 1.0, "tolerance": 9.5e-6},
                              counterexample='{"n":4}',
                              reproduce="hc-conformance run pkg:t --case x")),
        rp.PropertyResult("law.probed", "law", "probes", None, rp.NOT_APPLICABLE,
                          note="needs a full-row-rank state"),
        rp.PropertyResult("state.input_unchanged", "state", "input", None, rp.ERROR,
                          failure=rp.failure_from_fields(
                              rp.ERROR, message="RuntimeError: boom",
                              traceback="Traceback...\nRuntimeError: boom")),
    ]
    return report


def test_markdown_has_every_property_and_each_failure() -> None:
    text = md.to_markdown(_report())
    assert text.startswith("## `pkg:t`")
    assert "a \\| target" not in text  # the description is prose, not a cell
    assert "| `law.reported` | passed | 107 | 1.50 | 7.1e-07 / 3.1e-05 |  |" in text
    assert "| `constraints.extreme_logits` | **failed** | 3 |" in text
    assert "| `law.probed` | not_applicable | 0 | 0.00 |  | needs a full-row-rank state |" in text
    assert "minimal counterexample: `{\"n\":4}`" in text
    assert "reproduce: `hc-conformance run pkg:t --case x`" in text
    assert "exception: `RuntimeError: boom`" in text
    assert "| sinkhorn_exact_axis | columns |" in text
    assert "**warning**: forward is not deterministic" in text
    assert "Summary: 1 passed, 1 failed, 1 error, 1 not_applicable — FAILED" in text


def test_cli_renders_json_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.json"
    _report().write_json(path)
    preamble = tmp_path / "notes.md"
    preamble.write_text("Install notes.\n", encoding="utf-8")
    out = tmp_path / "findings.md"
    assert cli.main(["report", str(path), str(path), "--markdown", "-o", str(out),
                     "--title", "Findings: pkg", "--preamble", str(preamble)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Findings: pkg\n\nInstall notes.\n")
    assert text.count("\n## `pkg:t`") == 2  # one section per report, under the title
    assert "| `pkg:t` | 1 | 1 | 1 | 0 | 0 | 0 | 1 | FAILED |" in text
    assert cli.main(["report", str(path), "--markdown"]) == 0
    assert "## `pkg:t`" in capsys.readouterr().out


def test_cli_report_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{\"target\": 1}", encoding="utf-8")
    assert cli.main(["report", str(bad), "--markdown"]) == 2
    assert "not a conformance report" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path / "missing.json"), "--markdown"]) == 2


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("package", "title"), [
    ("hyper_connections", "Findings: hyper-connections 0.4.11"),
    ("mhc_pytorch", "Findings: mhc-pytorch 0.2.3"),
    ("x_transformers", "Findings: x-transformers 2.31.10"),
    ("megatron_lm", "Findings: Megatron-LM hyper_connection.py (main, d98e8a64)"),
    ("nano_deepseek_v4", "Findings: nano-deepseek-v4 0.2.0"),
    ("tile_kernels", "Findings: tile-kernels 1.0.0 (torch references)"),
    ("transformers", "Findings: transformers 5.23.0 and 5.8.0 (DeepSeek-V4, GLM-5-Next, HY-V4)"),
])
def test_findings_are_rendered_from_the_committed_reports(package: str, title: str) -> None:
    findings = ROOT / "docs" / "findings"
    reports = [rp.Report.read_json(p) for p in sorted(findings.glob(f"reports/{package}_*.json"))]
    preamble = (findings / "src" / f"{package}.md").read_text(encoding="utf-8")
    want = md.reports_to_markdown(reports, title=title, preamble=preamble)
    assert (findings / f"{package}.md").read_text(encoding="utf-8") == want, (
        "stale: rerun the command at the end of the preamble")
    failures = {(r.target, x.id) for r in reports for x in r.results if x.status == rp.FAILED}
    assert failures and all(pid in preamble for _, pid in failures)  # every failure classified
