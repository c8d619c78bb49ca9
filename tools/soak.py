"""False-positive soak: run the kit on correct implementations many times and count failures.

``python -m tools.soak`` runs the ``ci`` profile on every target with ``--seeds``
different seeds (30 by default; the seed shifts every case's tensors, so each run draws other
states, parameters and perturbations) and the ``thorough`` profile once per target, and prints
per run kind: runs, failures, wall time, and for every property the worst achieved
error/tolerance ratio over all runs — the margin each tolerance has on correct code. A correct
implementation must give zero failures; exit 1 otherwise.

Default targets: the four reference kinds. ``--independent`` adds the independent
implementation of tests/independent, ``--low-precision`` the correct bfloat16/float16 stand-ins
of tests/conformance/properties/precision_standins.py, ``--v4-formula`` the
DeepSeek-V4-formula stand-ins of tests/conformance/v4_formula.py under ``thorough`` (run from
the source tree's root); any TARGET strings can be given instead, and ``--no-reference``
leaves the reference out. ``--seeds 0`` runs ``thorough`` only. With ``--json`` every finished
run is written as it ends (so a long soak can be read while it runs), with each property's
status and worst comparison (label, error, allowance, rule, floor). A script, not a test: a
full soak takes tens of minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation

REFERENCE_TARGETS = ("reference:hc-static", "reference:hc-dynamic", "reference:mhc",
                     "reference:mhc-fast")
INDEPENDENT_TARGETS = (
    "tests.independent.kit_adapter:make_hc_static",
    "tests.independent.kit_adapter:make_hc_dynamic",
    "tests.independent.kit_adapter:make_mhc",
)
V4_FORMULA_TARGETS = (
    "tests.conformance.v4_formula:make",
    "tests.conformance.v4_formula:make_bfloat16",
)
"""DeepSeek-V4-formula stand-ins (σ + eps, 2σ, softmax + eps Sinkhorn–Knopp, float32
parameters; float64 and bfloat16 states), run under ``thorough`` only (``--v4-formula``)."""
_STANDINS = "tests.conformance.properties.precision_standins"
LOW_PRECISION_TARGETS = tuple(f"{_STANDINS}:{name}" for name in (
    "make_bf16_output", "make_float16_output", "make_bf16_hc_static", "make_bf16_hc_dynamic",
    "make_float16_hc_static", "make_float16_hc_dynamic", "make_bf16_unrounded_branch_input",
    "make_bf16_state_v4"))
"""The correct low-precision stand-ins of the kit's own tests (``--low-precision``): the
reference mHC / static HC / dynamic HC computing in float32 and returning bfloat16 or float16
(as DeepSeek's TileKernels references), the mHC that hands the branch its float32 aggregate,
and a DeepSeek-V4-formula mHC on a bfloat16 residual state with float32 parameters (the
correct twin of the two-rounds mutant)."""


@dataclass
class Run:
    """One kit run of the soak.

    Attributes:
        target, profile, seed: what ran.
        seconds: wall time.
        failures: ``(property id, status, message, counterexample)`` of every unexpected result.
        worst: property id -> (worst error/tolerance ratio, its label) over the run.
        statuses: status -> count.
        checks: property id -> ``{"status", "seconds", and when it compared anything "label",
            "error", "tolerance", "rule", "floor"}`` (the worst comparison of a passed
            property; the failing one of a failed property).
    """

    target: str
    profile: str
    seed: int
    seconds: float = 0.0
    failures: list[tuple[str, str, str, str | None]] = field(default_factory=list)
    worst: dict[str, tuple[float, str]] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    checks: dict[str, dict[str, object]] = field(default_factory=dict)


def run_once(target: str, profile: str, seed: int, device: str = "cpu",
             only: Sequence[str] | None = None, skip: Sequence[str] | None = None) -> Run:
    """Run the catalogue (or ``only`` those ids/families, without ``skip``) once and summarise
    it."""
    start = time.perf_counter()
    report = check_implementation(target, profile=profile, device=device, seed=seed, only=only,
                                  skip=skip)
    run = Run(target, profile, seed, time.perf_counter() - start, statuses=report.summary)
    for r in report.results:
        check: dict[str, object] = {"status": r.status, "seconds": round(r.seconds, 2)}
        if r.achieved:
            check.update({k: r.achieved[k] for k in ("label", "error", "tolerance", "rule",
                                                      "floor") if k in r.achieved})
        run.checks[r.id] = check
        if r.status in rp.UNEXPECTED:
            run.failures.append((r.id, r.status, r.message, r.counterexample))
        if r.achieved and r.achieved.get("tolerance"):
            error, tolerance = float(r.achieved["error"]), float(r.achieved["tolerance"])
            run.worst[r.id] = (error / tolerance, str(r.achieved["label"]))
    return run


def plan(targets: Sequence[str], seeds: int, thorough: bool,
         thorough_only: Sequence[str] = (), first_seed: int = 0) -> list[tuple[str, str, int]]:
    """``(target, profile, seed)`` for every run of the soak: ``seeds`` ``ci`` runs and (when
    ``thorough``) one ``thorough`` run of each of ``targets``, and one ``thorough`` run of
    each of ``thorough_only``. The ``ci`` seeds are ``first_seed, ..., first_seed + seeds - 1``
    (so one soak can be split over several processes or machines), and go seed by seed over
    the targets, so a soak stopped early has the same seeds on every target."""
    jobs = [(t, "ci", s) for s in range(first_seed, first_seed + seeds) for t in targets]
    if thorough:
        jobs += [(t, "thorough", 0) for t in targets]
    jobs += [(t, "thorough", 0) for t in thorough_only]
    return jobs


def summarise(console: Console, runs: Sequence[Run]) -> None:
    """Per (target, profile): runs, failures, seconds; then the worst ratio per property."""
    table = Table(header_style="bold", title="soak: correct implementations")
    for name in ("target", "profile", "runs", "failures", "seconds (total)", "slowest run s"):
        table.add_column(name, justify="left" if name in ("target", "profile") else "right")
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.target, run.profile), []).append(run)
    for (target, profile), group in groups.items():
        failures = sum(len(r.failures) for r in group)
        table.add_row(escape(target), profile, str(len(group)),
                      f"[bold red]{failures}[/]" if failures else "0",
                      f"{sum(r.seconds for r in group):.0f}",
                      f"{max(r.seconds for r in group):.1f}")
    console.print(table)
    worst: dict[str, tuple[float, str, str]] = {}
    for run in runs:
        for pid, (ratio, label) in run.worst.items():
            if pid not in worst or ratio > worst[pid][0]:
                worst[pid] = (ratio, label, f"{run.target} {run.profile} seed {run.seed}")
    margins = Table(header_style="bold", title="worst achieved error / tolerance per property")
    for name in ("property", "worst ratio", "where", "what"):
        margins.add_column(name)
    for pid in sorted(worst, key=lambda p: -worst[p][0]):
        ratio, label, where = worst[pid]
        margins.add_row(pid, f"{ratio:.3g}", escape(where), escape(label))
    console.print(margins)
    for run in runs:
        for pid, status, message, case in run.failures:
            console.print(f"[bold red]{status}[/] {pid} — {escape(run.target)} {run.profile} "
                          f"seed {run.seed}: {escape(message)}; case {escape(case or '')}")
    total = sum(len(r.failures) for r in runs)
    console.print(f"soak: {len(runs)} runs, {total} failures")


def write_json(path: Path, runs: Sequence[Run]) -> None:
    """Write ``runs`` to ``path`` as a JSON list of :class:`Run` objects (replacing it)."""
    path.write_text(json.dumps([asdict(r) for r in runs], indent=1) + "\n", encoding="utf-8")


def build_parser() -> argparse.ArgumentParser:
    """Arguments of ``python -m tools.soak``."""
    parser = argparse.ArgumentParser(prog="python -m tools.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", help="TARGET strings (default: the reference)")
    parser.add_argument("--independent", action="store_true",
                        help="also the independent implementation of tests/independent")
    parser.add_argument("--low-precision", action="store_true",
                        help="also the correct bfloat16/float16 stand-ins of "
                             "tests/conformance/properties/precision_standins.py")
    parser.add_argument("--no-reference", action="store_true",
                        help="leave the reference kinds out (with --independent, "
                             "--low-precision or --v4-formula)")
    parser.add_argument("--v4-formula", action="store_true",
                        help="also the DeepSeek-V4-formula stand-ins of tests/conformance, under "
                             "thorough")
    parser.add_argument("--seeds", type=int, default=30, help="ci runs per target (default 30)")
    parser.add_argument("--first-seed", type=int, default=0, metavar="S",
                        help="the ci runs use seeds S, S+1, ... (default 0): a soak split over "
                             "processes gives each its own range")
    parser.add_argument("--no-thorough", action="store_true", help="skip the thorough runs")
    parser.add_argument("--jobs", type=int, default=1, help="parallel processes (default 1)")
    parser.add_argument("--only", action="append", metavar="IDS",
                        help="property ids, families or globs (default: the whole catalogue)")
    parser.add_argument("--skip", action="append", metavar="IDS", help="as --only, to leave out")
    parser.add_argument("--json", metavar="PATH", help="also write every run as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak; exit 0 with zero failures, 1 otherwise."""
    args = build_parser().parse_args(argv)
    console = Console() if Console().is_terminal else Console(width=180)
    targets = list(args.targets or ([] if args.no_reference else REFERENCE_TARGETS))
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # tests/ (the stand-ins) lives in the source tree
    if args.independent:
        targets += INDEPENDENT_TARGETS
    if args.low_precision:
        targets += LOW_PRECISION_TARGETS
    thorough_only: list[str] = []
    if args.v4_formula:
        thorough_only += V4_FORMULA_TARGETS
    jobs = plan(targets, args.seeds, not args.no_thorough, thorough_only, args.first_seed)
    runs: list[Run] = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_once, *job, "cpu", args.only, args.skip) for job in jobs]
        for future in futures:
            run = future.result()
            runs.append(run)
            console.print(f"{run.target} {run.profile} seed {run.seed}: "
                          f"{len(run.failures)} failures, {run.seconds:.1f} s",
                          highlight=False, style="dim")
            for pid, status, message, _ in run.failures:
                console.print(f"  {status} {pid}: {escape(message)}", highlight=False)
            if args.json:
                write_json(Path(args.json), runs)
    summarise(console, runs)
    return 0 if all(not r.failures for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
