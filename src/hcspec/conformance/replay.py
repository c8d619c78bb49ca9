"""A failure you can take home: replay one failing case of one property in Python, save its
tensors and a standalone script, and show the entries that disagree (``--save-failures DIR``,
``--pdb``).

:func:`replay` rebuilds the target through its factory, runs the one check on the one case
(seeded as the run seeded it, so the figures are the run's) with the comparisons kept
(:mod:`hcspec.conformance.outputs.capture`), and returns what it found: the failure, the failing
comparison's tensors (the target's and the expected ones, the oracle's) and the case's
inputs. :func:`disagreeing_entries` lists, like ``torch.autograd.gradcheck``, the entries of
that comparison beyond the allowance: index, got, expected, allowance.

:class:`FailureSaver` writes, per failed property, a folder ``DIR/<property id>/`` with
``case.json`` (target, property, profile, device, seed, the case, the failure),
``tensors.pt`` (``inputs``, ``got``, ``expected``, ``scale``, ``error``, ``allowance``) and
``replay.py``, a script that replays the case in a fresh process without the CLI
(``python DIR/<id>/replay.py``: it prints the disagreeing entries and exits 1 while the
failure reproduces, 0 once it is fixed).
"""

from __future__ import annotations

import json
import math
import os
import pdb
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import torch

from hcspec.conformance.families import BY_ID
from hcspec.conformance.machinery.base import (
    Context,
    FactoryRejected,
    Inconclusive,
    NotApplicable,
    PropertyFailure,
)
from hcspec.conformance.machinery.declaration import Property
from hcspec.conformance.outputs import capture
from hcspec.conformance.outputs import failure as fl
from hcspec.conformance.strategies import Case

ENTRIES_SHOWN: Final = 10
"""How many disagreeing entries :func:`format_entries` prints (the largest first)."""


@dataclass(frozen=True)
class Entry:
    """One entry of a comparison beyond its allowance.

    Attributes:
        index: its index in the compared tensors.
        got, expected: the target's value and the expected one.
        difference: ``|got − expected|``.
        allowance: the largest difference allowed there (the rule's allowance times
            ``max(1, scale)``: the comparison's scaled error, in the tensors' own units).
    """

    index: tuple[int, ...]
    got: float
    expected: float
    difference: float
    allowance: float


@dataclass
class Replayed:
    """What :func:`replay` found.

    Attributes:
        failure: the failure (None when the case passes now).
        comparison: the failing comparison's tensors (None when the failure is not an
            elementwise comparison: a condition, an exception).
        inputs: the case's inputs (the state it drew), by name.
        status: ``failed``, ``error``, ``passed`` or ``not_applicable`` (the factory rejects
            the case, or it is inconclusive: ``note`` says which).
        note: why the case did not run to a verdict, '' otherwise.
    """

    failure: fl.Failure | None
    comparison: capture.Comparison | None = None
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    status: str = "passed"
    note: str = ""

    def entries(self) -> list[Entry]:
        """:func:`disagreeing_entries` of the failing comparison ([] without one)."""
        if self.comparison is None or self.failure is None or self.failure.tolerance is None:
            return []
        return disagreeing_entries(self.comparison, self.failure.tolerance)


def disagreeing_entries(comparison: capture.Comparison, allowance: float,
                        limit: int | None = None) -> list[Entry]:
    """The entries of ``comparison`` whose ``|got − expected| / max(1, scale)`` exceeds
    ``allowance`` (or is NaN), the largest difference first, at most ``limit`` (None: all).

    Shapes: ``got`` and ``expected`` equal, any rank (a 0-d comparison has index ``()``).
    """
    got, want = comparison.got.to(torch.float64), comparison.want.to(torch.float64)
    unit = max(1.0, comparison.scale)
    difference = (got - want).abs()
    bad = (difference / unit > allowance) | torch.isnan(difference)
    order = torch.argsort(torch.nan_to_num(difference[bad], nan=math.inf), descending=True)
    where = [tuple(int(i) for i in index) for index in torch.nonzero(bad)]
    chosen = order.tolist() if limit is None else order[:limit].tolist()
    return [Entry(where[k], float(got[where[k]]), float(want[where[k]]),
                  float(difference[where[k]]), allowance * unit) for k in chosen]


