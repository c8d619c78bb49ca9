"""Declaring a property: :func:`declare` next to its check registers one :class:`Property` in
the catalogue's registry, at import.

A family module ``hcspec.conformance.families.<family>`` holds the checks of one family; every
id it declares is ``<family>.<name>``. Only what departs from the defaults is declared (the
standard examples and strategy, no requirement, no prerequisite, explored and shrunk).
docs/conformance.md ("Adding a property") walks through one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hypothesis import strategies as st

from hcspec.conformance import rules
from hcspec.conformance.machinery.cases import Cases
from hcspec.conformance.machinery.errors import DeclarationError
from hcspec.conformance.machinery.requirements import (
    PER_STREAM_READ,
    Requirement,
    Subject,
    first_unmet,
    reads_per_stream,
)
from hcspec.conformance.machinery.setup import FamilySetup
from hcspec.conformance.protocol import KINDS
from hcspec.conformance.seeding import seeded_global_rng
from hcspec.conformance.strategies import Case

if TYPE_CHECKING:

    from hcspec.conformance.machinery.base import Context

ExamplesFn = Callable[["Context"], Sequence[Case]]
StrategyFn = Callable[["Context"], st.SearchStrategy[Case]]
CheckFn = Callable[["Context", Case], None]



PACKAGE = "hcspec.conformance.families"
"""The package of the family modules: ``<PACKAGE>.<family>`` declares the ids ``<family>.*``."""


@dataclass(frozen=True, kw_only=True)
class Property:
    """One entry of the catalogue.

    Attributes:
        id: stable id ``family.name`` (never renamed once published; CLI ``--only`` takes it).
        statement: one line: what must hold.
        check: ``check(ctx, case)``; raises
            :class:`hcspec.conformance.machinery.errors.PropertyFailure` when it does not hold.
        theorems: the spec theorem ids it checks (empty for robustness checks no paper
            states).
        requires: what the target must offer for the property to apply, decided before any
            case runs (:mod:`hcspec.conformance.machinery.requirements`).
        tolerance: the tolerance rule its comparisons apply, a :class:`rules.Rule` object
            (:mod:`hcspec.conformance.rules`; the harness applies it in
            ``ctx.record.expect``); anything else, a rule's name included, is a
            :class:`DeclarationError`.
        secondary: further rules some of its comparisons apply (``expect(..., rule=...)``).
        cases: the bounds of its standard examples and strategy, and its domain (the
            shrinker stays inside it; :meth:`admits`).
        custom_examples, custom_strategy: replace the standard examples / strategy.
        prerequisites: ids whose failure blocks this one (declared earlier).
        explore: False when the explicit examples are all it runs (no hypothesis).
        shrink: False to report a failing explicit example as is instead of shrinking it
            (the shape family, whose messages tell the axes apart by the canonical case's
            distinct sizes, and ``compile.fullgraph``, whose every re-run compiles anew).
        setup: the family's setup hook (:data:`FamilySetup`), run once per run before any
            property; None: the property needs none.
    """

    id: str
    statement: str
    check: CheckFn
    theorems: tuple[str, ...] = ()
    requires: tuple[Requirement, ...] = ()
    tolerance: rules.Rule = rules.EXACT
    secondary: tuple[rules.Rule, ...] = ()
    cases: Cases = field(default_factory=Cases)
    custom_examples: ExamplesFn | None = None
    custom_strategy: StrategyFn | None = None
    prerequisites: tuple[str, ...] = ()
    explore: bool = True
    shrink: bool = True
    setup: FamilySetup | None = None

    def __post_init__(self) -> None:
        for rule in self.rules:
            if not isinstance(rule, rules.Rule):
                raise DeclarationError(
                    f"property {self.id}: tolerance {rule!r} is not a rule object; declare "
                    "one of hcspec.conformance.rules (e.g. tolerance=rules.LAW)")

    @property
    def rules(self) -> tuple[rules.Rule, ...]:
        """The declared rules, the primary (:attr:`tolerance`) first."""
        return (self.tolerance, *self.secondary)

    @property
    def family(self) -> str:
        """The id's prefix."""
        return self.id.split(".", 1)[0]

    @property
    def theorem(self) -> str | None:
        """The first cited theorem id (what the report shows), or None."""
        return self.theorems[0] if self.theorems else None

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds it applies to (every kind unless a kind requirement narrows them)."""
        allowed = frozenset(KINDS)
        for r in self.requires:
            if r.kinds is not None:
                allowed &= r.kinds
        return allowed

    @property
    def needs(self) -> frozenset[str]:
        """The optional capabilities it requires."""
        return frozenset(r.capability for r in self.requires if r.capability is not None)

    def unmet(self, subject: Subject) -> str | None:
        """Why the property cannot run on ``subject`` (the first unmet requirement), or None."""
        return first_unmet(self.requires, subject)

    def admits(self, case: Case) -> str | None:
        """Why ``case`` lies outside the property's declared domain (:meth:`Cases.admits`:
        the bounds of ``cases``, which a property with custom examples or strategy declares
        too), or None."""
        return self.cases.admits(case)

    def examples(self, ctx: Context) -> Sequence[Case]:
        """The explicit examples, replayed before hypothesis explores."""
        if self.custom_examples is not None:
            return self.custom_examples(ctx)
        return self.cases.examples(ctx)

    def strategy(self, ctx: Context) -> st.SearchStrategy[Case]:
        """The hypothesis strategy of further cases."""
        if self.custom_strategy is not None:
            return self.custom_strategy(ctx)
        return self.cases.strategy(ctx)

    def run(self, ctx: Context, case: Case) -> None:
        """``check(ctx, case)`` with torch's global RNG seeded from ``case.seed``
        (:func:`hcspec.conformance.seeding.seeded_global_rng`), as the runner and the shrinker
        run every case, with the property's rules declared to ``ctx.record`` (the rules its
        comparisons may apply).

        Raises:
            whatever ``check`` raises.
        """
        ctx.record.declared = self.rules
        with seeded_global_rng(case.seed, ctx.device):
            self.check(ctx, case)


REGISTRY: list[Property] = []
"""Every declared property, in declaration order (the family modules are imported in run
order by :mod:`hcspec.conformance.families`)."""


def register(prop: Property, module: str | None = None) -> Property:
    """Add ``prop`` to :data:`REGISTRY`.

    Raises:
        DeclarationError: a duplicate id; an id not of the form ``family.name``; declared in a
            family module other than ``<family>`` (``module``: the declaring module's name);
            a prerequisite not declared before it; an empty requirement reason.
    """
    parts = prop.id.split(".")
    if len(parts) != 2 or not all(parts):
        raise DeclarationError(f"property id {prop.id!r}: expected 'family.name'")
    if module is not None and module.startswith(PACKAGE + "."):
        family_module = module.removeprefix(PACKAGE + ".")
        if family_module != prop.family:
            raise DeclarationError(
                f"property {prop.id} is declared in {module}; its family module is "
                f"{PACKAGE}.{prop.family}")
    known = {p.id for p in REGISTRY}
    if prop.id in known:
        raise DeclarationError(f"duplicate property id {prop.id}")
    for pre in prop.prerequisites:
        if pre not in known:
            raise DeclarationError(f"property {prop.id}: prerequisite {pre} must be declared "
                                   "earlier")
    for requirement in prop.requires:
        if not requirement.reason.strip() or not requirement.condition.strip():
            raise DeclarationError(f"property {prop.id}: a requirement without a condition "
                                   "or reason")
    REGISTRY.append(prop)
    return prop


def declare(
    id: str, *, statement: str, theorems: Sequence[str] = (),
    requires: Sequence[Requirement] = (), tolerance: rules.Rule = rules.EXACT,
    secondary: Sequence[rules.Rule] = (), cases: Cases | None = None,
    examples: ExamplesFn | None = None, strategy: StrategyFn | None = None,
    prerequisites: Sequence[str] = (), explore: bool = True, shrink: bool = True,
    setup: FamilySetup | None = None,
) -> Callable[[CheckFn], CheckFn]:
    """Decorator: register the decorated ``check(ctx, case)`` as the property ``id`` (the
    fields of :class:`Property`; ``examples``/``strategy`` replace the standard ones) and
    return the check unchanged. A property that reads per-stream weights
    (:func:`hcspec.conformance.machinery.requirements.reads_per_stream`) also requires
    :data:`~hcspec.conformance.machinery.requirements.PER_STREAM_READ`, first.

    Raises:
        DeclarationError: as :func:`register`; a ``tolerance`` or ``secondary`` entry that is
            not a :class:`hcspec.conformance.rules.Rule`.
    """
    needs = tuple(requires)
    if reads_per_stream(needs) and PER_STREAM_READ not in needs:
        needs = (PER_STREAM_READ, *needs)

    def decorate(check: CheckFn) -> CheckFn:
        register(Property(
            id=id, statement=statement, check=check, theorems=tuple(theorems),
            requires=needs, tolerance=tolerance,
            secondary=tuple(secondary), cases=cases or Cases(),
            custom_examples=examples, custom_strategy=strategy,
            prerequisites=tuple(prerequisites), explore=explore, shrink=shrink, setup=setup,
        ), check.__module__)
        return check

    return decorate
