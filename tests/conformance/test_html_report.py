"""The HTML report (``hcspec.conformance.outputs.html_report``): the error ÷ allowance bar, the
depth plot's geometry, escaping, a failure with its counterexample and reproduction command, a
not-applicable row with its reason, a page that fetches nothing; the CLI's ``--html``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hcspec.conformance import cli
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.outputs.failure import Failure
from hcspec.conformance.outputs.html_report import plot, ratio_bar, render_html
from tests.conformance.html_page import Element, by_id, read

EVIL = "<script>alert('x')</script> & \"quoted\""
REPRODUCE = ("hc-conformance run my.adapter:make --only law.reported --profile quick --device "
             "cpu --case '{\"batch\":1,\"tokens\":1,\"n\":2,\"d\":3,\"branch\":\"zero\"}'")
COUNTEREXAMPLE = '{"batch":1,"tokens":1,"n":2,"d":3,"branch":"zero"}'


def _failed(message: str = "X' vs the law: error 0.5 > tolerance 2.2e-11") -> rp.PropertyResult:
    result = rp.PropertyResult(id="law.reported", family="law", statement="X' = H_res X + …",
                               theorem="layout.paper_rows", status=rp.FAILED, examples=2)
    result.set_failure(Failure(kind="failed", exception="PropertyFailure", message=message,
                               label="X' vs the law", error=0.5, tolerance=2.2e-11,
                               counterexample=COUNTEREXAMPLE, reproduce=REPRODUCE))
    return result


def _report(**changes: object) -> rp.Report:
    report = rp.Report(target="my.adapter:make", kit_version="0.1.0", profile="quick", seed=0,
                       device="cpu", dtype="float64", kind="mhc", capabilities=["weights"],
                       conventions={"branch_input": "x_in"}, versions={"torch": "2.13.0"})
    passed = rp.PropertyResult(id="law.probed", family="law", statement="probes", theorem=None,
                               status=rp.PASSED, examples=7,
                               worst={"label": "X'", "error": 1e-13, "tolerance": 1e-11})
    skipped = rp.PropertyResult(id="device.cuda_matches_cpu", family="device", statement="cuda",
                                theorem=None, status=rp.NOT_APPLICABLE,
                                note="compares the CUDA forward with the CPU forward; no "
                                        "CUDA device")
    report.results = [passed, _failed(), skipped]
    for key, value in changes.items():
        setattr(report, key, value)
    return report


def _row(elements: list[Element], prop_id: str) -> list[Element]:
    """The cells of the property table's row of ``prop_id``."""
    rows = [e for e in elements if e.tag == "tr"]
    cells: list[list[Element]] = []
    current: list[Element] | None = None
    for e in elements:
        if e.tag == "tr":
            current = []
            cells.append(current)
        elif e.tag == "td" and current is not None:
            current.append(e)
    found = [c for row, c in zip(rows, cells, strict=True)
             if c and c[0].text.startswith(prop_id) and len(c) == 6]
    assert len(found) == 1, prop_id
    return found[0]


# --- the bar -----------------------------------------------------------------------------
@pytest.mark.parametrize(("error", "tolerance", "width", "over"), [
    (1e-13, 1e-11, 50.0, False),    # ratio 1e-2: 4 of the 8 decades from 1e-6
    (2e-11, 2e-11, 75.0, False),    # at the allowance: the allowance line
    (1e-6, 1.0, 0.0, False),        # ratio 1e-6: empty
    (1e-9, 1.0, 0.0, False),        # below the scale: empty, not negative
    (1.0, 1e-2, 100.0, True),       # ratio 1e2: full
    (0.5, 2.2e-11, 100.0, True),    # far past it: full, not wider
    (0.0, 1e-11, 0.0, False),       # an exact result
    (1e-3, 0.0, 100.0, True),       # any error against a zero tolerance
    (math.nan, 1e-11, 100.0, True),  # a NaN error is a failure, never a pass
    ("nan", "1e-11", 100.0, True),  # as a failure's JSON writes it
])
def test_the_bar_is_error_over_allowance_on_a_log_scale(error: object, tolerance: object,
                                                          width: float, over: bool) -> None:
    bar = ratio_bar(error, tolerance)
    assert bar is not None and bar.width == pytest.approx(width) and bar.over is over


