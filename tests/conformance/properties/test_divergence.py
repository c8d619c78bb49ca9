"""The one divergence search (:func:`hcspec.conformance.machinery.divergence.nearest`) on a toy
record whose error is known: each of its three steps, and the order of its preferences."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

from hcspec.conformance.machinery.divergence import nearest


@dataclass(frozen=True)
class Toy:
    """A record of three integer fields; the target is ``TARGET``."""

    a: int = 0
    b: int = 0
    c: int = 0


REFERENCE = Toy()


def distance(r: Toy) -> int:
    return sum(getattr(r, f) != getattr(REFERENCE, f) for f in ("a", "b", "c"))


def error_to(target: Toy) -> dict[str, object]:
    calls: list[Toy] = []

    def error(r: Toy) -> float:
        calls.append(r)
        return float(abs(r.a - target.a) + abs(r.b - target.b) + abs(r.c - target.c))

    return {"error": error, "calls": calls}


def moves(r: Toy) -> Iterator[Toy]:
    for step in (-1, 1):
        yield replace(r, a=r.a + step)
        yield replace(r, b=r.b + step)
        yield replace(r, c=r.c + step)


def test_the_reference_within_the_tolerance_is_the_answer() -> None:
    e = error_to(Toy(0, 0, 0))
    match = nearest(e["error"], REFERENCE, 0.5, distance=distance,  # type: ignore[arg-type]
                    candidates=[Toy(1, 0, 0)], moves=moves)
    assert (match.formula, match.error, match.exact) == (REFERENCE, 0.0, True)


def test_among_matching_candidates_the_fewest_departures_win() -> None:
    error = lambda r: 0.0 if r in (Toy(1, 1, 0), Toy(0, 0, 5)) else 9.0  # noqa: E731
    match = nearest(error, REFERENCE, 0.5, distance=distance,
                    candidates=[Toy(1, 1, 0), Toy(0, 0, 5), Toy(2, 0, 0)], moves=moves)
    assert match.formula == Toy(0, 0, 5) and match.exact


def test_greedy_changes_compose_from_the_closest_candidate_and_each_record_is_scored_once(
        ) -> None:
    e = error_to(Toy(3, 0, 1))
    match = nearest(e["error"], REFERENCE, 0.5, distance=distance,  # type: ignore[arg-type]
                    candidates=[Toy(0, 0, 1), Toy(9, 9, 9)], moves=moves)
    assert (match.formula, match.exact) == (Toy(3, 0, 1), True)
    calls = e["calls"]
    assert isinstance(calls, list) and len(calls) == len(set(calls))


def test_without_a_match_the_closest_end_is_reported_not_exact() -> None:
    def error(r: Toy) -> float:  # only a reaches the target: b and c make it worse
        return math.nan if r.b else 10.0 - 2 * min(r.a, 4) + 0.5 * r.c

    match = nearest(error, REFERENCE, 0.5, distance=distance, moves=moves, max_changes=3)
    assert (match.formula, match.error, match.exact) == (Toy(3, 0, 0), 4.0, False)
    stuck = nearest(error, REFERENCE, 0.5, distance=distance, improvement=0.5)
    assert (stuck.formula, stuck.exact) == (REFERENCE, False)
