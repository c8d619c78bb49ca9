"""The registry meta-test: every declared property follows the catalogue's rules, and each
rule is shown to fail on a declaration that breaks it."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from hcspec.conformance import rules
from hcspec.conformance.families import BY_ID, CATALOGUE, FAMILIES, select
from hcspec.conformance.machinery.declaration import (
    PACKAGE,
    DeclarationError,
    Property,
    declare,
    register,
)
from hcspec.conformance.machinery.requirements import (
    SHARDING_CAPABILITY,
    Requirement,
    capability,
    kinds,
)
from hcspec.conformance.protocol import CAPABILITIES, KINDS
from hcspec.spec import registry
from tests.mutants import _parallel
from tests.mutants._coverage import ALSO_FAILED_BY, UNCOVERED
from tools import mutation

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")

def family_violations(props: Iterable[Property]) -> list[str]:
    """Ids whose prefix is not a family, or whose check lives outside the family's module."""
    return [p.id for p in props
            if p.family not in FAMILIES or p.check.__module__ not in (
                f"{PACKAGE}.{p.family}", f"hcspec.conformance.families.{p.family}")]


def theorem_violations(props: Iterable[Property], known: set[str]) -> list[str]:
    """Cited theorem ids the spec does not register (and that are not pending in the spec)."""
    return sorted({t for p in props for t in p.theorems} - known)


def requirement_violations(props: Iterable[Property]) -> list[str]:
    """Ids with a requirement whose condition or reason is empty."""
    return [p.id for p in props for r in p.requires
            if not r.condition.strip() or not r.reason.strip()]


def tolerance_violations(props: Iterable[Property]) -> list[str]:
    """Ids whose tolerance rules are not all objects of :data:`hcspec.conformance.rules.ALL`
    (a rule object made elsewhere; a name instead of an object is refused when declared)."""
    return [p.id for p in props if any(r not in rules.ALL for r in p.rules)]


def documentation_violations(props: Iterable[Property], doc: str) -> list[str]:
    """Ids docs/conformance.md does not mention (as ``id``)."""
    return [p.id for p in props if f"`{p.id}`" not in doc]


def mutant_violations(props: Sequence[Property], caught: set[str],
                      uncovered: dict[str, str]) -> list[str]:
    """Ids with neither a mutant (``CAUGHT_BY``) nor a recorded reason, with both, with an
    empty reason, and recorded ids that are not properties."""
    ids = {p.id for p in props}
    return sorted(
        [i for i in ids if (i in caught) == (i in uncovered)]
        + [i for i, why in uncovered.items() if not why.strip() or i not in ids])


def _caught() -> set[str]:
    known = {m.name for m in mutation.discover()}
    assert set(ALSO_FAILED_BY.values()) <= known, "ALSO_FAILED_BY names an unknown mutant"
    distributed = {pid for m in pkgutil.iter_modules(_parallel.__path__)
                   if not m.name.startswith("_")
                   for pid in importlib.import_module(f"{_parallel.__name__}.{m.name}").CAUGHT_BY}
    return ({pid for m in mutation.discover() for pid in m.caught_by} | set(ALSO_FAILED_BY)
            | distributed)  # the distributed mutants need ranks: test_parallel_mutants.py


def test_prefix_is_the_family_and_its_module() -> None:
    assert family_violations(CATALOGUE) == []
    assert {p.family for p in CATALOGUE} == set(FAMILIES)


def test_cited_theorems_exist_in_the_spec() -> None:
    known = {t.id for t in registry.all_theorems()}
    assert len(known) >= 20, "the spec registry is (nearly) empty: the check would be vacuous"
    assert theorem_violations(CATALOGUE, known) == []


def test_requirements_have_conditions_and_reasons() -> None:
    assert requirement_violations(CATALOGUE) == []
    for p in CATALOGUE:
        assert p.kinds <= set(KINDS) and p.kinds, p.id
        assert p.needs <= {*CAPABILITIES, SHARDING_CAPABILITY}, p.id


def test_tolerance_rules_are_objects_of_the_rules_module() -> None:
    assert tolerance_violations(CATALOGUE) == []


def test_every_property_is_documented() -> None:
    assert documentation_violations(CATALOGUE, DOC) == []


def test_every_property_has_a_mutant_or_a_recorded_reason() -> None:
    assert mutant_violations(CATALOGUE, _caught(), UNCOVERED) == []


def test_entries_are_well_formed() -> None:
    for p in CATALOGUE:
        assert p.id.count(".") == 1 and p.statement and len(p.statement) < 100, p.id
        assert all(pre in BY_ID for pre in p.prerequisites), p.id


