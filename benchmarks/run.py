"""``python -m benchmarks``: every benchmark in one run, written to docs/benchmarks.md.

Sections (``--sections`` selects):

* ``connection`` — connection cost excluding the branch at a small, the main (B=4, T=512, n=4,
  d=1024) and a large configuration (:mod:`benchmarks.connection`);
* ``roofline`` — machine limits and achieved ÷ bound (:mod:`benchmarks.roofline`; needs
  ``connection``);
* ``allocator`` — the main configuration again in a child process with PyTorch's
  ``THP_MEM_ALLOC_ENABLE=1`` (large CPU tensors on transparent huge pages), to show how much of
  the time is first-touch page faults of freshly allocated tensors (needs ``connection``);
* ``sinkhorn`` — error and cost against the iteration count, with a plot
  (:mod:`benchmarks.sinkhorn`);
* ``kit`` — wall time of ``hc-conformance run`` and ``hc-spec prove`` (:mod:`benchmarks.kit`);
* ``gpu`` — the connection section on CUDA; on a machine without CUDA it says it skipped.

``--quick`` runs all of them at smoke-test size (CI runs it; no figure from it means anything).
Run from the repository root::

    bash benchmarks/build_venvs.sh                             # once: the third-party venvs
    OMP_NUM_THREADS=1 python -m benchmarks --venvs all         # docs/benchmarks.md
    OMP_NUM_THREADS=1 python -m benchmarks --quick --out reports/bench/benchmarks.md

``--venvs all`` (or ``--venvs pkgs,tf523``) adds, after this process's connection tables, one
child process per third-party venv (:mod:`benchmarks.venvs`: each measures its targets and the
reference rows again, and the rows are merged with their same-run ratios). ``--part NAME`` is
that child (connection section only, JSON out). Everything from :data:`KEEP_MARKER` (or a
``## Time to verdict`` heading) to the end of the existing output file is kept as it is: sections
maintained by other scripts go there.

Extra targets (``package.module:factory``) join the connection and kit sections with
``--target``; ``--target-path DIR`` makes modules in DIR importable for them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from rich.console import Console

from benchmarks import allocator, connection, kit, machine, roofline, sinkhorn, venvs
from benchmarks import markdown as md
from benchmarks.connection import ConfigResult
from benchmarks.subjects import (
    BRANCH_ONLY,
    Config,
    builtin_target_names,
    is_third_party,
    subjects,
)
from hcspec.conformance.subjects.targets import builtin_status

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("connection", "roofline", "allocator", "sinkhorn", "kit", "gpu")
MAIN = "main"
DEEPSEEK_V4 = "deepseek-v4"
PARENT_ONLY = ("large",)
"""Configurations the venv runs skip (their third-party rows would take most of the run)."""
KEEP_MARKER = "<!-- python -m benchmarks keeps everything below this line -->"
"""The regenerated file ends here; whatever follows it in the existing file is kept."""
KEEP_HEADINGS = ("## Time to verdict",)
"""Also kept, from the first of these headings on, when the marker is missing."""
REGENERATE = ("bash benchmarks/build_venvs.sh  # once\n"
              "OMP_NUM_THREADS=1 python -m benchmarks --venvs all")


@dataclass(frozen=True)
class Plan:
    """Sizes and repeats of one run (full or quick)."""

    configs: list[tuple[Config, int]]  # (config, rounds)
    copy_mib: int
    matmul_size: int
    limit_repeats: int
    sinkhorn_tokens: int
    sinkhorn_iterations: list[int]
    sinkhorn_repeats: int
    kit_profiles: tuple[str, ...]
    kit_reference_targets: list[str] | None  # None: all reference built-ins
    prove_only: list[str] | None
    gpu_rounds: int


FULL = Plan(
    configs=[(Config("small", 2, 128, 4, 512), 21), (Config(MAIN, 4, 512, 4, 1024), 11),
             (Config("large", 8, 512, 4, 2048, variants=False), 5),
             (Config(DEEPSEEK_V4, 1, 512, 4, 4096, torch.bfloat16, variants=False), 5),
             (Config(f"{DEEPSEEK_V4} float32", 1, 512, 4, 4096, variants=False), 5)],
    copy_mib=256, matmul_size=2048, limit_repeats=7,
    sinkhorn_tokens=4 * 512, sinkhorn_iterations=[1, 2, 3, 5, 10, 20, 30, 50, 100],
    sinkhorn_repeats=7, kit_profiles=("quick", "ci"), kit_reference_targets=None,
    prove_only=None, gpu_rounds=21,
)
QUICK = Plan(
    configs=[(Config(MAIN, 1, 8, 4, 32), 2),
             (Config(DEEPSEEK_V4, 1, 8, 4, 64, torch.bfloat16, variants=False), 2)],
    copy_mib=8, matmul_size=128, limit_repeats=2,
    sinkhorn_tokens=16, sinkhorn_iterations=[1, 5, 20], sinkhorn_repeats=1,
    kit_profiles=("quick",), kit_reference_targets=["reference:hc-static"],
    prove_only=["counts.params"], gpu_rounds=2,
)


@dataclass
class Report:
    """Everything the Markdown file is made of, in order."""

    blocks: list[str] = field(default_factory=list)

    def heading(self, text: str, console: Console) -> None:
        """A section heading (also printed)."""
        self.blocks.append(f"## {text}")
        console.rule(text)

    def text(self, text: str, console: Console) -> None:
        """A paragraph (also printed)."""
        self.blocks.append(text)
        console.print(text, highlight=False)

    def table(self, table: md.Table, console: Console) -> None:
        """A table (also printed)."""
        self.blocks.append(table.markdown())
        table.print(console)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes (CI)")
    parser.add_argument("--out", type=Path, help="Markdown report (default docs/benchmarks.md; "
                        "with --quick reports/benchmarks-quick/benchmarks.md)")
    parser.add_argument("--plots", type=Path,
                        help="folder for the plots (default: benchmarks/ next to --out)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--rounds", type=int, help="timed rounds for every configuration")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {','.join(SECTIONS)}")
    parser.add_argument("--configs", help="comma-separated subset of the configuration names")
    parser.add_argument("--subjects", help="comma-separated subject names to measure "
                        "(default: all; 'branch only' is always measured)")
    parser.add_argument("--json", type=Path, help="also write the connection results as JSON")
    parser.add_argument("--target", action="append", default=[], metavar="TARGET",
                        help="extra package.module:factory target (repeatable)")
    parser.add_argument("--target-path", action="append", default=[], metavar="DIR",
                        help="make modules in DIR importable for --target (repeatable)")
    parser.add_argument("--venvs", help="also run the third-party venvs' parts and merge their "
                        f"rows: 'all' or a subset of {','.join(venvs.BY_NAME)} "
                        "(built by bash benchmarks/build_venvs.sh)")
    parser.add_argument("--part", choices=sorted(venvs.BY_NAME),
                        help="internal: measure one venv part's subjects (with --json)")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    for needs in ("roofline", "allocator"):
        if needs in chosen and "connection" not in chosen:
            parser.error(f"the {needs} section needs the connection section (its times)")
    if args.threads < 1 or (args.rounds is not None and args.rounds < 1):
        parser.error("--threads and --rounds must be at least 1")
    args.sections = chosen
    if args.part is not None and (args.json is None or chosen != ["connection"]):
        parser.error("--part needs --json and --sections connection")
    try:
        args.venv_parts = [] if args.venvs is None else venvs.chosen(args.venvs)
    except ValueError as exc:
        parser.error(str(exc))
    if args.out is None:
        args.out = ROOT / ("reports/benchmarks-quick/benchmarks.md" if args.quick
                           else "docs/benchmarks.md")
    if args.plots is None:
        args.plots = args.out.parent / "benchmarks"
    return args


def _goals(main: ConfigResult | None, ratios: dict[str, float], gpu_ran: bool) -> md.Table:
    t = md.Table("Goals, at the main configuration, this run", ["goal", "measured",
                                                                          "status"])
    rows = [] if main is None else [r for r in main.rows if not r.skipped]
    peers = [r for r in rows if is_third_party(r.name) and r.kind == "mhc"
             and r.relative is not None]
    fastest = min(peers, key=lambda r: r.relative or 0.0) if peers else None
    for name in ("reference:mhc", "reference:mhc-fast"):
        ref = main.row(name) if main else None
        if ref is None or ref.minus_branch is None or ref.relative is None:
            continue
        if fastest is None or fastest.relative is None:
            t.add(f"{name} not slower than the fastest third-party mHC (fwd+bwd ratio ≥ 1)",
                  "no third-party mHC target measured", "not measured")
        else:
            speed = fastest.relative / ref.relative
            t.add(f"{name} not slower than the fastest third-party mHC (fwd+bwd ratio ≥ 1)",
                  f"{fastest.name} ({fastest.run or 'main'} run) {fastest.relative:.2f}× "
                  f"reference:mhc-fast ÷ {ref.relative:.2f}× = {speed:.2f}",
                  "met" if speed >= 1.0 else "not met")
            lowest = min((p for p in peers if p.peak is not None), key=lambda p: p.peak or 0,
                         default=None)
            if ref.peak is not None and lowest is not None and lowest.peak is not None:
                t.add(f"{name} peak memory ≤ every third-party mHC's",
                      f"{md.mib(ref.peak)} MiB vs lowest {md.mib(lowest.peak)} MiB "
                      f"({lowest.name})", "met" if ref.peak <= lowest.peak else "not met")
        if name in ratios:
            t.add(f"{name} fwd+bwd within 3× of the roofline bound",
                  f"achieved ÷ bound = {ratios[name]:.1f}",
                  "met" if ratios[name] <= 3.0 else "not met")
        recomputing = main.row(f"{name} recompute") if main else None
        if recomputing is not None and ref.saved is not None and recomputing.saved is not None:
            peak = ("" if ref.peak is None or recomputing.peak is None
                    else f"; peak {md.mib(ref.peak)} → {md.mib(recomputing.peak)} MiB")
            t.add(f"{name}: recompute option saves activation memory",
                  f"saved {md.mib(ref.saved)} → {md.mib(recomputing.saved)} MiB{peak}; "
                  f"fwd+bwd − branch {md.ms(ref.minus_branch)} → "
                  f"{md.ms(recomputing.minus_branch)} ms",
                  "met" if recomputing.saved < ref.saved else "not met")
    readable = main.row("reference:mhc") if main else None
    fast = main.row("reference:mhc-fast") if main else None
    if readable and fast and readable.minus_branch and fast.minus_branch:
        t.add("fast path vs readable mHC (fwd+bwd − branch; peak)",
              f"{md.ms(readable.minus_branch)} ÷ {md.ms(fast.minus_branch)} ms = "
              f"{readable.minus_branch / fast.minus_branch:.2f}×; peak "
              f"{md.mib(readable.peak)} → {md.mib(fast.peak)} MiB", "–")
    t.add("GPU section", "ran on CUDA" if gpu_ran else "skipped (no CUDA device)",
          "met" if gpu_ran else "not run here")
    return t


def _connection_plot(result: ConfigResult, path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no plot: matplotlib is not installed ({exc}); pip install 'hcspec[plot]'"
    rows = [r for r in result.rows if not r.skipped and r.minus_branch is not None
            and r.name != BRANCH_ONLY]
    if not rows:
        return "no plot: nothing measured"
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 0.45 * len(rows) + 1.5), sharey=True)
    names = [r.name for r in rows][::-1]
    colors = ["tab:orange" if is_third_party(r.name) else "tab:blue" for r in rows][::-1]
    left.barh(names, [1e3 * (r.minus_branch or 0.0) for r in rows][::-1], color=colors)
    left.set_xlabel("forward + backward − branch, ms (median)")
    right.barh(names, [(r.peak or 0) / 2**20 for r in rows][::-1], color=colors)
    right.set_xlabel("peak tensor memory of one step, MiB")
    fig.suptitle(f"One connection, {result.config.describe()} (blue: hcspec, orange: "
                 "third-party)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return ""


def _link(path: Path, out: Path) -> str:
    return os.path.relpath(path, out.parent).replace(os.sep, "/")


def _part(args: argparse.Namespace, plan: Plan) -> int:
    """``--part NAME``: the venv part's subjects at the chosen configurations, JSON only."""
    part = venvs.BY_NAME[args.part]
    everything = subjects((), part.subjects())
    results = []
    for config, rounds in plan.configs:
        if args.configs is not None and config.name not in args.configs.split(","):
            continue
        print(f"part {part.name}: measuring {config.name}: {config.describe()}", flush=True)
        results.append(connection.measure_config(config, everything, args.rounds or rounds,
                                                 warmup=2, run=part.name))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps([r.to_dict() for r in results], indent=1))
    return 0