def test_no_bar_for_a_reported_figure_without_bound_or_missing_figures() -> None:
    assert ratio_bar(10.3, 1.7976931348623157e308) is None  # depth.hc_growth
    assert ratio_bar(10.3, math.inf) is None
    assert ratio_bar(None, 1e-11) is None and ratio_bar(1e-3, None) is None
    assert ratio_bar(True, 1.0) is None


# --- the plot ----------------------------------------------------------------------------
def test_the_plot_is_log_scaled_in_whole_decades_with_room() -> None:
    got = plot("‖X_l‖ / ‖X_0‖", {"a": [1.0, 10.0, 100.0], "b": [1.0, 0.0, -1.0, math.inf]})
    assert got is not None
    assert [t.label for t in got.y_ticks] == ["0.1", "1", "10", "100", "1e3"]
    (a, b) = got.curves
    points = [tuple(map(float, p.split(","))) for p in a.points.split()]
    span = got.bottom - got.top  # 4 decades, 0.1 at the bottom, 1e3 at the top
    step = (got.right - got.left) / 3  # x spans the longest curve, b: steps 0 … 3
    assert [x for x, _ in points] == pytest.approx([got.left, got.left + step,
                                                    got.left + 2 * step], abs=0.1)
    assert [y for _, y in points] == pytest.approx(
        [got.bottom - span / 4, got.bottom - span / 2, got.bottom - 3 * span / 4], abs=0.1)
    assert len(b.points.split()) == 1  # 0, -1 and inf cannot be drawn on a log axis
    assert a.colour != b.colour
    assert plot("q", {"a": [0.0, -1.0]}) is None and plot("q", {}) is None


def test_the_plot_of_constant_values_has_a_decade_each_side() -> None:
    got = plot("q", {"flat": [1.0, 1.0]})
    assert got is not None and [t.label for t in got.y_ticks] == ["0.1", "1", "10"]


# --- the page ----------------------------------------------------------------------------
def test_everything_from_the_report_is_escaped() -> None:
    result = _failed(message=EVIL)
    result.series = {EVIL: {EVIL: [1.0, 2.0]}}
    report = _report(target=EVIL, description=EVIL, warnings=[EVIL],
                     conventions={EVIL: EVIL}, capabilities=[EVIL], versions={EVIL: EVIL})
    report.results = [result]
    page = render_html([report])
    elements = read(page)
    assert "<script" not in page and [e for e in elements if e.tag == "script"] == []
    assert page.count("&lt;script&gt;") >= 8
    assert EVIL in by_id(elements, "failure-law.reported").text  # read back as text
    assert any(e.tag == "title" and EVIL in e.text for e in elements)


def test_a_failure_shows_its_counterexample_and_reproduction_command() -> None:
    elements = read(render_html([_report()]))
    cells = _row(elements, "law.reported")
    assert cells[1].text == "failed" and "unexpected" in _tr_of(elements, cells[0]).classes
    link = next(e for e in elements if e.tag == "a" and e.text.startswith("failure"))
    assert link.attrs["href"] == "#failure-law.reported"
    failure = by_id(elements, "failure-law.reported")
    codes = [e.text for e in elements if e.tag == "code" and e.text in (REPRODUCE,
                                                                           COUNTEREXAMPLE)]
    assert codes == [COUNTEREXAMPLE, REPRODUCE]  # in that order, exactly as given
    assert "X' vs the law: error 0.5 > tolerance 2.2e-11" in failure.text
    assert "spec theorem layout.paper_rows" in failure.text


def _tr_of(elements: list[Element], cell: Element) -> Element:
    index = elements.index(cell)
    return next(e for e in reversed(elements[:index]) if e.tag == "tr")


def test_a_not_applicable_row_is_folded_with_its_reason() -> None:
    """Not in the table: under a folded count, grouped by reason."""
    elements = read(render_html([_report()]))
    with pytest.raises(AssertionError):
        _row(elements, "device.cuda_matches_cpu")  # no row of the property table
    rows: list[list[str]] = []
    for e in elements:
        if e.tag == "tr":
            rows.append([])
        elif e.tag == "td" and rows:
            rows[-1].append(e.text)
    assert [r for r in rows if "device.cuda_matches_cpu" in r] == [[
        "compares the CUDA forward with the CPU forward; no CUDA device",
        "device.cuda_matches_cpu"]]
    summary = next(e for e in elements if e.tag == "summary" and "not applicable" in e.text)
    assert summary.text == "1 not applicable (why, by reason)"
    assert "failure-device.cuda_matches_cpu" not in {e.attrs.get("id") for e in elements}