# --- each rule fails on a declaration that breaks it -------------------------------------------
def _check(ctx: object, case: object) -> None:
    """A check that is never run."""


def _broken(**changes: object) -> Property:
    fields: dict[str, object] = {"id": "law.synthetic", "statement": "s", "check": _check}
    fields.update(changes)
    return Property(**fields)  # type: ignore[arg-type]


def test_family_rule_fails_outside_the_family_module() -> None:
    assert family_violations([_broken()]) == ["law.synthetic"]  # _check lives in this module
    assert family_violations([_broken(id="reductions.x")]) == ["reductions.x"]


def test_theorem_rule_fails_on_an_unknown_theorem() -> None:
    assert theorem_violations([_broken(theorems=("ds.no_such_theorem",))], {"ds.x"}) == [
        "ds.no_such_theorem"]


def test_requirement_rule_fails_on_an_empty_reason() -> None:
    silent = Requirement("kind mhc", " ", lambda s: True)
    assert requirement_violations([_broken(requires=(silent,))]) == ["law.synthetic"]


def test_tolerance_rule_fails_on_an_unnamed_rule() -> None:
    with pytest.raises(DeclarationError, match="'roughly' is not a rule object"):
        _broken(tolerance="roughly")
    made_elsewhere = rules.Rule("roughly", "", "", (), lambda p, g: rules.Allowance(0, 1))
    assert tolerance_violations([_broken(secondary=(made_elsewhere,))]) == ["law.synthetic"]


def test_documentation_rule_fails_on_an_undocumented_id() -> None:
    assert documentation_violations([_broken()], DOC) == ["law.synthetic"]


def test_mutant_rule_fails_without_a_mutant_or_with_both() -> None:
    prop = [_broken()]
    assert mutant_violations(prop, set(), {}) == ["law.synthetic"]
    assert mutant_violations(prop, {"law.synthetic"}, {"law.synthetic": "why"}) == [
        "law.synthetic"]
    assert mutant_violations(prop, set(), {"law.synthetic": ""}) == ["law.synthetic"]
    assert mutant_violations(prop, {"law.synthetic"}, {"law.gone": "why"}) == ["law.gone"]


def test_registration_refuses_a_broken_declaration() -> None:
    with pytest.raises(DeclarationError, match="family module"):
        register(_broken(), f"{PACKAGE}.shape")
    with pytest.raises(DeclarationError, match="duplicate"):
        register(_broken(id="law.reported"))
    with pytest.raises(DeclarationError, match="prerequisite"):
        register(_broken(id="law.synthetic_new", prerequisites=("law.no_such",)))
    with pytest.raises(DeclarationError, match=r"family\.name"):
        declare("lawless", statement="s")(_check)  # type: ignore[arg-type]
    with pytest.raises(DeclarationError, match="reason"):
        register(_broken(id="law.synthetic_new", requires=(Requirement("c", "", bool),)))
    with pytest.raises(ValueError, match="kinds"):
        kinds("residual")
    with pytest.raises(ValueError, match="capability"):
        capability("teleport")
    assert "law.synthetic_new" not in {p.id for p in CATALOGUE}


def test_selection_adds_prerequisites_and_accepts_families_and_globs() -> None:
    ids = [p.id for p in select(["gradients.closed_form"])]
    assert ids[-1] == "gradients.closed_form"
    assert {"shape.output", "shape.branch_once", "law.reported"} <= set(ids)
    assert {p.id for p in select(["law"])} >= {"law.probed", "law.reported"}
    assert {p.id for p in select(["constraints.h_*"])} >= {"constraints.h_pre_range"}
    assert "law.probed" not in {p.id for p in select(skip=["law"])}
    family = {p.id for p in CATALOGUE if p.family == "reduction"}
    for pattern in ("reduction", "reduction.*"):
        assert {p.id for p in select([pattern]) if p.family == "reduction"} == family
    assert "reduction.static_init" in family


def test_list_shows_every_requirement_and_tolerance() -> None:
    from rich.console import Console

    from hcspec.conformance.listing import live_rows, print_catalogue

    console = Console(record=True, width=1000)  # wide enough that no requirement cell wraps
    print_catalogue(console, live_rows())
    text = console.export_text()
    for p in CATALOGUE:
        assert p.id in text and p.tolerance.name in text
        for r in p.requires:
            assert r.condition in text, (p.id, r.condition)
    assert "state_domain any" in text and "float64" in text and "a CUDA device" in text
