"""The parameter count of an mHC layout, for the ``max_parameters`` declaration of
:class:`hcspec.conformance.protocol.conventions.Conventions`: a construction whose size grows
past what a machine can build (mHC-lite's ``φ_res`` has ``n·d·n!`` entries, arXiv 2601.05732)
declares the largest it supports, and the kit leaves larger cases out with the reason."""

from __future__ import annotations

import math

from hcspec.spec.record import Formula


def count_columns(formula: Formula, n: int) -> int:
    """The logits ``H_res`` is made from at expansion rate ``n``: ``n²`` (``sinkhorn``,
    ``orthostochastic``), or the number of permutations ``birkhoff`` combines (``n!`` when the
    set is all of them)."""
    if formula.construction != "birkhoff":
        return n * n
    return len(formula.permutations) if formula.permutations else math.factorial(n)


def parameter_count(formula: Formula, n: int, d: int) -> int:
    """The parameters of the mHC layout of ``formula``'s construction at ``(n, d)``:
    ``φ [n·d, 2n + R]``, biases ``[2n + R]`` and three gating scalars, with ``R``
    :func:`count_columns` (``n²``; ``birkhoff``: the number of permutations).

    >>> parameter_count(Formula(), 4, 8)
    795
    """
    columns = 2 * n + count_columns(formula, n)
    return n * d * columns + columns + 3


def oversized(formula: Formula, max_parameters: int | None, n: int, d: int) -> str | None:
    """Why ``max_parameters`` excludes ``(n, d)`` (:func:`parameter_count` above it), or None
    (no bound, or within it)."""
    if max_parameters is None:
        return None
    count = parameter_count(formula, n, d)
    if count <= max_parameters:
        return None
    columns = count_columns(formula, n)
    return (f"n={n}, d={d} has {count} parameters ({formula.construction}, φ [n·d, 2n "
            f"+ {columns}]), more than the declared max_parameters={max_parameters}")
