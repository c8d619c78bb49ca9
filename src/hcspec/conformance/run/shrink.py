"""Greedy shrinking of a failing case: the smallest case that still fails the same way.

hypothesis shrinks the cases it generates; a failure found by one of a property's explicit
examples (hcspec.conformance.machinery.cases.Cases.examples: ``B=2, T=3, n=4, d=8`` at layer 5,
…) would otherwise be printed as is. :func:`shrink` walks the :class:`Case` fields one at a
time towards simpler values — ``batch``, ``tokens`` → 1, ``n`` → the smallest the property
accepts, ``d`` → small, ``layer_index`` → 0, ``scale``/``param_scale`` → 1, ``perturb`` → less,
``branch`` → a simpler one, ``seed`` → the run seed — skipping every candidate outside the
property's declared domain (:meth:`hcspec.conformance.machinery.declaration.Property.admits`:
its ``n ≥ 2``, ``d > n``, parameter scales …) and re-running the property on each other candidate
and keeping a candidate when it fails *the same way* (:func:`signature`: the exception
type and the failing check's label, or its origin when it has no label), until a whole pass
over the fields changes nothing or :data:`MAX_RUNS` re-runs are spent. The bound is a number of
runs, not a time, so the shrunk case is the same on every machine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hcspec.conformance.machinery.base import Context, FactoryRejected, Inconclusive, NotApplicable
from hcspec.conformance.machinery.declaration import Property
from hcspec.conformance.outputs.failure import signature
from hcspec.conformance.strategies import BRANCHES, Case

MAX_RUNS = 40
"""Re-runs of the property one shrink may spend."""

__all__ = ["MAX_RUNS", "Shrunk", "shrink", "signature"]


@dataclass
class Shrunk:
    """The result of :func:`shrink`.

    Attributes:
        case: the smallest failing case found (the original when nothing smaller fails).
        error: the exception ``case`` raised.
        runs: how many re-runs were spent.
    """

    case: Case
    error: BaseException
    runs: int


def _candidates(case: Case, run_seed: int) -> Iterator[tuple[str, Any]]:
    """(field, simpler value) pairs for ``case``, simplest first within each field."""
    yield from (("batch", 1), ("tokens", 1))
    yield from (("n", n) for n in range(1, case.n))
    yield from (("d", d) for d in sorted({1, 2, case.n + 1, case.d // 2}) if 0 < d < case.d)
    yield ("layer_index", 0)
    yield ("scale", 1.0)
    yield ("param_scale", 1.0)
    yield from (("perturb", p) for p in (0.0, 0.03, 0.1, 0.3) if p < case.perturb)
    yield from (("branch", b) for b in BRANCHES[:BRANCHES.index(case.branch)])
    yield ("seed", run_seed)


def _inside(prop: Property, candidate: Case, current: Case) -> bool:
    """``candidate`` lies inside ``prop``'s declared domain — or, when ``current`` (a custom
    explicit example) already lies outside it, outside it for the same reason only: a shrink
    step never leaves the domain, so the counterexample is one the property claims."""
    reason = prop.admits(candidate)
    return reason is None or reason == prop.admits(current)


def _failure(prop: Property, ctx: Context, case: Case) -> BaseException | None:
    """The exception ``prop`` raises on ``case``, or None (it passed, did not apply, or the
    factory rejected the configuration)."""
    try:
        prop.run(ctx, case)
    except KeyboardInterrupt:
        raise
    except (FactoryRejected, NotApplicable, Inconclusive):
        return None
    except Exception as exc:
        return exc
    return None


def shrink(prop: Property, ctx: Context, case: Case, error: BaseException,
           max_runs: int = MAX_RUNS) -> Shrunk:
    """Shrink ``case``, on which ``prop`` raised ``error``, greedily (module docstring).

    ``ctx``'s records (worst error, rejected and inconclusive cases, recorded curves) are left
    as they were before the re-runs. Never raises except ``KeyboardInterrupt``.
    """
    saved = (ctx.worst, list(ctx.rejected), list(ctx.inconclusive))
    curves = {quantity: dict(by_case) for quantity, by_case in ctx.record.series.items()}
    wanted = signature(error)
    best, tried = Shrunk(case, error, 0), {case}
    try:
        changed = True
        while changed and best.runs < max_runs:
            changed = False  # a pass over the fields; it starts again after each step taken
            for name, value in _candidates(best.case, ctx.seed):
                try:
                    candidate = dataclasses.replace(best.case, **{name: value})
                except ValueError:  # not a valid Case
                    continue
                if candidate in tried or not _inside(prop, candidate, best.case):
                    continue
                if best.runs >= max_runs:
                    break
                tried.add(candidate)
                best.runs += 1
                found = _failure(prop, ctx, candidate)
                if found is not None and signature(found) == wanted:
                    best = Shrunk(candidate, found, best.runs)
                    changed = True
                    break
    finally:
        ctx.worst, ctx.rejected, ctx.inconclusive = saved
        ctx.record.series = curves
    return best
