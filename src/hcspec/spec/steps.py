"""Derivation steps: what a proof may display, and how each displayed line was checked.

This module is the one place the step API is documented. A proof function returns a list of
steps, each a ``(label, expression)`` pair. :meth:`hcspec.spec.registry.Theorem.prove` opens a
*ledger* before it runs the proof, and every checking function records the expression it
verified there; after the proof it requires every displayed step to be one of:

- a **checked step** — its expression was recorded by a check during this proof:
  :func:`hcspec.spec.checks.require_equal` (an exact simplification after a numeric gate; with
  ``show=``/``where=`` a compact form whose notation is substituted back and compared),
  :func:`hcspec.spec.checks.chain` (``e₀ = e₁ = …``: each link checked exactly, or by one of the
  kernel's named rewrites; a leading string or LaTeX-named symbol is the name of the first side),
  :func:`hcspec.spec.checks.require_true` (a sympy condition that is exactly True; a relation it
  displays is re-decided from its own sides) and :func:`hcspec.spec.checks.require_relation`;
  relabelling a checked step, ``(new label, step[1])``, keeps it checked;
- a **lemma citation** — :func:`cite` displays a fact that another registered theorem (a lemma,
  id ``lemma.*`` by convention) displayed as a checked step of its own proof, with the free
  symbols renamed; the lemma is proven (once per process) before it is cited;
- **prose** — :func:`prose` is text only, typeset as a paragraph, never as a formula.

Anything else — a bare ``(label, expr)`` whose expression no check produced — fails the proof
("displays an unchecked step"), so a derivation page can only show what was verified.

A symbol whose sympy assumption (``positive=True``, …) is a declared hypothesis is made with
:func:`hypothesis`, so that the declaration and the assumption cannot drift apart: a theorem that
does not declare it proves without it. Definitions and notation go in the theorem's ``setting``,
not its ``assumptions``.

A chain link may use facts (``chain(..., using=[...])``, named on the page next to the link):
:func:`assume` (a declared assumption, checked against the theorem's ``assumptions``),
:func:`from_lemma` / :func:`lemma_rewrite` (a lemma's proven fact as a substitution or a matrix
rewrite), or a :class:`Given` built in the proof for a construction it makes ("take e with
eᵀe = 1"). ``chain(..., via=(...))`` checks long intermediate forms without displaying them;
:func:`hcspec.spec.checks.require_link` shows one checked link as an equation (the form a lemma
uses so that its facts can be cited). Theorem labels are derived, never read from words
(:func:`hcspec.spec.registry.derived_generality`): "induction" when the proof records a checked
base case and step with :func:`induction`, "all sizes" when a displayed checked step holds for a
symbolic size, else the concrete label.

Writing a step::

    steps.append(require_equal("H 1 = 1, every n", H * one, one))          # checked
    steps.append(chain("row sums", r"(T_r(A) \\mathbf{1})_i", summed, split, 1))  # checked
    steps.append(cite("with 1ᵀ e_1 = 1", "lemma.unit_vectors", fact, {j: 1}))    # lemma
    steps.append(prose("so by induction every layer reads s_g."))             # prose
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

import sympy

Step = tuple[str, sympy.Basic]
"""One derivation step: a human label and the sympy expression it shows."""

PROSE = sympy.Symbol("__prose__")
"""The expression of a prose step: the page prints its label as text and no formula."""

_LEDGER: ContextVar[set[sympy.Basic] | None] = ContextVar("hcspec_spec_ledger", default=None)
_ASSUMPTIONS: ContextVar[tuple[str, ...] | None] = ContextVar("hcspec_spec_assumptions",
                                                             default=None)
_USED: ContextVar[set[str] | None] = ContextVar("hcspec_spec_used_assumptions", default=None)
_STATEMENT: ContextVar[list[sympy.Basic] | None] = ContextVar("hcspec_spec_statement",
                                                            default=None)
_INDUCTIONS: ContextVar[list[tuple[sympy.Basic, sympy.Basic]] | None] = ContextVar(
    "hcspec_spec_inductions", default=None)


def statement_formula(steps: Any) -> int | None:
    """The number (1-based) of the displayed step :func:`statement` marked first in the proof
    being run, None when none is (or the marked expression is not displayed)."""
    marked = _STATEMENT.get() or []
    for number, (_, expr) in enumerate(steps, start=1):
        if marked and expr != PROSE and _key(expr) == marked[0]:
            return number
    return None


def _mark_used(text: str) -> bool:
    """Record every declared assumption containing ``text`` as used by the proof being run;
    whether one does (True outside a proof)."""
    found, used = _ASSUMPTIONS.get(), _USED.get()
    if found is None:
        return True
    hits = [a for a in found if _words(text) in _words(a)]
    if used is not None:
        used.update(hits)
    return bool(hits)


def unused_assumptions() -> list[str]:
    """The declared assumptions of the proof being run that no :func:`assume`,
    :func:`declared`, :func:`granted` or :func:`hypothesis` has used so far (empty outside a
    proof)."""
    found, used = _ASSUMPTIONS.get(), _USED.get()
    return [a for a in found or () if used is not None and a not in used]


def _key(expr: Any) -> sympy.Basic:
    """A hashable, value-compared form of ``expr`` (a mutable Matrix becomes immutable)."""
    if isinstance(expr, sympy.MatrixBase) and not isinstance(expr, sympy.Basic):
        return cast(sympy.Basic, expr.as_immutable())
    if isinstance(expr, bool):
        return sympy.true if expr else sympy.false
    return cast(sympy.Basic, sympy.sympify(expr))


SIZE_NAMES = ("n", "d", "L", "m", "k", "p", "f", "t")
"""The names a symbolic size goes by (a matrix dimension or a sum's bound), in display order."""

_SIZES: ContextVar[dict[sympy.Basic, frozenset[str]] | None] = ContextVar("hcspec_spec_sizes",
                                                                         default=None)


def size_symbols(*exprs: Any) -> frozenset[str]:
    """The symbolic sizes ``exprs`` are about: the symbols of :data:`SIZE_NAMES` that are a
    dimension of a matrix expression, a bound of a finite sum or product, or a free integer
    symbol (a count polynomial in n, d; a shape (d, 1)) in them."""
    names: set[str] = set()
    for expr in exprs:
        if isinstance(expr, str) or not isinstance(expr, sympy.Basic):
            continue
        names |= {s.name for s in expr.free_symbols
                  if isinstance(s, sympy.Symbol) and s.is_integer}
        matrices = [m for m in expr.atoms(sympy.MatrixSymbol, sympy.Identity, sympy.ZeroMatrix,
                                          sympy.OneMatrix)]
        matrices += [expr] if isinstance(expr, sympy.MatrixExpr) else []
        for matrix in matrices:
            for dim in matrix.shape:
                names |= {s.name for s in sympy.sympify(dim).free_symbols}
        for total in expr.atoms(sympy.Sum, sympy.Product):
            for index, *bounds in total.limits:
                names |= {s.name for b in bounds for s in sympy.sympify(b).free_symbols
                          if s != index}
    return frozenset(names & set(SIZE_NAMES))


def record(expr: Any, values: tuple[Any, ...] = ()) -> Any:
    """Record ``expr`` as checked in the open ledger (a no-op outside a proof) and return it,
    with the symbolic sizes (:func:`size_symbols`) of ``expr`` and of the ``values`` it was
    checked on (a chain's sides, a compact display's proven pair).

    Only the kernel's checking functions call this, after the check has passed.
    """
    ledger, sizes = _LEDGER.get(), _SIZES.get()
    if ledger is not None:
        ledger.add(_key(expr))
    if sizes is not None:
        key = _key(expr)
        sizes[key] = sizes.get(key, frozenset()) | size_symbols(expr, *values)
    return expr


def proven_sizes(steps: Any) -> tuple[str, ...]:
    """The symbolic sizes the displayed checked ``steps`` of the proof being run hold for (read
    from the ledger, in :data:`SIZE_NAMES` order; empty outside a proof)."""
    sizes = _SIZES.get() or {}
    found: set[str] = set()
    for _, expr in steps:
        if expr != PROSE:
            found |= sizes.get(_key(expr), frozenset())
    return tuple(name for name in SIZE_NAMES if name in found)


def induction(base: Step, step: Step) -> list[Step]:
    """Record a checked induction in the proof being run and return ``[base, step]`` for
    display: ``base`` is the checked base case, ``step`` the checked induction step (the
    claim for k carried to k + 1, or from a generic state of the invariant's form to the next),
    which must hold for a symbolic size (:func:`size_symbols`: what the kernel checked it on).

    This is the only thing that makes a theorem's label "induction"
    (:func:`hcspec.spec.registry.derived_generality`): the words of a label never do.

    Raises:
        ProofFailure: when ``base`` or ``step`` is prose or not a step checked in this proof,
            when they are one step, or when the step holds for no symbolic size.
    """
    from hcspec.spec.registry import ProofFailure

    checked, sizes = _LEDGER.get(), _SIZES.get()
    for role, (label, expr) in (("base case", base), ("induction step", step)):
        if expr == PROSE or (checked is not None and _key(expr) not in checked):
            raise ProofFailure(f"induction: the {role} {label!r} is not a checked step")
    if _key(base[1]) == _key(step[1]):
        raise ProofFailure(f"induction: the base case and the step are one step: {base[0]!r}")
    if sizes is not None and not sizes.get(_key(step[1])):
        raise ProofFailure(f"induction: the step {step[0]!r} holds for no symbolic size (it "
                           "was checked at one value, not for a generic one)")
    found = _INDUCTIONS.get()
    if found is not None:
        found.append((_key(base[1]), _key(step[1])))
    return [base, step]


def proven_induction(steps: Any) -> bool:
    """Whether the proof being run recorded an :func:`induction` whose base case and step are
    both among the displayed ``steps`` (False outside a proof)."""
    shown = {_key(expr) for _, expr in steps if expr != PROSE}
    return any(base in shown and step in shown for base, step in _INDUCTIONS.get() or ())


@contextmanager
def ledger(assumptions: tuple[str, ...] = ()) -> Iterator[set[sympy.Basic]]:
    """Open a fresh ledger for one proof of a theorem with these declared ``assumptions``
    (nested proofs, e.g. a cited lemma, get their own)."""
    token = _LEDGER.set(set())
    declared = _ASSUMPTIONS.set(tuple(assumptions))
    used = _USED.set(set())
    sizes = _SIZES.set({})
    marked = _STATEMENT.set([])
    inductions = _INDUCTIONS.set([])
    try:
        found = _LEDGER.get()
        assert found is not None
        yield found
    finally:
        _INDUCTIONS.reset(inductions)
        _STATEMENT.reset(marked)
        _SIZES.reset(sizes)
        _USED.reset(used)
        _ASSUMPTIONS.reset(declared)
        _LEDGER.reset(token)


def _words(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Given:
    """A fact a chain link may use (``checks.chain(..., using=[...])``): an assumption the theorem
    declares (:func:`assume`) or a fact a lemma proved (:func:`from_lemma`), applied by the kernel
    as a substitution (``replace``) or as a rewrite of matrix products (``factors`` → ``rhs``,
    see :func:`hcspec.spec.doubly_stochastic.rewrite`)."""

    text: str
    replace: tuple[tuple[Any, Any], ...] = ()
    factors: tuple[Any, ...] = ()
    rhs: Any = None
    latex: str = ""
    """How a page names the fact (LaTeX); empty: ``text`` typeset as text."""

    def shown(self) -> str:
        """The fact as LaTeX for the page."""
        if self.latex:
            return self.latex
        escaped = self.text.replace("\\", r"\textbackslash ").replace("_", r"\_").replace(
            "{", r"\{").replace("}", r"\}")
        return rf"\text{{{escaped}}}"

    def apply(self, expr: Any) -> Any:
        """``expr`` with this fact used once wherever it matches."""
        if self.replace:
            expr = expr.xreplace(dict(self.replace))
        if self.factors:
            from hcspec.spec.doubly_stochastic import rewrite

            expr = rewrite(expr, list(self.factors), self.rhs)
        return expr


def assume(text: str, *, replace: Mapping[Any, Any] | None = None,
           factors: tuple[Any, ...] = (), rhs: Any = None) -> Given:
    """A declared assumption as a rewrite: ``text`` must occur (up to spacing) in one of the
    assumptions of the theorem being proven.

    Raises:
        ProofFailure: when no declared assumption contains ``text``.
    """
    from hcspec.spec.registry import ProofFailure

    if not _mark_used(text):
        raise ProofFailure(f"the proof uses '{text}', which is not a declared assumption")
    return Given(text, tuple((replace or {}).items()), tuple(factors), rhs)


def declared(text: str) -> bool:
    """Whether the theorem being proven declares an assumption containing ``text`` (up to
    spacing); True outside a proof."""
    return _mark_used(text)


def granted(text: str, weaker: Mapping[str, bool] | None = None,
            **assumptions: bool) -> dict[str, bool]:
    """The sympy ``assumptions`` (``positive=True``, …) that the declared assumption ``text``
    states, for a matrix of symbols or an ``IndexedBase``; only ``weaker`` (default: none) when
    the theorem being proven does not declare ``text`` (see :func:`hypothesis`)."""
    return dict(assumptions) if declared(text) else dict(weaker or {})


def hypothesis(text: str, name: str, weaker: Mapping[str, bool] | None = None,
               **assumptions: bool) -> sympy.Symbol:
    """The symbol ``name`` carrying the sympy ``assumptions`` (``positive=True``, …) that the
    declared assumption ``text`` states (e.g. ``hypothesis("c > 0", "c", positive=True)``).

    When the theorem being proven does not declare ``text``, the symbol carries only ``weaker``
    (e.g. ``{"real": True}``: ε real instead of ε > 0): the proof then runs without the
    hypothesis, so a simplification that needs it fails. This is how a symbol's assumption is
    tied to the theorem's list, and how tests/spec/test_assumptions.py sees that it is needed.
    """
    return sympy.Symbol(name, **granted(text, weaker, **assumptions))


def from_lemma(lemma_id: str, fact: Any, rename: Mapping[Any, Any] | None = None) -> Given:
    """A fact ``lhs = rhs`` displayed by the proof of lemma ``lemma_id`` (see :func:`cite`), with
    ``rename`` applied, used as the substitution ``lhs → rhs``."""
    _, shown = cite(f"using {lemma_id}", lemma_id, fact, rename)
    assert isinstance(shown, sympy.Eq)
    name = lemma_id.replace("_", r"\_")
    latex = f"{sympy.latex(shown.lhs)} = {sympy.latex(shown.rhs)}\\ " + rf"(\text{{lemma {name}}})"
    return Given(f"{shown.lhs} = {shown.rhs} (lemma {lemma_id})", ((shown.lhs, shown.rhs),),
                 latex=latex)


def statement(step: Step) -> Step:
    """Mark a checked step as the statement's formula: the theorem's page typesets the
    statement's formula from this step's own expression (what the kernel checked), not from
    text (:attr:`hcspec.spec.registry.ProofResult.formula`). The step is displayed as usual."""
    marked = _STATEMENT.get()
    if marked is not None:
        marked.append(_key(step[1]))
    return step


def prose(text: str) -> Step:
    """A step that is text only (an explanation, the conclusion of an argument shown above):
    the page typesets it as a sentence, never as a formula."""
    return (text, PROSE)


def unchecked(steps: Any, checked: set[sympy.Basic]) -> list[str]:
    """The labels of ``steps`` that display an expression absent from ``checked`` (prose is
    never unchecked)."""
    bad = []
    for label, expr in steps:
        if expr == PROSE:
            continue
        if _key(expr) not in checked:
            bad.append(label)
    return bad


def cite(label: str, lemma_id: str, fact: Any, rename: Mapping[Any, Any] | None = None) -> Step:
    """Display ``fact`` (with ``rename`` applied to its symbols) as proven by the lemma
    ``lemma_id``.

    ``fact`` must be the expression of a checked step of the lemma's own proof, which is proven
    first (once per process); the label gains "(lemma <id>)".

    Raises:
        ProofFailure: when the lemma does not prove, or does not display ``fact``.
        KeyError: for an unknown lemma id.
    """
    from hcspec.spec.registry import ProofFailure, proven

    result = proven(lemma_id)
    if not result.ok:
        raise ProofFailure(f"{label}: the cited lemma {lemma_id} does not prove: {result.error}")
    if _key(fact) not in {_key(expr) for _, expr in result.steps if expr != PROSE}:
        raise ProofFailure(f"{label}: lemma {lemma_id} does not display {fact}")
    shown = _key(fact).xreplace(dict(rename or {}))
    return (f"{label} (lemma `{lemma_id}`)", record(shown))


def _factor_entry(factor: Any, entries: Mapping[Any, Any], row: Any, col: Any) -> Any:
    """Entry ``(row, col)`` (1-based) of ``factor``, a matrix symbol of ``entries`` or its
    transpose, in index form."""
    from hcspec.spec.registry import ProofFailure

    if isinstance(factor, sympy.Transpose):
        return _factor_entry(factor.arg, entries, col, row)
    if factor not in entries:
        raise ProofFailure(f"the rewrite's factor {factor} has no index form (entries=)")
    return entries[factor](row, col)


def product_entry(factors: tuple[Any, ...], entries: Mapping[Any, Any]) -> tuple[Any, Any, Any]:
    """The index form of one entry of the matrix product ``factors``: ``(entry, row, col)`` with
    the free indices ``row``, ``col`` (1 for a dimension of size 1) and one finite sum
    ``Σ_{r=1}^{m}`` per contracted dimension m (``entries``: each factor's entry as a function
    of its 1-based row and column)."""
    rows, cols = factors[0].shape[0], factors[-1].shape[1]
    row = 1 if rows == 1 else sympy.Symbol("p_{row}", integer=True)
    col = 1 if cols == 1 else sympy.Symbol("q_{col}", integer=True)

    def first(c: Any) -> Any:
        return _factor_entry(factors[0], entries, row, c)

    current = first
    for position, factor in enumerate(factors[1:]):
        size = factor.shape[0]
        index = sympy.Symbol(f"r_{{{position}}}", integer=True)

        def step(c: Any, before: Any = current, factor: Any = factor, size: Any = size,
                 index: Any = index) -> Any:
            if size == 1:
                return before(1) * _factor_entry(factor, entries, 1, c)
            return sympy.Sum(before(index) * _factor_entry(factor, entries, index, c),
                             (index, 1, size))

        current = step
    return current(col), row, col


def lemma_rewrite(lemma_id: str, fact: Any, factors: tuple[Any, ...], rhs: Any,
                  rename: Mapping[Any, Any] | None = None, *,
                  entries: Mapping[Any, Any]) -> Given:
    """A fact of lemma ``lemma_id`` (its index form ``fact``, checked as in :func:`cite`) used as
    the matrix rewrite ``factors → rhs`` (e.g. ``1ᵀ e_j → 1`` for the fact ``Σ_r δ_rj = 1``);
    the page names the lemma next to the link.

    The rewrite must be an instance of the fact: ``entries`` gives each factor's entries in
    index form (1-based, e.g. ``e_j: (r, c) ↦ δ_rj``); the product's entry, written as finite
    sums (:func:`product_entry`), must be the fact's left side and ``rhs``'s entry its right
    side (each a link the kernel checks, :func:`hcspec.spec.checks.require_link`'s rule), so a
    lemma cited for a rewrite it does not state fails.

    Raises:
        ProofFailure: when the lemma does not display ``fact``, or the rewrite is not an instance
            of it.
    """
    from hcspec.spec.checks import _link_holds
    from hcspec.spec.registry import ProofFailure

    _, shown = cite(f"using {lemma_id}", lemma_id, fact, rename)
    entry, row, col = product_entry(tuple(factors), entries)
    at = (0 if rhs.shape[0] == 1 else row - 1, 0 if rhs.shape[1] == 1 else col - 1)
    product = sympy.MatMul(*factors) if len(factors) > 1 else factors[0]
    if not (isinstance(shown, sympy.Eq) and _link_holds(sympy.sympify(rhs[at]), shown.rhs)
            and _link_holds(entry, shown.lhs)):
        raise ProofFailure(f"the rewrite {product} = {rhs} is not an instance of lemma "
                           f"{lemma_id}'s fact {shown}: its entry is {entry} = {rhs[at]}")
    text = f"{product} = {rhs} (lemma {lemma_id})"
    name = lemma_id.replace("_", r"\_")
    shown_text = f"{sympy.latex(product)} = {sympy.latex(rhs)}\\ " + rf"(\text{{lemma {name}}})"
    return Given(text, (), tuple(factors), rhs, shown_text)