def format_entries(replayed: Replayed, limit: int = ENTRIES_SHOWN) -> str:
    """The replay's verdict and its disagreeing entries as text, e.g.::

        law.reported failed: X' vs ...: error 0.001 > tolerance 2.2e-11 ...
        3 of 96 entries differ beyond the allowance (the largest first):
          index            got               expected          |difference|  allowance
          (0, 1, 0, 0)     1.001...          1.0000...         1e-03         2.2e-11
    """
    if replayed.failure is None:
        return f"the case {replayed.status}{': ' + replayed.note if replayed.note else ''}"
    lines = [f"{replayed.failure.kind}: {replayed.failure.message}"]
    if replayed.failure.hint:
        lines.append(f"hint: {replayed.failure.hint}")
    comparison = replayed.comparison
    if comparison is None:
        lines.append("(not an elementwise comparison: no entries to show)")
        if replayed.failure.traceback:
            lines.append(replayed.failure.traceback.rstrip())
        return "\n".join(lines)
    every = replayed.entries()
    lines.append(f"{len(every)} of {comparison.got.numel()} entries of {replayed.failure.label} "
                 f"differ beyond the allowance (the largest first; shape "
                 f"{list(comparison.got.shape)}, allowance = {replayed.failure.tolerance:.3g} × "
                 f"max(1, scale {comparison.scale:.3g})):")
    lines.append(f"  {'index':<20} {'got':>24} {'expected':>24} {'|difference|':>13} "
                 f"{'allowance':>10}")
    for entry in every[:limit]:
        lines.append(f"  {entry.index!s:<20} {entry.got:>24.17g} {entry.expected:>24.17g} "
                     f"{entry.difference:>13.3e} {entry.allowance:>10.3e}")
    if len(every) > limit:
        lines.append(f"  ... and {len(every) - limit} more")
    return "\n".join(lines)


def context_for(setup: Any, prop: Property) -> Context:
    """A fresh :class:`Context` for ``prop`` in the run ``setup``
    (:class:`hcspec.conformance.run.inspection.RunSetup`), as the session builds it (with what
    its family's setup hook prepared, if anything)."""
    info = setup.info
    return Context(factory=setup.target.factory, target_name=setup.target.name,
                   kind=info.kind, conventions=info.conventions,
                   capabilities=info.capabilities, dtype=info.dtype, device=setup.device,
                   profile=setup.profile, seed=setup.seed,
                   prepared=setup.prepared_for(prop))


