"""Mutation testing of the kit: how many known-bad implementations does it kill, and how fast?

A *mutant* is a module with a factory ``make(n, d, *, layer_index, dtype, device, seed)`` (the
kit's protocol, :mod:`hcspec.conformance.protocol`) that is wrong in one realistic way, and three
module attributes:

* ``BUG_CLASS`` — one line naming the class of bug (the classes in docs/conformance.md:
  layout, sublayer, Sinkhorn, ranges, gradients, state/dtype/device, public bug reports);
* ``CAUGHT_BY`` — the property ids that must catch it (each named in the module docstring);
* ``NEEDS`` (optional) — ``"cuda"`` when the bug can only show on a CUDA device.

For each mutant, :func:`run_mutant` runs the whole catalogue in run order under a profile
(``ci`` by default) and stops at the first unexpected failure (*killed*: the first property that
caught it and the seconds from the start of the run), then runs the ``CAUGHT_BY`` properties
alone to confirm they fail as documented. ``python -m tools.mutation`` prints the table
and the kill rate; the mutants of this project live in ``tests/mutants`` (run from the source
tree's root).

The goal: every mutant killed under ``ci``, each within 10 s; ``ci`` is the gating profile.
``python -m tools.mutation --profile quick`` runs the same table under ``quick`` (the smoke
profile): every mutant must be caught there too by the properties that name its bug, except
the (mutant, property) pairs :data:`QUICK_GIVES_UP` lists with the reason.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import json
import pkgutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType

import torch
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hcspec.conformance import families as catalogue
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.run.session import check_implementation

DEFAULT_PACKAGE = "tests.mutants"
KILL_GOAL_SECONDS = 10.0
"""The goal: every mutant caught within this many seconds under ``ci``."""


QUICK_GIVES_UP: dict[str, dict[str, str]] = {}
"""Mutant name -> {property id in its ``CAUGHT_BY`` -> why ``quick`` does not catch it with that
property} (``ci`` does). tests/conformance/test_mutants.py holds ``quick`` to the rest."""


class MutantError(ValueError):
    """A mutant module does not follow the conventions above (the message says which)."""


@dataclass(frozen=True)
class Mutant:
    """A discovered mutant module.

    Attributes:
        name: the module's name within its package.
        module: the imported module (``module.make`` is the factory).
        bug_class: ``BUG_CLASS``.
        caught_by: ``CAUGHT_BY``.
        needs: ``NEEDS`` (``"cuda"``) or None.
    """

    name: str
    module: ModuleType
    bug_class: str
    caught_by: tuple[str, ...]
    needs: str | None = None

    @property
    def target(self) -> str:
        """The TARGET string of the mutant's factory (for the CLI)."""
        return f"{self.module.__name__}:make"


@dataclass
class MutantResult:
    """The outcome of one mutant.

    Attributes:
        name, bug_class, caught_by: from the mutant.
        killed: a property failed (None: not run, see ``skipped``).
        first: the id of the first property that failed, and ``first_status`` its status.
        seconds: from the start of the run to that failure (or the whole run when survived).
        expected: every ``CAUGHT_BY`` id failed when run alone (None: not checked).
        expected_statuses: ``CAUGHT_BY`` id -> status.
        message: the first failure's message (shortened).
        skipped: why the mutant was not run (e.g. needs CUDA).
    """

    name: str
    bug_class: str
    caught_by: tuple[str, ...]
    killed: bool | None = None
    first: str | None = None
    first_status: str | None = None
    seconds: float = 0.0
    expected: bool | None = None
    expected_statuses: dict[str, str] = field(default_factory=dict)
    message: str = ""
    skipped: str | None = None


def load(module: ModuleType) -> Mutant:
    """Read a mutant module's attributes.

    Raises:
        MutantError: no callable ``make``, no ``BUG_CLASS``, no ``CAUGHT_BY`` or an id in it
            that is not in the catalogue, an id not named in the docstring, or an unknown
            ``NEEDS``.
    """
    name = module.__name__.rsplit(".", 1)[-1]
    if not callable(getattr(module, "make", None)):
        raise MutantError(f"mutant {name}: no callable make(...)")
    bug_class = getattr(module, "BUG_CLASS", None)
    if not isinstance(bug_class, str) or not bug_class:
        raise MutantError(f"mutant {name}: expected BUG_CLASS, a non-empty str")
    caught_by = getattr(module, "CAUGHT_BY", None)
    if not isinstance(caught_by, tuple) or not caught_by:
        raise MutantError(f"mutant {name}: expected CAUGHT_BY, a non-empty tuple of ids")
    unknown = [pid for pid in caught_by if pid not in catalogue.BY_ID]
    if unknown:
        raise MutantError(f"mutant {name}: CAUGHT_BY names unknown property ids {unknown}")
    undocumented = [pid for pid in caught_by if pid not in (module.__doc__ or "")]
    if undocumented:
        raise MutantError(f"mutant {name}: the docstring must name {undocumented}")
    needs = getattr(module, "NEEDS", None)
    if needs not in (None, "cuda"):
        raise MutantError(f"mutant {name}: NEEDS must be 'cuda' or absent, got {needs!r}")
    return Mutant(name, module, bug_class, tuple(caught_by), needs)


def discover(package: str = DEFAULT_PACKAGE, patterns: Sequence[str] = ()) -> list[Mutant]:
    """Every mutant module in ``package`` (names not starting with ``_``), sorted by name,
    restricted to names matching one of ``patterns`` (globs) when given.

    Raises:
        ModuleNotFoundError: ``package`` does not import (run from the source tree's root).
        MutantError: see :func:`load`.
    """
    pkg = importlib.import_module(package)
    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
    if patterns:
        names = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    return [load(importlib.import_module(f"{package}.{name}")) for name in names]