def test_the_rows_draw_their_bars() -> None:
    elements = read(render_html([_report()]))
    fills = [e for e in elements if e.tag == "span" and "fill" in e.classes]
    assert [f.attrs["style"] for f in fills] == ["width: 50.0%", "width: 100.0%"]
    assert [("over" in f.classes) for f in fills] == [False, True]
    marks = {e.attrs["style"] for e in elements if e.tag == "span" and "mark" in e.classes}
    assert marks == {"left: 75.0%"}
    assert "1e-13 ÷ 1e-11" in _row(elements, "law.probed")[4].text
    report = _report()
    report.results[1].status = rp.XFAIL  # an expected failure: past the allowance, in amber
    fills = [e for e in read(render_html([report])) if e.tag == "span" and "fill" in e.classes]
    assert [sorted(f.classes) for f in fills] == [["fill"], ["expected", "fill", "over"]]


def test_the_header_summary_and_families() -> None:
    page = render_html([_report()])
    elements = read(page)
    verdict = next(e for e in elements if "verdict" in e.classes)
    assert verdict.text == "FAILED"
    families = {e.text.strip() for e in elements if e.tag == "td"}
    assert {"1/2", "n/a"} <= families
    chips = {e.text for e in elements if "chip" in e.classes}
    assert {"torch 2.13.0", "weights", "branch_input = x_in"} <= chips


def test_the_page_fetches_nothing_and_runs_nothing() -> None:
    result = _failed()
    result.id = "depth.mhc_bounded"
    result.series = {"‖X_l‖ / ‖X_0‖ after sublayer l": {"zero branch": [1.0, 0.5, 0.5]}}
    report = _report()
    report.results.append(result)
    elements = read(render_html([report, _report(target="other:make")]))
    csp = next(e for e in elements if e.attrs.get("http-equiv") == "Content-Security-Policy")
    assert csp.attrs["content"].startswith("default-src 'none';")
    for e in elements:
        assert e.tag not in ("script", "link", "iframe", "object", "embed", "img"), e.tag
        for name in ("src", "href", "xlink:href", "action"):
            assert not e.attrs.get(name, "#").strip() or e.attrs.get(name, "#").startswith(
                "#"), (e.tag, name, e.attrs[name])
    polylines = [e for e in elements if e.tag == "polyline"]
    assert len(polylines) == 1 and len(polylines[0].attrs["points"].split()) == 3
    ids = [e.attrs["id"] for e in elements if "id" in e.attrs]
    assert len(ids) == len(set(ids))  # two reports: anchors stay unique


# --- the CLI -----------------------------------------------------------------------------
def test_report_html_writes_the_page_and_no_markdown(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    _report().write_json(tmp_path / "r.json")
    out = tmp_path / "r.html"
    assert cli.main(["report", str(tmp_path / "r.json"), "--html", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert by_id(read(out.read_text(encoding="utf-8")), "failure-law.reported")
    assert cli.main(["report", str(tmp_path / "r.json"), "--html", str(out), "-o",
                     str(tmp_path / "r.md")]) == 0
    assert "## `my.adapter:make`" in (tmp_path / "r.md").read_text(encoding="utf-8")
    assert cli.main(["report", str(tmp_path / "r.json"), "--html", str(out), "--markdown"]) == 0
    assert "## `my.adapter:make`" in capsys.readouterr().out
    code = cli.main(["report", str(tmp_path / "r.json"), "--html", str(tmp_path / "no" / "x")])
    assert code == 2 and "cannot write" in capsys.readouterr().err


def test_run_html_writes_the_page(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    code = cli.main(["run", "reference:hc-static", "--profile", "quick", "--device", "cpu",
                     "--only", "shape.output", "--html", str(out), "--no-progress"])
    assert code == 0 and f"report written to {out}" in capsys.readouterr().out
    elements = read(out.read_text(encoding="utf-8"))
    assert _row(elements, "shape.output")[1].text == "passed"
    code = cli.main(["run", "reference:hc-static", "--html", str(tmp_path / "no" / "r.html")])
    assert code == 2 and "does not exist" in capsys.readouterr().err
    code = cli.main(["run", "no_such_module_xyz:make", "--html", str(out)])
    assert code == 2  # a usage error still writes the page, saying why nothing ran
    alert = next(e for e in read(out.read_text(encoding="utf-8")) if "alert" in e.classes)
    assert "setup error" in alert.text and "no_such_module_xyz" in alert.text