def replay(setup: Any, property_id: str, case: Case, *, post_mortem: bool = False) -> Replayed:
    """Run ``property_id`` on ``case`` once against the run ``setup``
    (:func:`hcspec.conformance.run.inspection.prepare`) in the calling thread, keeping what it
    compared. With ``post_mortem``, a failure or error opens the debugger
    (:func:`pdb.post_mortem`) at the frame that raised it: the failing comparison
    (``Recorder.expect``; ``up`` reaches the check, its tensors in its locals).

    Raises:
        KeyError: an unknown property id. ``KeyboardInterrupt`` propagates.
    """
    prop = BY_ID[property_id]
    ctx = context_for(setup, prop)
    with capture.capturing() as captured:
        try:
            prop.run(ctx, case)
        except (FactoryRejected, NotApplicable, Inconclusive) as exc:
            return Replayed(None, inputs=captured.inputs, status="not_applicable",
                            note=f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            failed = isinstance(exc, PropertyFailure)
            failure = fl.from_exception(exc, failed=failed, counterexample=case.to_json())
            if post_mortem:
                print(f"\n{property_id} {failure.kind}: {failure.message}\n(pdb: the frame "
                      "that raised it; `up` reaches the check)", file=sys.stderr)
                pdb.post_mortem(exc.__traceback__)
            comparison = captured.matching(failure.error) if failed else None
            return Replayed(failure, comparison, captured.inputs,
                            "failed" if failed else "error")
    return Replayed(None, inputs=captured.inputs, status="passed")


SCRIPT: Final = '''\
"""Replay of {property_id} failing on {target} (written by hc-conformance run --save-failures).

Rebuilds the target through its factory, runs this one check on the saved case, and prints
the entries that disagree (index, got, expected, allowance). Exit code 1 while the failure
reproduces, 0 once it passes. Run it from anywhere: python {script_name}
"""

import json
import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
SAVED = json.loads((HERE / "case.json").read_text(encoding="utf-8"))
os.chdir(SAVED["cwd"])  # the folder the run started in: the target's modules import from it
sys.path.insert(0, SAVED["cwd"])

from hcspec.conformance import replay  # noqa: E402
from hcspec.conformance.run.inspection import prepare  # noqa: E402
from hcspec.conformance.strategies import Case  # noqa: E402

setup = prepare(SAVED["target"], profile=SAVED["profile"], device=SAVED["device"],
                seed=SAVED["seed"])
found = replay.replay(setup, SAVED["property"], Case.from_json(SAVED["case"]),
                      post_mortem="--pdb" in sys.argv[1:])
print(replay.format_entries(found))
saved = torch.load(HERE / "tensors.pt", weights_only=True)
if found.comparison is not None and "got" in saved:
    same = torch.equal(found.comparison.got, saved["got"])
    print("the target's output", "equals" if same else "DIFFERS from", "the saved one")
sys.exit(1 if found.failure is not None else 0)
'''


def script_text(property_id: str, target: str) -> str:
    """The standalone replay script of one saved failure (:data:`SCRIPT`)."""
    return SCRIPT.format(property_id=property_id, target=target, script_name="replay.py")


@dataclass
class FailureSaver:
    """Writes each failed property of a run to ``directory`` (``--save-failures``).

    Attributes:
        directory: where the folders go (created when missing).
        target: the TARGET string (the script resolves it again).
        profile, device, seed, timeout: the run's (``device`` resolved: ``cpu``/``cuda``).
        saved: the folders written so far.
        problems: why a failure could not be saved, one line each.
    """

    directory: Path
    target: str
    profile: str
    device: str
    seed: int
    timeout: float | None = None
    saved: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _setup: Any = None

    def save(self, property_id: str, failure: fl.Failure | None) -> Path | None:
        """Replay the failing case of ``property_id`` (``failure.counterexample``), within
        the run's time limit, and write its folder; None (with the reason in
        :attr:`problems`) when there is no case, the replay times out or does not fail.
        Never raises except ``KeyboardInterrupt``."""
        from hcspec.conformance.run import isolation
        from hcspec.conformance.run.inspection import prepare
        from hcspec.conformance.run.timeouts import call_with_timeout

        if failure is None or failure.counterexample is None:
            self.problems.append(f"{property_id}: no failing case to save")
            return None
        case = Case.from_json(failure.counterexample)
        try:
            if self._setup is None:
                self._setup = prepare(self.target, profile=self.profile, device=self.device,
                                      seed=self.seed, timeout=self.timeout)
            with isolation.watch():  # what the target changes in torch's state is put back
                found = call_with_timeout(lambda: replay(self._setup, property_id, case),
                                          self.timeout, f"{property_id}: saving the failure")
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # TimedOut included: the run goes on without this folder
            self.problems.append(f"{property_id}: the replay raised {type(exc).__name__}: {exc}")
            return None
        folder = self.directory / property_id
        folder.mkdir(parents=True, exist_ok=True)
        record = {"target": self.target, "property": property_id, "profile": self.profile,
                  "device": self.device, "seed": self.seed, "case": failure.counterexample,
                  "cwd": os.getcwd(), "failure": failure.to_dict(),
                  "replayed": found.status}
        (folder / "case.json").write_text(json.dumps(record, indent=2) + "\n",
                                          encoding="utf-8")
        tensors: dict[str, Any] = {"inputs": found.inputs}
        if found.comparison is not None and found.failure is not None:
            tensors.update(got=found.comparison.got, expected=found.comparison.want,
                           scale=found.comparison.scale, error=found.comparison.error,
                           allowance=found.failure.tolerance, label=found.failure.label)
        torch.save(tensors, folder / "tensors.pt")
        (folder / "replay.py").write_text(script_text(property_id, self.target),
                                          encoding="utf-8")
        (folder / "entries.txt").write_text(format_entries(found) + "\n", encoding="utf-8")
        self.saved.append(folder)
        return folder


def saved_summary(saver: FailureSaver) -> Sequence[str]:
    """One line per saved folder (``python DIR/<id>/replay.py``) and per failure not saved."""
    lines = [f"saved: python {folder / 'replay.py'}" for folder in saver.saved]
    return [*lines, *(f"not saved: {problem}" for problem in saver.problems)]
