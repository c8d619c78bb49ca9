"""Conformance reports as one self-contained HTML page (``hc-conformance report R.json --html
OUT.html``, ``hc-conformance run ... --html OUT.html``).

The page holds everything it shows: the style sheet is inline, the depth plot is inline SVG,
there is no script, and a Content-Security-Policy (``default-src 'none'``) forbids the
browser from fetching anything, so the page opens the same from a CI artifact, offline.
Every text taken from a report (target, messages, counterexamples, labels) is escaped by the
template engine (jinja2 with autoescaping on), never pasted in.

The view model is built here, in plain functions the tests call directly: :func:`ratio_bar`
(the error ÷ allowance bar of a property), :func:`plot` (the SVG geometry of a set of curves,
e.g. the depth family's ``‖X_l‖ / ‖X_0‖``), :func:`failure_lines`; the template
(``templates/report.html.j2``) only lays them out.
"""

from __future__ import annotations

import importlib.resources
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import jinja2

from hcspec.conformance.outputs import markdown as md
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.outputs.failure import explain

BAR_DECADES: Final = (-6, 2)
"""The bar's log10 range of error ÷ allowance: 1e-6 (empty) … 1e2 (full); 1 is the allowance,
drawn as a line at 75 % of the width."""
UNBOUNDED_TOLERANCE: Final = 1e300
"""A tolerance at or above this (or not finite) is a reported figure without a bound (the
depth family's HC growth uses the largest float): no bar is drawn."""
PALETTE: Final = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
                  "#8c564b", "#e377c2")
"""Curve colours of the plots, in order (repeated past eight curves)."""
TEMPLATE: Final = "report.html.j2"
CODE_FIELDS: Final = frozenset({"minimal counterexample", "reproduce", "traceback"})
"""Lines of a failure's explanation shown as code."""
UNEXPECTED_OR_XFAIL: Final = frozenset(rp.UNEXPECTED | {rp.XFAIL})
"""Statuses explained in the failures section."""


@dataclass(frozen=True)
class Bar:
    """One property's error ÷ allowance, ready to draw.

    Attributes:
        ratio: error / tolerance (0 for a zero error, inf for a positive error against a zero
            tolerance, NaN for a NaN error).
        width: the bar's width in percent of the cell, on the log scale of
            :data:`BAR_DECADES` (0 … 100; a NaN or infinite ratio fills it).
        over: the error exceeds the allowance (ratio > 1, or NaN).
        text: ``error E ÷ allowance T`` as the cell prints it.
    """

    ratio: float
    width: float
    over: bool
    text: str


