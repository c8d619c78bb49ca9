"""docs/findings/liger_kernel.md is rendered from the committed JSON reports (the Triton
targets: liger_kernel:mhc, and hyper_connections:mhc-triton from reports/kernels/) and its
preamble classifies every failure they contain. Needs neither liger-kernel nor Triton."""

from __future__ import annotations

from pathlib import Path

from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp

ROOT = Path(__file__).resolve().parents[2]
FINDINGS = ROOT / "docs" / "findings"
TITLE = "Findings: liger-kernel 0.8.5 (and hyper-connections' Triton Sinkhorn)"


def test_liger_findings_are_rendered_from_the_committed_reports() -> None:
    paths = sorted(FINDINGS.glob("reports/liger_kernel_*.json"))
    paths += sorted(FINDINGS.glob("reports/kernels/*.json"))
    reports = [rp.Report.read_json(p) for p in paths]
    assert "liger_kernel:mhc" in {r.target for r in reports}
    preamble = (FINDINGS / "src" / "liger_kernel.md").read_text(encoding="utf-8")
    want = md.reports_to_markdown(reports, title=TITLE, preamble=preamble)
    assert (FINDINGS / "liger_kernel.md").read_text(encoding="utf-8") == want, (
        "stale: rerun the command at the end of the preamble")
    failures = {(r.target, x.id) for r in reports for x in r.results if x.status == rp.FAILED}
    assert failures and all(pid in preamble for _, pid in failures)  # every failure classified
    assert all(r.profile == "kernel" for r in reports)
