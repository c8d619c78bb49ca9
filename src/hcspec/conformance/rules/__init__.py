"""Tolerance rules as objects the harness applies (the OpInfo model: tolerances are data), and
the budget each is written in, kept beside it with its justification: the vocabulary in
:mod:`.base`, the rules of forward comparisons in :mod:`.forward`, those of the mixing's
constraints in :mod:`.constraints` and those of gradients in :mod:`.gradients`; this module is
the namespace a property uses (``rules.LAW``), :data:`ALL` and the docs' table
(``python -m hcspec.conformance.rules --write``).

A property declares its rule, ``@declare(..., tolerance=rules.LAW)``, and may declare
secondary rules (``secondary=(rules.RANGE_SLACK,)``) for comparisons of another nature. A check
never computes an allowance itself: it calls ``ctx.record.expect(label, error, **given)`` with
what the rule needs (``n``, ``probed``, the measured ``oracle`` error, a ``convergence`` term,
a ``factor``...) and the recorder applies the declared rule (``rule=rules.X`` picks a declared
secondary one) to the run's :class:`Precision` (``ctx.precision``) — the dtype chain: the
working dtype, the dtype the impl computes in (its weights, its Sinkhorn–Knopp) and the dtype
it returns. The recorder keeps, for every comparison, the rule's name, the *floor* (the error a
correct implementation of that precision makes on that comparison: a measured oracle error
where the check measures one, else the rounding unit the rule's budget is stated in), the
*allowance* and the ratios error ÷ allowance and error ÷ floor; every failure message shows
all four.

The unit of every budget is the machine epsilon :func:`eps` of the *effective* dtype
(:attr:`Precision.output`): the coarsest of the tensor dtype, the precision the impl declares
it computes in (:attr:`hcspec.conformance.protocol.Conventions.compute_dtype`) and the dtype it
declares it returns (:attr:`hcspec.conformance.protocol.Conventions.output_dtype`): every
comparison is made in the precision the impl returns. The errors compared are measured by
:mod:`hcspec.conformance.metrics` (the scaled error).

Below float32 the floor follows FlashAttention's rule: the error the spec's closed form makes
against float64 when evaluated in the target's precision along its declared dtype chain
(``oracle``), or, where no oracle is run, the rounding that chain makes (one rounding of the
output, ``eps(output)``, plus the compute dtype's own budget). The allowance is a small,
documented multiple of that floor (:data:`FLOOR_MULTIPLE`), so a correct bfloat16 impl stays
at or below half of it (``docs/conformance.md``, "Tolerances", is generated from
:data:`ALL`: each rule's ``summary`` and ``why``).
"""

from __future__ import annotations

import math
from typing import Final

from hcspec.conformance.rules.base import (
    FLOOR_MULTIPLE,
    Allowance,
    Precision,
    Rule,
    RuleFn,
    effective_dtype,
    eps,
    output_rounding,
)
from hcspec.conformance.rules.constraints import (
    DEPTH_BOUND,
    EXACT_AXIS,
    EXACT_UP_TO_EPS,
    REPORTED,
    SINKHORN_FIXED_POINT,
    SINKHORN_OTHER_AXIS,
    SUM_FLOOR,
    exact_axis,
    exact_axis_allowance,
    mixing_allowance,
    other_axis_allowances,
    sinkhorn_convergence,
    sinkhorn_eps_center,
    sinkhorn_eps_deviation,
    sinkhorn_other_axis_bound,
    summation_allowance,
)
from hcspec.conformance.rules.forward import (
    DEVICE,
    EXACT,
    IDENTITY,
    LAW,
    LAW_FLOOR_EPS,
    LAW_REFERENCE_FACTOR,
    LOW_PRECISION,
    MEASURED_FLOOR,
    MEASURED_FLOOR_FACTOR,
    RANGE_SLACK,
    SELF_CONSISTENCY,
    device,
    law,
    law_measured,
    low_precision,
    range_slack,
    self_consistency,
)
from hcspec.conformance.rules.gradients import (
    FD,
    GRADIENT_FLOAT32,
    GRADIENT_SENSITIVITY_SAMPLES,
    TRAINABLE,
    TRAINABLE_RELATIVE,
    fd_directional,
    gradient_float32,
)