def _number(value: object) -> float | None:
    """A JSON figure as a float (``"nan"``/``"inf"`` strings included), None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def ratio_bar(error: object, tolerance: object) -> Bar | None:
    """The bar of one achieved ``error`` against its ``tolerance`` (the report's
    ``achieved``), or None when there is nothing to draw: a figure missing or not a number,
    or a tolerance that bounds nothing (not finite or ≥ :data:`UNBOUNDED_TOLERANCE`: a
    reported figure such as HC's growth over depth)."""
    err, tol = _number(error), _number(tolerance)
    if err is None or tol is None or not math.isfinite(tol) or tol >= UNBOUNDED_TOLERANCE:
        return None
    if math.isnan(err):
        ratio = math.nan
    elif err == 0.0:
        ratio = 0.0
    elif tol <= 0.0:
        ratio = math.inf
    else:
        ratio = abs(err) / tol
    low, high = BAR_DECADES
    if math.isnan(ratio) or math.isinf(ratio):
        width = 100.0
    elif ratio <= 0.0:
        width = 0.0
    else:
        width = min(100.0, max(0.0, 100.0 * (math.log10(ratio) - low) / (high - low)))
    over = math.isnan(ratio) or ratio > 1.0
    return Bar(ratio=ratio, width=round(width, 2), over=over,
               text=f"{err:.2g} ÷ {tol:.2g}")


def allowance_position() -> float:
    """Where ratio 1 (the allowance) sits on the bar, in percent of its width."""
    low, high = BAR_DECADES
    return 100.0 * -low / (high - low)


@dataclass(frozen=True)
class Curve:
    """One curve of a plot: its label, colour and SVG polyline points (``"x,y x,y …"``)."""

    label: str
    colour: str
    points: str
    last: float


@dataclass(frozen=True)
class Tick:
    """An axis tick: its position in SVG units along the axis and its label."""

    at: float
    label: str


@dataclass(frozen=True)
class Plot:
    """The geometry of a log-y line plot, in SVG user units (see :func:`plot`)."""

    title: str
    width: int
    height: int
    left: int
    top: int
    right: int
    bottom: int
    curves: list[Curve]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    x_label: str


def _decade_label(k: int) -> str:
    return {-1: "0.1", 0: "1", 1: "10", 2: "100"}.get(k, f"1e{k}")


def plot(title: str, curves: dict[str, list[float]], *, x_label: str = "sublayer l",
         width: int = 640, height: int = 300) -> Plot | None:
    """The SVG geometry of ``curves`` (label → values at steps 0, 1, …) on a log10 y axis
    spanning whole decades around the values (at least a tenth of a decade of room on each
    side); x is the step. Non-positive or non-finite
    values are left out of their curve (a log axis cannot show them). None when no curve has
    a value to draw.
    """
    left, top, right, bottom = 64, 16, width - 16, height - 44
    finite = [v for values in curves.values() for v in values if math.isfinite(v) and v > 0]
    steps = max((len(values) for values in curves.values()), default=0)
    if not finite or steps == 0:
        return None
    # whole decades, with a tenth of a decade of room: a curve never lies on the frame
    lo = math.floor(math.log10(min(finite)) - 0.1)
    hi = math.ceil(math.log10(max(finite)) + 0.1)
    span_x = max(steps - 1, 1)

    def x_at(step: int) -> float:
        return left + (right - left) * step / span_x

    def y_at(value: float) -> float:
        return bottom - (bottom - top) * (math.log10(value) - lo) / (hi - lo)

    drawn: list[Curve] = []
    for index, (label, values) in enumerate(curves.items()):
        points = " ".join(f"{x_at(step):.1f},{y_at(v):.1f}" for step, v in enumerate(values)
                          if math.isfinite(v) and v > 0)
        if points:
            drawn.append(Curve(label, PALETTE[index % len(PALETTE)], points,
                               values[-1] if values else math.nan))
    every = max(1, math.ceil((hi - lo) / 8))  # at most about eight labelled decades
    y_ticks = [Tick(y_at(10.0 ** k), _decade_label(k)) for k in range(lo, hi + 1, every)]
    x_every = max(1, math.ceil(span_x / 8))
    x_ticks = [Tick(x_at(s), str(s)) for s in range(0, steps, x_every)]
    return Plot(title, width, height, left, top, right, bottom, drawn, x_ticks, y_ticks,
                x_label)


@dataclass(frozen=True)
class Line:
    """One line of a failure's explanation: its field name, text, and whether it is code."""

    key: str
    text: str
    code: bool


def failure_lines(result: rp.PropertyResult) -> list[Line]:
    """What the failures section shows for ``result`` (failed, error, timeout, xpass, xfail):
    the expected-failure reason (xfail), then :func:`hcspec.conformance.outputs.failure.explain` of
    its failure (message, figures, hint, minimal counterexample, shrunk-from, reproduction
    command; the template folds the traceback of an error, of a timeout's stuck thread or of
    the target's exception behind a failure under it) or,
    for a result without a failure (an xpass), its message and the worst
    comparison it measured."""
    lines: list[Line] = []
    if result.status == rp.XFAIL and result.expected_failure:
        lines.append(Line("expected failure", result.expected_failure, False))
    if result.failure is not None:
        lines += [Line(key, text, key in CODE_FIELDS)
                  for key, text in explain(result.failure)]  # the traceback: folded apart
        return lines
    lines.append(Line("message", result.message or "(no message)", False))
    if result.worst:
        lines.append(Line("worst", f"{result.worst.get('label', 'error')}: error "
                                   f"{result.worst.get('error')}, allowance "
                                   f"{result.worst.get('tolerance')}", False))
    return lines


@dataclass(frozen=True)
class Row:
    """One property's row of the table."""

    result: rp.PropertyResult
    bar: Bar | None
    figure: str
    note: str
    anchor: str | None


def _row(result: rp.PropertyResult, prefix: str) -> Row:
    """The table row of ``result``; ``prefix`` makes the failure anchor unique in the page."""
    achieved = result.achieved or {}
    bar = ratio_bar(achieved.get("error"), achieved.get("tolerance"))
    figure = ""
    if achieved and bar is None and _number(achieved.get("error")) is not None:
        figure = f"{_number(achieved.get('error')):.3g} (reported, no bound)"
    note = ""
    if result.status in (rp.BLOCKED, rp.NOT_APPLICABLE):  # the status column names it
        note = result.skip_reason.partition(": ")[2]
    elif result.status not in UNEXPECTED_OR_XFAIL and result.message:
        note = result.message
    anchor = (f"{prefix}failure-{result.id}" if result.status in UNEXPECTED_OR_XFAIL
              else None)
    return Row(result, bar, figure, note, anchor)


@dataclass(frozen=True)
class Section:
    """Everything the page shows for one report.

    Attributes:
        rows: the table's rows: every property but the not-applicable ones.
        failures: the rows explained as cards at the top (failed, error, timeout, xpass,
            xfail).
        not_applicable: the folded not-applicable properties, ``(reason, ids)``, the most
            common reason first.
        declared, defaults: the conventions the target declared, and those at their defaults
            (:meth:`hcspec.conformance.outputs.report.Report.conventions_split`).
    """

    report: rp.Report
    prefix: str
    rows: list[Row]
    families: list[tuple[str, dict[str, int | float | None], str]]
    failures: list[Row]
    plots: list[tuple[str, Plot]]
    not_applicable: list[tuple[str, list[str]]]
    declared: dict[str, str]
    defaults: dict[str, str]


def _section(report: rp.Report, prefix: str) -> Section:
    rows = [_row(r, prefix) for r in report.results]
    families = [(family, entry, md.family_score_text(entry))
                for family, entry in report.family_scores().items()]
    plots: list[tuple[str, Plot]] = []
    for r in report.results:
        for quantity, curves in r.series.items():
            drawn = plot(quantity, curves)
            if drawn is not None:
                plots.append((r.id, drawn))
    folded: dict[str, list[str]] = {}
    for r in report.results:
        if r.status == rp.NOT_APPLICABLE:
            folded.setdefault(r.skip_reason.partition(": ")[2] or r.message, []).append(r.id)
    declared, defaults = report.conventions_split()
    return Section(report, prefix, [row for row in rows
                                    if row.result.status != rp.NOT_APPLICABLE], families,
                   [row for row in rows if row.anchor is not None], plots,
                   sorted(folded.items(), key=lambda item: -len(item[1])), declared, defaults)


def _template() -> jinja2.Template:
    source = (importlib.resources.files("hcspec.conformance") / "templates" / TEMPLATE
              ).read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    return env.from_string(source)


def render_html(reports: Sequence[rp.Report], title: str | None = None) -> str:
    """``reports`` as one self-contained HTML page (module docstring): per report the
    target and what was resolved (kind, profile, seed, device, dtype, versions, capabilities,
    declared conventions, warnings), the verdict, a family summary, one row per property
    with its error ÷ allowance bar (:func:`ratio_bar`) and, for the not-applicable and
    blocked ones, the reason; each failure with its explanation, minimal counterexample and
    reproduction command (:func:`failure_lines`); the plots of the curves the properties
    recorded (the depth family's state norm over depth) as inline SVG. With several reports,
    a summary table with one row per target comes first.

    Raises:
        ValueError: no report given.
    """
    if not reports:
        raise ValueError("render_html: no report to render")
    sections = [_section(report, f"r{i}-" if len(reports) > 1 else "")
                for i, report in enumerate(reports)]
    page_title = title or (f"hc-conformance: {reports[0].target}" if len(reports) == 1
                           else f"hc-conformance: {len(reports)} reports")
    return _template().render(
        title=page_title, sections=sections, statuses=rp.STATUSES,
        unexpected=rp.UNEXPECTED, allowance=allowance_position(), legend=md.LEGEND,
        failure_lines=failure_lines, bar_low=BAR_DECADES[0], bar_high=BAR_DECADES[1],
        kit_version=rp.kit_version())


def write_html(reports: Sequence[rp.Report], path: str | Path, title: str | None = None) -> None:
    """Write :func:`render_html` of ``reports`` to ``path`` (UTF-8).

    Raises:
        OSError: the file cannot be written. ValueError: no report given.
    """
    Path(path).write_text(render_html(reports, title=title), encoding="utf-8")
