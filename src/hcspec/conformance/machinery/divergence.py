"""Naming how an output departs from the step it should compute: one search over step records
(:class:`hcspec.spec.record.Formula`) for the record whose output matches, shared by the
variant family (the target's ``H_res`` against the declared Sinkhorn–Knopp variant at its own
logits) and the published family (the target's step against DeepSeek-V4's published one).

:func:`nearest` scores a set of candidates tried together first (the divergences seen together
in practice), and the matching one with the fewest departures explains the output. When none
matches, it moves greedily: from the reference record and from the closest candidate, it
applies the single change that brings the output closest, and repeats while the error drops by
more than 10% (several divergences compound: fixing one of them may lower the worst entry only
a little). The families supply the error of a record, the candidates, the single changes
and the count of departures, and word the result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import torch

MAX_CHANGES = 6
"""The most single changes the greedy part composes."""

IMPROVEMENT = 0.9
"""A change is kept when it brings the error below this fraction of the best so far."""

R = TypeVar("R", bound=Hashable)


@dataclass(frozen=True)
class Match(Generic[R]):
    """The result of :func:`nearest`.

    Attributes:
        formula: the record found.
        error: its output's error against the target's.
        exact: whether that error is within the tolerance.
    """

    formula: R
    error: float
    exact: bool


def _ordered(error: float) -> float:
    """``error`` for ordering: NaN last."""
    return math.inf if math.isnan(error) else error


def nearest(error_of: Callable[[R], float], reference: R, tolerance: float, *,
            distance: Callable[[R], int], candidates: Iterable[R] = (),
            moves: Callable[[R], Iterable[R]] = lambda r: (),
            max_changes: int = MAX_CHANGES, improvement: float = IMPROVEMENT) -> Match[R]:
    """The record whose output is nearest the target's.

    1. ``reference`` itself, when its error is within ``tolerance``.
    2. Every one of ``candidates``: among those within ``tolerance``, the one with the fewest
       departures (``distance``), then the smallest error.
    3. Otherwise greedy single changes (``moves(record)``: the records one change away), from
       ``reference`` and from the candidate with the smallest error, each kept while it
       brings the error below ``improvement`` × the best so far, at most ``max_changes``; of
       the two ends, a matching one before one that does not, then the fewest departures,
       then the smallest error.

    ``error_of(record)`` is the error of that record's output against the target's (float64;
    NaN counts as no match); it is called once per distinct record. Never raises beyond what
    ``error_of`` raises.
    """
    errors: dict[R, float] = {}

    def error(record: R) -> float:
        if record not in errors:
            errors[record] = error_of(record)
        return errors[record]

    if error(reference) <= tolerance:
        return Match(reference, error(reference), True)
    scored = list(dict.fromkeys(candidates))
    matching = [c for c in scored if error(c) <= tolerance]
    if matching:
        best = min(matching, key=lambda c: (distance(c), error(c)))
        return Match(best, error(best), True)

    def greedy(best: R) -> R:
        for _ in range(max_changes):
            if error(best) <= tolerance:
                break
            neighbours = [r for r in dict.fromkeys(moves(best)) if r != best]
            if not neighbours:
                break
            closest = min(neighbours, key=lambda r: _ordered(error(r)))
            if not error(closest) < improvement * error(best):
                break
            best = closest
        return best

    starts = [reference]
    if scored:
        starts.append(min(scored, key=lambda c: _ordered(error(c))))
    ends = [greedy(s) for s in starts]
    best = min(ends, key=lambda r: (not error(r) <= tolerance, distance(r), _ordered(error(r))))
    return Match(best, error(best), error(best) <= tolerance)


def output_error(got: torch.Tensor, want: torch.Tensor, scale: float) -> float:
    """``max|got − want| / max(1, scale)`` in float64 (the kit's scaled error)."""
    return float((got.double() - want.double()).abs().max()) / max(1.0, scale)