def kept_tail(path: Path) -> str:
    """What :func:`main` keeps of the existing report at ``path``: from :data:`KEEP_MARKER`, or
    else from the first of :data:`KEEP_HEADINGS`, to the end (without the marker); "" when
    there is neither or no file."""
    if not path.exists():
        return ""
    text = path.read_text()
    if KEEP_MARKER in text:
        return text.split(KEEP_MARKER, 1)[1].strip("\n")
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.strip() in KEEP_HEADINGS:
            return "\n".join(lines[index:]).strip("\n")
    return ""


def _kit_in_venvs(parts: Sequence[venvs.Part], skipped: list[tuple[str, str]],
                  runs: list[kit.KitRun], threads: int,
                  timeout: float) -> list[tuple[str, str]]:
    """Time ``ci`` of every skipped target in the chosen venv that holds it (appended to
    ``runs``); the targets no chosen venv holds stay skipped (returned)."""
    left = []
    for target, reason in skipped:
        part = next((p for p in parts if target.split(":", 1)[0] in p.prefixes
                     and p.python.exists()), None)
        if part is None:
            left.append((target, reason))
        else:
            runs.append(kit.run_kit(target, "ci", threads, [], timeout, part.python, part.name))
    return left


def _parts_table(runs: Sequence[venvs.PartRun], configs: Sequence[str]) -> md.Table:
    t = md.Table("Runs merged into the connection tables", [
        "run", "venv", "holds", "wall s", "reference:mhc-fast fwd+bwd − branch ms there",
        "status"])
    for run in runs:
        times = ", ".join(f"{c}: {md.ms(row.minus_branch)}" for c in configs
                          if (row := venvs.reference_time(run, c)) is not None)
        t.add(run.part.name, run.part.venv, run.part.holds, f"{run.seconds:.0f}",
              times or "–", run.problem or "ran")
    t.notes = ["Each run measures its targets and the reference rows again in one process; a "
               "row's “÷ reference:mhc-fast” is taken in its own run (see benchmarks/venvs.py)."]
    return t


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected sections and write the report; returns the exit code (0)."""
    args = parse_args(argv)
    plan = QUICK if args.quick else FULL
    torch.set_num_threads(args.threads)
    if args.part is not None:
        return _part(args, plan)
    for path in args.target_path:
        sys.path.insert(0, str(Path(path).resolve()))
    extra_paths = [str(Path(p).resolve()) for p in args.target_path]
    console = Console(width=max(Console().width, 150))
    report = Report()
    started = time.perf_counter()
    load_before = machine.load_average()
    command = "python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    quick = " — **quick smoke-test sizes: the figures mean nothing**" if args.quick else ""
    report.blocks.append(
        f"# Benchmarks\n\nGenerated by `{command.strip()}` on {now}{quick}. Regenerate from "
        "the repository root (the first command builds the third-party venvs, once; the second "
        "builds nothing, runs one process per venv and merges the rows):\n\n"
        f"```sh\n{REGENERATE}\n```\n\n"
        "How each figure is measured is in the docstrings of benchmarks/*.py (the venv parts: "
        "benchmarks/venvs.py); why the fast path is faster is in the docstring of "
        "reference/fast.py. Figures from one run on a shared machine: compare ratios within a "
        "table, not absolute times across runs; a row from a venv's run carries its ratio to "
        "reference:mhc-fast measured in that same run. Everything after the marker at the end "
        "is kept by the generator (sections maintained elsewhere go there).")

    info = machine.describe("cpu")
    packages = sorted({f"{s.target.distribution} {s.version or 'not installed'}"
                       for s in builtin_status() if s.target.distribution != "hcspec"})
    info["third-party packages in the main run (the venv runs: table below)"] = (
        ", ".join(packages) or "none registered")
    mt = md.Table("Machine", ["item", "value"])
    for key, value in info.items():
        mt.add(key, value)
    report.table(mt, console)

    only = None if args.subjects is None else [s.strip() for s in args.subjects.split(",")]
    configs = [(c, args.rounds or r) for c, r in plan.configs
               if args.configs is None or c.name in args.configs.split(",")]
    results: list[ConfigResult] = []
    ratios: dict[str, float] = {}
    limits: roofline.Limits | None = None
    if "connection" in args.sections:
        report.heading("Connection cost, excluding the branch", console)
        report.text("Every subject wraps the same branch `F(h) = h ⊙ w`; figures are medians of "
                    "interleaved rounds in this one process (see benchmarks/measure.py).",
                    console)
        try:
            everything = subjects(args.target, only)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for config, rounds in configs:
            console.print(f"measuring {config.name}: {config.describe()}, {rounds} rounds …")
            result = connection.measure_config(config, everything, rounds, warmup=2)
            results.append(result)
            if not args.venv_parts:
                report.table(connection.table(result), console)
        if args.venv_parts:
            part_runs: list[venvs.PartRun] = []
            for part in args.venv_parts:
                console.print(f"running the {part.name} part in {part.venv} …")
                part_runs.append(venvs.run_part(part, [c.name for c, _ in configs
                                                       if c.name not in PARENT_ONLY],
                                                args.rounds, args.threads, args.quick))
                console.print(f"  {part_runs[-1].problem or 'ran'} "
                              f"({part_runs[-1].seconds:.0f} s)")
            report.table(_parts_table(part_runs, [c.name for c, _ in configs]), console)
            for result in results:
                venvs.merge(result, part_runs)
                report.table(connection.table(result), console)
        main_result = next((r for r in results if r.config.name == MAIN), None)
        if main_result is not None:
            plot_path = args.plots / "connection.png"
            why = _connection_plot(main_result, plot_path)
            report.text(why or f"![connection cost]({_link(plot_path, args.out)})", console)
    if "roofline" in args.sections:
        report.heading("Roofline", console)
        limits = roofline.measure_limits(plan.copy_mib, plan.matmul_size, plan.limit_repeats,
                                         "cpu")
        report.table(roofline.limits_table(limits), console)
        for result in results:
            table, config_ratios = roofline.roofline_table(result, limits)
            report.table(table, console)
            if result.config.name == MAIN:
                ratios = config_ratios
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([r.to_dict() for r in results], indent=1))
    if "allocator" in args.sections:
        main_result = next((r for r in results if r.config.name == MAIN), None)
        limits_for = limits if "roofline" in args.sections else None
        if main_result is not None:
            report.heading("Allocator: fresh tensors on huge pages", console)
            rounds = next(r for c, r in configs if c.name == MAIN)
            report.table(allocator.compare(main_result, rounds, args, limits_for), console)
    if "sinkhorn" in args.sections:
        report.heading("Sinkhorn–Knopp", console)
        main_config = next((c for c, _ in plan.configs if c.name == MAIN), plan.configs[0][0])
        sk = sinkhorn.measure(plan.sinkhorn_tokens, main_config.n, main_config.d,
                              plan.sinkhorn_iterations, plan.sinkhorn_repeats)
        for table in sinkhorn.tables(sk):
            report.table(table, console)
        plot_path = args.plots / "sinkhorn.png"
        why = sinkhorn.plot(sk, plot_path)
        report.text(why or f"![Sinkhorn–Knopp error]({_link(plot_path, args.out)})", console)
    if "kit" in args.sections:
        report.heading("The kit", console)
        console.print("timing hc-conformance runs and hc-spec prove …")
        runs: list[kit.KitRun] = []
        skipped: list[tuple[str, str]] = []
        status = {s.target.name: (s.importable, s.problem) for s in builtin_status()}
        targets = plan.kit_reference_targets or [n for n in builtin_target_names()
                                                 if not is_third_party(n)]
        for name in builtin_target_names():
            if is_third_party(name) and plan.kit_reference_targets is None:
                ok, why = status.get(name, (False, "unknown"))
                if ok:
                    targets.append(name)
                else:
                    skipped.append((name, why))
        targets += list(args.target)
        timeout = 120.0 if args.quick else 1800.0
        for profile in plan.kit_profiles:
            for target in targets:
                runs.append(kit.run_kit(target, profile, args.threads, extra_paths, timeout))
        skipped = _kit_in_venvs(args.venv_parts, skipped, runs, args.threads, timeout)
        runs.append(kit.run_prove(args.threads, plan.prove_only, timeout))
        report.table(kit.table(runs, skipped), console)
    gpu_ran = False
    if "gpu" in args.sections:
        report.heading("GPU", console)
        if not torch.cuda.is_available():
            report.text("Skipped: no CUDA device (`torch.cuda.is_available()` is False on this "
                        "machine). The same script runs this section where CUDA is present.",
                        console)
        else:
            gpu_ran = True
            limits = roofline.measure_limits(plan.copy_mib * 4, plan.matmul_size * 2,
                                             plan.limit_repeats, "cuda")
            report.table(roofline.limits_table(limits), console)
            everything = subjects(args.target)
            for config, _ in plan.configs:
                if config.name != MAIN:
                    continue
                for dtype in (torch.float32, torch.bfloat16):
                    gpu_config = Config(f"{config.name} (GPU)", config.batch, config.tokens,
                                        config.n, config.d, dtype, "cuda")
                    result = connection.measure_config(gpu_config, everything, plan.gpu_rounds,
                                                       warmup=3)
                    report.table(connection.table(result), console)
                    if dtype == torch.float32:
                        report.table(roofline.roofline_table(result, limits)[0], console)
    report.heading("Goals", console)
    main_result = next((r for r in results if r.config.name == MAIN), None)
    report.table(_goals(main_result, ratios, gpu_ran), console)
    elapsed = time.perf_counter() - started
    report.text(f"Run time {elapsed / 60:.1f} min. Load average (1/5/15 min) at the start "
                f"{load_before}, at the end {machine.load_average()}: other jobs share this "
                "machine, so compare ratios within one run, not absolute times across runs.",
                console)
    tail = kept_tail(args.out)
    report.blocks.append(KEEP_MARKER + ("\n\n" + tail if tail else ""))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n\n".join(report.blocks) + "\n")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