def skip_reason(mutant: Mutant) -> str | None:
    """Why ``mutant`` cannot be run here, or None."""
    if mutant.needs == "cuda" and not torch.cuda.is_available():
        return "needs a CUDA device (torch.cuda.is_available() is False)"
    return None


def run_mutant(mutant: Mutant, *, profile: str = "ci", device: str = "cpu", seed: int = 0,
               check_expected: bool = True) -> MutantResult:
    """Run the catalogue against ``mutant`` until the first unexpected failure, then (when
    ``check_expected``) its ``CAUGHT_BY`` properties alone.

    Never raises for a mutant's misbehaviour (the kit reports it); raises as
    :func:`conformance.check_implementation` for a bad profile or device.
    """
    result = MutantResult(mutant.name, mutant.bug_class, mutant.caught_by)
    result.skipped = skip_reason(mutant)
    if result.skipped is not None:
        return result
    start = time.perf_counter()
    first: list[tuple[rp.PropertyResult, float]] = []

    def on_result(r: rp.PropertyResult) -> None:
        if r.status in rp.UNEXPECTED and not first:
            first.append((r, time.perf_counter() - start))

    check_implementation(mutant.module.make, profile=profile, device=device, seed=seed,
                         on_result=on_result, stop_on_failure=True)
    result.killed = bool(first)
    if first:
        caught, seconds = first[0]
        result.first, result.first_status, result.seconds = caught.id, caught.status, seconds
        result.message = caught.message.splitlines()[0][:160] if caught.message else ""
    else:
        result.seconds = time.perf_counter() - start
    if check_expected:
        report = check_implementation(mutant.module.make, profile=profile, device=device,
                                      seed=seed, only=mutant.caught_by)
        statuses = {r.id: r.status for r in report.results}
        result.expected_statuses = {pid: statuses.get(pid, "not run") for pid in mutant.caught_by}
        given_up = QUICK_GIVES_UP.get(mutant.name, {}) if profile == "quick" else {}
        result.expected = all(s in (rp.FAILED, rp.ERROR)
                              for pid, s in result.expected_statuses.items()
                              if pid not in given_up)
    return result


def kill_rate(results: Sequence[MutantResult]) -> tuple[int, int]:
    """(killed, run) over the mutants that were run."""
    ran = [r for r in results if r.skipped is None]
    return sum(1 for r in ran if r.killed), len(ran)


def _yes_no(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "[bold red]no[/]")


def print_table(console: Console, results: Sequence[MutantResult], profile: str) -> None:
    """The mutation table and the kill rate."""
    table = Table(header_style="bold", title=f"mutants under profile {profile}")
    for name, justify in (("mutant", "left"), ("bug class", "left"), ("caught", "left"),
                          ("first property that caught it", "left"), ("s to failure", "right"),
                          ("CAUGHT_BY fail", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in results:
        if r.skipped is not None:
            table.add_row(r.name, escape(r.bug_class), "skipped", escape(r.skipped), "", "")
            continue
        first = f"{r.first} ({r.first_status})" if r.first else ""
        slow = r.killed and r.seconds > KILL_GOAL_SECONDS
        seconds = f"[bold red]{r.seconds:.2f}[/]" if slow else f"{r.seconds:.2f}"
        table.add_row(r.name, escape(r.bug_class), _yes_no(r.killed), first, seconds,
                      _yes_no(r.expected))
    console.print(table)
    killed, ran = kill_rate(results)
    skipped = len(results) - ran
    rate = 100.0 * killed / ran if ran else 0.0
    slowest = max((r.seconds for r in results if r.killed), default=0.0)
    console.print(f"kill rate: {killed}/{ran} = {rate:.1f}% under {profile}"
                  + (f" ({skipped} skipped)" if skipped else "")
                  + f"; slowest kill {slowest:.2f} s (goal ≤ {KILL_GOAL_SECONDS:g} s)")


def build_parser() -> argparse.ArgumentParser:
    """Arguments of ``python -m tools.mutation``."""
    parser = argparse.ArgumentParser(
        prog="python -m tools.mutation",
        description="Run the kit against every mutant and print the kill table.")
    parser.add_argument("names", nargs="*", help="mutant names or globs (default: all)")
    parser.add_argument("--package", default=DEFAULT_PACKAGE,
                        help=f"package holding the mutants (default {DEFAULT_PACKAGE})")
    parser.add_argument("--profile", default="ci", help="kit profile (default ci)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-expected", action="store_true",
                        help="skip the second pass that runs each mutant's CAUGHT_BY alone")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; exit 0 when every mutant run was killed (and its ``CAUGHT_BY`` ids
    failed), 1 otherwise, 2 when the mutants cannot be loaded."""
    args = build_parser().parse_args(argv)
    console = Console() if Console().is_terminal else Console(width=200)
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # the mutants live in the source tree
    try:
        mutants = discover(args.package, args.names)
    except ImportError as exc:
        console.print(f"[bold red]error:[/] cannot import the mutants package {args.package!r} "
                      f"(run from the hcspec source root, or give --package): {exc}",
                      highlight=False)
        return 2
    except MutantError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2
    if not mutants:
        console.print(f"[bold red]error:[/] no mutant matches {args.names}", highlight=False)
        return 2
    results = []
    for mutant in mutants:
        console.print(f"running {mutant.name} …", highlight=False, style="dim")
        results.append(run_mutant(mutant, profile=args.profile, device=args.device,
                                  seed=args.seed, check_expected=not args.no_expected))
    print_table(console, results, args.profile)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n",
                                   encoding="utf-8")
    killed, ran = kill_rate(results)
    expected_ok = all(r.expected is not False for r in results)
    return 0 if killed == ran and expected_ok else 1


if __name__ == "__main__":
    sys.exit(main())
