"""The theorem registry: every fact the spec proves is a registered :class:`Theorem`.

A theorem has a stable id (``family.name``, e.g. ``ds.transpose_closure``), a one-line statement,
its assumptions, the cases it is proven for, the paper source it follows, and a proof function.
The proof function returns the derivation as ``(label, sympy expression)`` steps and raises
:class:`ProofFailure` when a step does not hold; every displayed step must be checked, cited or
prose (:mod:`hcspec.spec.steps` documents the step API), or the proof fails.
:meth:`Theorem.prove` times the proof and turns
the outcome (including unexpected exceptions) into a :class:`ProofResult`; it never raises.

Proofs are exact: a symbolic residual that simplifies to zero, or a solve that shows a system has
no solution. Numeric spot checks may *add* confidence, never replace the exact step.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import sympy

from hcspec.spec.steps import Step as Step
from hcspec.spec.steps import (
    ledger,
    proven_induction,
    proven_sizes,
    statement_formula,
    unchecked,
    unused_assumptions,
)

GENERALITIES: dict[str, str] = {
    "all sizes": "proven for symbolic sizes: every n, d (and L, t) the statement covers",
    "induction": "proven for every size by a checked induction (base case and step)",
    "explicit sizes": "proven exactly at the sizes listed, and only there",
    "instance": "a fact about one specific case: a size, a matrix or a counterexample",
}
"""How general a proof is: the values of :attr:`ProofResult.generality` (derived from the proof,
:func:`derived_generality`) and of the optional claim :attr:`Theorem.generality`, with their
meaning."""

RANK = {"instance": 0, "explicit sizes": 1, "all sizes": 2, "induction": 3}
"""The labels from weakest to strongest: a claimed label may understate what the proof earns
(a theorem whose symbolic steps are auxiliary to a claim checked at listed sizes), never
overstate it."""


class ProofFailure(Exception):
    """Raised inside a proof function when a step that must hold does not.

    The message names the step and, where useful, the non-zero residual.
    """


def _immutable(expr: Any) -> sympy.Basic:
    """A step's expression as a sympy ``Basic`` (a mutable ``Matrix`` becomes its immutable
    copy), so every step is hashable and compares by value."""
    if isinstance(expr, sympy.MatrixBase) and not isinstance(expr, sympy.Basic):
        return expr.as_immutable()
    return cast(sympy.Basic, expr)


@dataclass(frozen=True)
class ProofResult:
    """Outcome of proving one theorem.

    Attributes:
        theorem_id: the id of the theorem proven.
        ok: True when every step held exactly.
        steps: the derivation, in order, as ``(label, expression)`` pairs.
        seconds: wall time of the proof.
        error: why the proof failed (``None`` when ``ok``).
        sizes: the symbolic sizes (``n``, ``d``, ``L``, …) the displayed checked steps hold for,
            read from what the kernel checked (:func:`hcspec.spec.steps.proven_sizes`).
        formula: the number of the step whose expression is the statement's formula
            (:func:`hcspec.spec.steps.statement`), None when the proof marks none.
        generality: the label the page shows: the claim of :attr:`Theorem.generality` (never
            stronger than what the proof earned), else the derived label
            (:func:`derived_generality`); "" when not ``ok``.
        earned: the label derived from the proof (:func:`derived_generality`), at least as
            strong as ``generality``; "" when not ``ok``.
    """

    theorem_id: str
    ok: bool
    steps: tuple[Step, ...]
    seconds: float
    error: str | None = None
    sizes: tuple[str, ...] = ()
    formula: int | None = None
    generality: str = ""
    earned: str = ""


@dataclass(frozen=True)
class Theorem:
    """A registered fact about HC/mHC with an exact sympy proof.

    Attributes:
        id: stable identifier ``family.name`` (conformance properties cite it).
        statement: one line, in the project's row convention (docs/reference.md, Conventions).
        assumptions: the hypotheses the proof uses, one line each: each is used by the proof
            (by name through :func:`hcspec.spec.steps.assume`, or as the sympy assumption of a
            symbol made by :func:`hcspec.spec.steps.hypothesis`), so dropping one fails
            ``prove`` (tests/spec/test_assumptions.py).
        cases: what it is proven for, e.g. ``"n in {1,2,3,4}, d in {1,2,3}"`` or ``"symbolic n"``.
        generality: the label the author claims, one of :data:`GENERALITIES`, or None for no
            claim (the page then shows the derived label, :func:`derived_generality`). A claim
            stronger (:data:`RANK`) than what the proof earns fails ``prove``; a weaker one is
            shown as claimed.
        source: the paper equation or section it follows (e.g. ``"HC arXiv:2409.19606 Eq. 14"``).
        proof: a function returning the derivation steps; it raises :class:`ProofFailure` when a
            step does not hold.
        setting: what the objects are (definitions, notation, the model the statement is
            about, where a reading of the paper comes from), one line each; not hypotheses, so
            the proof does not use them by name.
    """

    id: str
    statement: str
    assumptions: tuple[str, ...]
    cases: str
    source: str
    proof: Callable[[], list[Step]] = field(repr=False, compare=False)
    generality: str | None = None
    setting: tuple[str, ...] = ()

    def prove(self) -> ProofResult:
        """Run the proof and time it.

        Returns:
            A :class:`ProofResult`; ``ok`` is False when the proof raised (a
            :class:`ProofFailure` or any unexpected exception, whose traceback is kept in
            ``error``). This method does not raise.
        """
        start = time.perf_counter()
        try:
            with ledger(self.assumptions) as checked:
                steps = tuple(self.proof())
                unused = unused_assumptions()
                sizes = proven_sizes(steps)
                formula = statement_formula(steps)
                earned = derived_generality(self.generality, steps, sizes)
            bad = unchecked(steps, checked)
            if bad:
                raise ProofFailure(f"displays {len(bad)} unchecked step(s) (neither checked, "
                                   f"cited nor prose): {bad}")
            if unused:
                raise ProofFailure(f"declares assumptions no step uses (remove them, or use "
                                   f"them by name: assume/hypothesis/granted): {unused}")
            if self.generality is not None and RANK[self.generality] > RANK[earned]:
                raise ProofFailure(f"labelled {self.generality!r} but the proof earns only "
                                   f"{earned!r}: {_EARNS[earned]}")
        except ProofFailure as failure:
            return ProofResult(self.id, False, (), time.perf_counter() - start, str(failure))
        except Exception:  # an unexpected error is a failed proof, reported with its traceback
            error = traceback.format_exc()
            return ProofResult(self.id, False, (), time.perf_counter() - start, error)
        return ProofResult(self.id, True, tuple((label, _immutable(expr)) for label, expr in steps),
                           time.perf_counter() - start, sizes=sizes, formula=formula,
                           generality=self.generality or earned, earned=earned)


_EARNS = {
    "induction": "it records a checked induction (base case and step, the step about a symbolic "
                 "size)",
    "all sizes": "a displayed checked step holds for a symbolic size, and it records no checked "
                 "induction",
    "explicit sizes": "no displayed checked step holds for a symbolic size",
    "instance": "no displayed checked step holds for a symbolic size",
}


def derived_generality(claimed: str | None, steps: tuple[Step, ...],
                       sizes: tuple[str, ...]) -> str:
    """The label a proof earns, from what the kernel recorded while it ran (never from the words
    of a statement or a label): "induction" when it recorded a checked :func:`induction
    <hcspec.spec.steps.induction>` whose base case and step are displayed, else "all sizes" when
    a displayed checked step holds for a symbolic size (``sizes``, read from the ledger), else
    the concrete label ``claimed`` names ("explicit sizes" or "instance"; "instance" for any
    other claim or none). Call it inside the proof's ledger."""
    if sizes and proven_induction(steps):
        return "induction"
    if sizes:
        return "all sizes"
    return claimed if claimed in ("explicit sizes", "instance") else "instance"