__all__ = [
    "ALL",
    "BY_NAME",
    "DEPTH_BOUND",
    "DEVICE",
    "EXACT",
    "EXACT_AXIS",
    "EXACT_UP_TO_EPS",
    "FD",
    "FLOOR_MULTIPLE",
    "GRADIENT_FLOAT32",
    "GRADIENT_SENSITIVITY_SAMPLES",
    "IDENTITY",
    "LAW",
    "LAW_FLOOR_EPS",
    "LAW_REFERENCE_FACTOR",
    "LOW_PRECISION",
    "MEASURED_FLOOR",
    "MEASURED_FLOOR_FACTOR",
    "RANGE_SLACK",
    "REPORTED",
    "SELF_CONSISTENCY",
    "SINKHORN_FIXED_POINT",
    "SINKHORN_OTHER_AXIS",
    "SUM_FLOOR",
    "TABLE_END",
    "TABLE_START",
    "TRAINABLE",
    "TRAINABLE_RELATIVE",
    "Allowance",
    "Precision",
    "Rule",
    "RuleFn",
    "device",
    "effective_dtype",
    "eps",
    "exact_axis",
    "exact_axis_allowance",
    "fd_directional",
    "gradient_float32",
    "law",
    "law_measured",
    "low_precision",
    "main",
    "markdown_table",
    "mixing_allowance",
    "other_axis_allowances",
    "output_rounding",
    "range_slack",
    "ratio",
    "self_consistency",
    "sinkhorn_convergence",
    "sinkhorn_eps_center",
    "sinkhorn_eps_deviation",
    "sinkhorn_other_axis_bound",
    "summation_allowance",
    "with_table",
]

ALL: Final[tuple[Rule, ...]] = (
    EXACT, LAW, SELF_CONSISTENCY, IDENTITY, RANGE_SLACK, EXACT_AXIS, SINKHORN_OTHER_AXIS, FD,
    GRADIENT_FLOAT32, LOW_PRECISION, MEASURED_FLOOR, DEVICE, TRAINABLE, SINKHORN_FIXED_POINT,
    DEPTH_BOUND, EXACT_UP_TO_EPS, REPORTED)
"""Every rule, in the docs table's order."""

BY_NAME: Final[dict[str, Rule]] = {r.name: r for r in ALL}


def ratio(error: float, bound: float) -> float:
    """``error / bound`` (0 for a zero error, inf for a zero bound, NaN for a NaN error)."""
    if math.isnan(error):
        return math.nan
    if error == 0.0:
        return 0.0
    return math.inf if bound == 0.0 else error / bound


TABLE_START: Final = ("<!-- rules-table:start (generated from the rule objects of "
                      "conformance/rules/: python -m hcspec.conformance.rules --write) -->")
TABLE_END: Final = "<!-- rules-table:end -->"


def with_table(doc: str) -> str:
    """``doc`` with the text between :data:`TABLE_START` and :data:`TABLE_END` replaced by
    :func:`markdown_table`.

    Raises:
        ValueError: the markers are missing or out of order.
    """
    start, end = doc.find(TABLE_START), doc.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"the document has no {TABLE_START!r} … {TABLE_END!r} block")
    return doc[:start + len(TABLE_START)] + "\n" + markdown_table() + doc[end:]


def markdown_table() -> str:
    """The docs' table of rules (``docs/conformance.md``, between the ``rules-table`` markers),
    generated from :data:`ALL`."""
    lines = ["| rule | inputs | allows | why |", "| --- | --- | --- | --- |"]
    for r in ALL:
        inputs = ", ".join(f"`{k}`" for k in r.needs) or "—"
        cells = (r.summary.replace("|", "\\|"), r.why.replace("|", "\\|"))
        lines.append(f"| `{r.name}` | {inputs} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m hcspec.conformance.rules [--write|--check]``: print the rules table, write
    it into docs/conformance.md, or exit 1 when the table there is not current."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--doc", default=str(Path(__file__).resolve().parents[4] / "docs"
                                             / "conformance.md"))
    args = parser.parse_args(argv)
    if not (args.write or args.check):
        print(markdown_table(), end="")
        return 0
    path = Path(args.doc)
    doc = path.read_text(encoding="utf-8")
    current = with_table(doc)
    if args.check:
        if current != doc:
            print(f"{path}: the rules table is not current; run python -m "
                  "hcspec.conformance.rules --write")
            return 1
        return 0
    path.write_text(current, encoding="utf-8")
    return 0