_REGISTRY: dict[str, Theorem] = {}
_PROVEN: dict[str, ProofResult] = {}


def proven(theorem_id: str) -> ProofResult:
    """The result of proving the registered theorem ``theorem_id``, computed once per process
    (a lemma cited by several proofs is proven once).

    Raises:
        KeyError: for an unknown id.
    """
    if theorem_id not in _PROVEN:
        _PROVEN[theorem_id] = get(theorem_id).prove()
    return _PROVEN[theorem_id]


def register(theorem: Theorem) -> Theorem:
    """Add ``theorem`` to the registry and return it.

    Raises:
        ValueError: if a theorem with the same id is already registered, or the id is not of
            the form ``family.name``.
    """
    if "." not in theorem.id or theorem.id.startswith(".") or theorem.id.endswith("."):
        raise ValueError(f"theorem id must look like 'family.name', got {theorem.id!r}")
    if theorem.generality is not None and theorem.generality not in GENERALITIES:
        raise ValueError(f"theorem {theorem.id!r}: generality must be one of "
                         f"{tuple(GENERALITIES)}, got {theorem.generality!r}")
    if theorem.id in _REGISTRY:
        raise ValueError(f"theorem id {theorem.id!r} is already registered")
    _REGISTRY[theorem.id] = theorem
    return theorem


def theorem(
    id: str,
    statement: str,
    *,
    assumptions: Iterable[str] = (),
    cases: str,
    generality: str | None = None,
    source: str,
    setting: Iterable[str] = (),
) -> Callable[[Callable[[], list[Step]]], Theorem]:
    """Decorator form of :func:`register`: turns a proof function into a registered theorem
    (``generality``: the claimed label, one of :data:`GENERALITIES` or None, checked against the
    derived one; ``setting``: see :class:`Theorem`)."""

    def decorate(proof: Callable[[], list[Step]]) -> Theorem:
        return register(Theorem(id, statement, tuple(assumptions), cases, source, proof,
                                generality, tuple(setting)))

    return decorate


def all_theorems() -> list[Theorem]:
    """Every registered theorem, sorted by id (importing :mod:`hcspec.spec.theorems` registers
    them)."""
    import hcspec.spec.theorems  # noqa: F401  (import for its registration side effect)

    return [_REGISTRY[key] for key in sorted(_REGISTRY)]


def get(theorem_id: str) -> Theorem:
    """The registered theorem with this id.

    Raises:
        KeyError: naming the unknown id and listing the known ones.
    """
    import hcspec.spec.theorems  # noqa: F401

    try:
        return _REGISTRY[theorem_id]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise KeyError(f"unknown theorem id {theorem_id!r}; known ids: {known}") from None
