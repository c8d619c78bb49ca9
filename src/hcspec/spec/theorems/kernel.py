"""The proof kernel checks itself: every checking predicate the proofs rely on is run on planted
false inputs of each expression class it accepts, and on true ones, inside ``hc-spec prove``.

A kernel that answered "yes" by mistake would let every theorem through; this theorem fails
instead. Theorems: ``kernel.soundness``.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from hcspec.spec import checks, registry
from hcspec.spec import doubly_stochastic as ds
from hcspec.spec import sinkhorn_index as si
from hcspec.spec.registry import ProofFailure, ProofResult, Step, Theorem, theorem
from hcspec.spec.steps import (
    Given,
    assume,
    cite,
    hypothesis,
    induction,
    ledger,
    lemma_rewrite,
    prose,
)
from hcspec.spec.sums import split_sums, swap_sum
from hcspec.spec.theorems import lemmas

_n = sympy.Symbol("n", integer=True, positive=True)
_i, _j, _k = sympy.symbols("i j k", integer=True, nonnegative=True)
_x = sympy.IndexedBase("x", real=True)
_a, _b = sympy.symbols("a b", real=True)
_A, _B = sympy.MatrixSymbol("A", _n, _n), sympy.MatrixSymbol("B", _n, _n)
_C = sympy.MatrixSymbol("C", _n, 1)
_ONE = sympy.MatrixSymbol(r"\mathbf{1}", lemmas.N, 1)
_E = sympy.MatrixSymbol("e_j", lemmas.N, 1)
_PAIR = _a + _b


def _verdict(check: Callable[[], object]) -> str | None:
    """None when ``check`` accepts (returns anything but False without raising), else why it
    rejected: "returned False" or the type and message of the exception raised."""
    try:
        return None if check() is not False else "returned False"
    except Exception as error:  # a rejection; which branch rejected is read from the message
        return f"{type(error).__name__}: {error}"


def _accepts(check: Callable[[], object]) -> bool:
    """True when ``check`` returns a truthy value without raising (the kernel said yes)."""
    return _verdict(check) is None


def _chain(*sides: object, using: tuple[Given, ...] = ()) -> Callable[[], object]:
    return lambda: checks.chain(*sides, using=using)


def _planted(generality: str, *steps: Callable[[], Step]) -> Callable[[], object]:
    """A throwaway theorem (never registered) whose proof displays ``steps``; the check returns
    whether it proves."""
    def run() -> object:
        theorem = Theorem("kernel.planted", "s", (), "c", "arXiv",
                          lambda: [step() for step in steps], generality)
        result = theorem.prove()
        if not result.ok:
            raise ProofFailure(result.error or "failed")
        return True
    return run


def _label_of(proof: Callable[[], list[Step]], generality: str | None = None) -> str:
    """The label a throwaway theorem (never registered) with this ``proof`` and claimed
    ``generality`` earns.

    Raises:
        ProofFailure: when it does not prove (the registry's message).
    """
    result = Theorem("kernel.planted", "s", (), "c", "arXiv", proof, generality).prove()
    if not result.ok:
        raise ProofFailure(result.error or "failed")
    return result.generality


def _every_n() -> Step:
    return checks.require_equal("(n + 1)² expanded", (_n + 1) ** 2, _n**2 + 2 * _n + 1)


def _one_value() -> Step:
    return checks.require_equal("(a + 1)² expanded", (_a + 1) ** 2, _a**2 + 2 * _a + 1)


def _words_of_induction() -> object:
    """Whether a proof at one value whose every label says "by induction", "base case",
    "induction step", "every n" earns more than "instance" (the kernel must say no: the words
    are not the proof)."""
    return _label_of(lambda: [
        ("by induction, base case: every n", _one_value()[1]),
        ("induction step, for every n and every L", checks.require_equal(
            "(a − 1)² expanded", (_a - 1) ** 2, _a**2 - 2 * _a + 1)[1])]) != "instance"


def _induction_without_words() -> object:
    """Whether a proof that records a checked induction, with no word of induction in its labels,
    earns "induction"."""
    return _label_of(lambda: induction(("first", _one_value()[1]),
                                       ("next", _every_n()[1]))) == "induction"


def _induction_base_hidden() -> object:
    """A proof claiming "induction" that records one but displays only its step."""
    def proof() -> list[Step]:
        return induction(_one_value(), _every_n())[1:]
    return _label_of(proof, "induction")


def _unchecked_display() -> object:
    return _planted("instance", lambda: ("a display no check produced",
                                         sympy.Eq(_a, _b, evaluate=False)))()


def _unused_assumption() -> object:
    """A throwaway theorem declaring "K 1 = 1" whose proof never uses it."""
    theorem = Theorem("kernel.planted", "s", ("K 1 = 1.",), "c", "arXiv", lambda: [
        checks.require_equal("(a + 1)² expanded", (_a + 1) ** 2, _a**2 + 2 * _a + 1)],
        "instance")
    result = theorem.prove()
    if not result.ok:
        raise ProofFailure(result.error or "failed")
    return True


def _undeclared_assumption() -> object:
    with ledger(("x ∈ R^n real.",)):
        return assume("H 1 = 1", replace={_a: 1})


def _undeclared_hypothesis() -> object:
    """A symbol made by :func:`hypothesis` in a theorem that does not declare it: positive only
    when declared."""
    with ledger(("x ∈ R^n real.",)):
        return bool(hypothesis("c > 0", "c", weaker={"real": True}, positive=True).is_positive)


def _failed_lemma() -> object:
    """Cite a fact from a lemma whose proof failed (a planted failed result, removed after)."""
    planted = ProofResult("lemma.planted_failure", False, ((
        "x", sympy.Eq(_a, _b, evaluate=False)),), 0.0, "planted failure")
    registry._PROVEN[planted.theorem_id] = planted
    try:
        return cite("planted", planted.theorem_id, sympy.Eq(_a, _b, evaluate=False))
    finally:
        del registry._PROVEN[planted.theorem_id]


def _raising_proof() -> object:
    def proof() -> list[Step]:
        raise RuntimeError("planted")
    return Theorem("kernel.planted", "s", (), "c", "arXiv", proof, "instance").prove().ok


DS_ALMOST = sympy.Matrix([[sympy.Rational(1, 2) + sympy.Rational(1, 10**20), sympy.Rational(1, 2)],
                          [sympy.Rational(1, 2), sympy.Rational(1, 2)]])
"""Row and column sums 1 + 10⁻²⁰ and 1: passes a float gate, fails the exact sum check."""

_ONE_COL = {_ONE: lambda r, c: 1}
_UNIT_J = {_ONE: lambda r, c: 1, _E: lambda r, c: sympy.KroneckerDelta(r, lemmas.J)}
_BOUND = sympy.Symbol("_bound1", integer=True)
_y = sympy.IndexedBase("y", real=True)
_u, _v = sympy.Symbol("u"), sympy.Symbol("v")
_TRIG = sympy.sin(_a) ** 2 + sympy.cos(_a) ** 2 - 1
_RATIONAL = (_a ** 2 - 1) / (_a - 1) - _a - 1

FALSE_INPUTS: tuple[tuple[str, str, Callable[[], object], str], ...] = (
    # (predicate, class, check, a fragment of the rejecting branch's message; "" any rejection)
    ("numeric_gate", "a residual that is not 0 at a random point",
     lambda: checks.numeric_gate("planted", _a - _b), "numeric gate failed"),
    ("require_zero", "a wrong scalar identity fails the numeric gate first",
     lambda: checks.require_zero("planted", _a - _b), "numeric gate failed"),
    ("require_zero", "a wrong symbolic-size identity fails the gate at explicit sizes first",
     lambda: checks.require_zero("planted", _A * _B - _B * _A), "numeric gate failed"),
    ("require_zero", "10⁻²⁰ a: below the gate's tolerance, not exactly 0",
     lambda: checks.require_zero("planted", _a / 10**20), "does not simplify to zero"),
    ("exact_zero", "a non-zero scalar", lambda: checks.exact_zero(_a - _b), ""),
    ("exact_zero", "an explicit matrix with one zero entry and one non-zero",
     lambda: checks.exact_zero(sympy.Matrix([[0, _a - _a ** 2]])), ""),
    ("exact_zero", "an entry zero only after cancel next to a non-zero one",
     lambda: checks.exact_zero(sympy.Matrix([[_RATIONAL, _a - _b]])), ""),
    ("exact_zero", "an entry zero only after simplify next to a non-zero one",
     lambda: checks.exact_zero(sympy.Matrix([[_TRIG, _a - _b]])), ""),
    ("exact_zero", "a non-zero symbolic-size product (A B − B A)",
     lambda: checks.exact_zero(_A * _B - _B * _A), ""),
    ("exact_zero", "a non-zero symbolic-size transpose (A − Aᵀ)",
     lambda: checks.exact_zero(_A - _A.T), ""),
    ("exact_zero", "a symbolic-size scalar multiple ((n − 1) A − n A)",
     lambda: checks.exact_zero((_n - 1) * _A - _n * _A), ""),
    ("exact_zero", "several product groups: one cancels (A), two do not (A B, B A)",
     lambda: checks.exact_zero(_RATIONAL * _A + _A * _B - _B * _A), ""),
    ("_matrix_terms_cancel", "a term with no matrix factor",
     lambda: checks._matrix_terms_cancel(sympy.Integer(3)), ""),
    ("exact_zero", "a sum with a symbolic limit, one term short",
     lambda: checks.exact_zero(sympy.Sum(_x[_j], (_j, 0, _n - 1))
                               - sympy.Sum(_x[_j], (_j, 0, _n - 2))), ""),
    ("exact_zero", "a piecewise expression that differs on one branch",
     lambda: checks.exact_zero(sympy.Piecewise((_a, _a > 0), (0, True)) - _a), ""),
    ("chain", "a link between different finite sums",
     _chain(sympy.Sum(_x[_j], (_j, 0, _n - 1)), sympy.Sum(_x[_j], (_j, 1, _n - 1))),
     "does not hold"),
    ("chain", "a swap of a double sum with dependent limits",
     _chain(sympy.Sum(_x[_j], (_j, 0, _i), (_i, 0, _n - 1)),
            sympy.Sum(_x[_j], (_i, 0, _n - 1), (_j, 0, _i))), "does not hold"),
    ("chain", "a link that needs a fact not given",
     _chain(_ONE.T * _A * _ONE, _n * sympy.Identity(1)), "does not hold"),
    ("chain", "a link the given fact does not reach",
     _chain(_ONE.T * _A, _ONE.T, using=(Given("A 1 = 1", factors=(_A, _ONE), rhs=_ONE),)),
     "does not hold"),
    ("chain", "a limit whose value is not the one shown",
     _chain(sympy.Limit(1 + 1 / _a, _a, sympy.oo), 0), "does not hold"),
    ("chain", "a piecewise sum whose range condition is not given",
     _chain(sympy.Sum(sympy.KroneckerDelta(_i, _j), (_j, 0, _n - 1)), 1), "does not hold"),
    ("_push_in", "a factor moved into a sum over the index it contains (capture)",
     lambda: checks._push_in(sympy.Sum(_x[_i] * sympy.Sum(_y[_i], (_i, 0, _n - 1)),
                                       (_j, 0, _n - 1)))
     == sympy.Sum(sympy.Sum(_x[_i] * _y[_i], (_i, 0, _n - 1)), (_j, 0, _n - 1)), ""),
    ("_rename_bound", "a bound index renamed onto a free symbol of the same name (capture)",
     lambda: checks._rename_bound(sympy.Sum(_x[_j] * _BOUND, (_j, 0, _n - 1)))
     == checks._rename_bound(sympy.Sum(_x[_k] * _k, (_k, 0, _n - 1))), ""),
    ("chain", "block matrices with one block different",
     _chain(sympy.BlockMatrix([[_A, _B]]), sympy.BlockMatrix([[_A, _A]])), "does not hold"),
    ("chain", "block matrices with the same blocks in another block shape",
     _chain(sympy.BlockMatrix([[_A, _B]]), sympy.BlockMatrix([[_A], [_B]])), "does not hold"),
    ("chain", "notation after the first side", _chain(_a, r"\text{b}"), "only the first side"),
    ("chain", "notation and a single value: nothing checked",
     _chain(r"\text{anything}", _a), "at least one checked link"),
    ("chain", "a chain that displays A = A", _chain(_a + _b, _b + _a), "two different sides"),
    ("require_link", "a link that does not hold",
     lambda: checks.require_link("planted", _a, _b), "does not hold"),
    ("_cheap_zero", "a non-zero symbol", lambda: checks._cheap_zero(_a), ""),
    ("swap_sum", "a double sum with dependent limits",
     lambda: swap_sum(sympy.Sum(_x[_j], (_j, 0, _i), (_i, 0, _n - 1))), "depend on each other"),
    ("swap_sum", "a single sum", lambda: swap_sum(sympy.Sum(_x[_j], (_j, 0, _n - 1))),
     "expected a double sum"),
    ("split_sums", "linearity that would drop a term",
     lambda: sympy.expand(split_sums(sympy.Sum(_x[_j] + 1, (_j, 0, _n - 1)))
                          - sympy.Sum(_x[_j], (_j, 0, _n - 1))) == 0, ""),
    ("decide", "= between different expressions",
     lambda: checks.decide(sympy.Eq(_a, _b, evaluate=False)), ""),
    ("decide", "≠ between equal numbers",
     lambda: checks.decide(sympy.Ne(sympy.Integer(2), sympy.Integer(2), evaluate=False)), ""),
    ("decide", "≠ between equal polynomials", lambda: checks.decide(
        sympy.Ne(_a * (_a + 1), _a ** 2 + _a, evaluate=False)), ""),
    ("decide", "≠ between polynomials equal through an irrational coefficient",
     lambda: checks.decide(sympy.Ne(_a * (sympy.sin(1) ** 2 + sympy.cos(1) ** 2), _a,
                                    evaluate=False)), ""),
    ("decide", "≠ between equal non-polynomials (the numeric witness)", lambda: checks.decide(
        sympy.Ne(sympy.sin(_a) ** 2 + sympy.cos(_a) ** 2, 1, evaluate=False)), ""),
    ("decide", "≥ 0 for an expression of unknown sign",
     lambda: checks.decide(sympy.GreaterThan(_a - _b, 0, evaluate=False)), ""),
    ("decide", "> for a false numeric relation",
     lambda: checks.decide(sympy.StrictGreaterThan(sympy.Float(1e-7), sympy.Float(1e-6),
                                                   evaluate=False)), ""),
    ("decide", "an undecidable And", lambda: checks.decide(sympy.And(_a > 0, _b > 0)), ""),
    ("decide", "an undecidable Or", lambda: checks.decide(sympy.Or(_a > 0, _b > 0)), ""),
    ("decide", "an undecidable Equivalent",
     lambda: checks.decide(sympy.Equivalent(_a > 0, _b > 0)), ""),
    ("decide", "a number, not a relation", lambda: checks.decide(sympy.Integer(1)), ""),
    ("require_true", "a computed condition that is not True",
     lambda: checks.require_true("planted", _a > 0), "expected True"),
    ("require_true", "a displayed relation that does not hold",
     lambda: checks.require_true("planted", _a - _a == 0, sympy.GreaterThan(_a, 0,
                                                                           evaluate=False)),
     "is not shown to hold"),
    ("require_relation", "a relation decided through notation naming its other side",
     lambda: checks.require_relation("planted", sympy.Eq(_u, _PAIR, evaluate=False),
                                     where={_u: _PAIR}), "true by construction"),
    ("require_equal", "both sides one object (true by construction)",
     lambda: checks.require_equal("planted", _PAIR, _PAIR), "true by construction"),
    ("require_equal", "a compact display whose right side is not the proven one",
     lambda: checks.require_equal("planted", sympy.Matrix([_a]), sympy.Matrix([_a + 0 * _b]),
                                  show=(_u, _v), where={_u: sympy.Matrix([_a]),
                                                        _v: sympy.Matrix([_b])}),
     "displayed form is not"),
    ("require_equal", "a compact display whose left side is not the proven one",
     lambda: checks.require_equal("planted", sympy.Matrix([_a]), sympy.Matrix([_a + 0 * _b]),
                                  show=(_u, _v), where={_u: sympy.Matrix([_b]),
                                                        _v: sympy.Matrix([_a])}),
     "displayed form is not"),
    ("require_equal", "a compact display of another shape",
     lambda: checks.require_equal("planted", sympy.Matrix([_a]), sympy.Matrix([_a + 0 * _b]),
                                  show=(_u, _v), where={_u: sympy.Matrix([[_a, _a]]),
                                                        _v: sympy.Matrix([_a])}),
     "displayed form has shape"),
    ("require_equal", "sides of different shapes",
     lambda: checks.require_equal("planted", _A, _C), "shapes differ"),
    ("require_nonnegative", "an entry of unknown sign",
     lambda: checks.require_nonnegative("planted", [_a]), "not provably nonnegative"),
    ("require_positive", "index-form positivity at a value of unknown sign",
     lambda: si.require_positive("planted", _a), "not provably positive"),
    ("require_reduces", "an index-form value that is not the one expected",
     lambda: si.require_reduces("planted", _a, _b), "expected"),
    ("require_doubly_stochastic", "unit sums only up to 10⁻²⁰",
     lambda: ds.require_doubly_stochastic("planted", DS_ALMOST), "sums are not 1"),
    ("require_doubly_stochastic", "an entry of unknown sign (the gate draws a from [0, 1])",
     lambda: ds.require_doubly_stochastic("planted", sympy.Matrix([[_a, 1 - _a], [1 - _a, _a]])),
     "not provably >= 0"),
    ("require_doubly_stochastic", "row sums 2 and 0: the numeric gate first",
     lambda: ds.require_doubly_stochastic("planted", sympy.Matrix([[1, 1], [0, 0]])),
     "numeric gate failed"),
    ("require_doubly_stochastic", "a matrix that is not square",
     lambda: ds.require_doubly_stochastic("planted", sympy.ones(2, 3) / 3), "square"),
    ("registry", "a proof that displays an unchecked step", _unchecked_display,
     "unchecked step"),
    ("registry", "a proof that raises", _raising_proof, ""),
    ("registry", "'all sizes' with no step that holds for every size",
     _planted("all sizes", lambda: checks.require_equal("n = 2: 1 + 1 = 2", sympy.Integer(1) + 1,
                                                        sympy.Integer(2))), "labelled"),
    ("registry", "'induction' with no base case or induction step",
     _planted("induction", lambda: checks.require_equal("every n: (n + 1)² expanded",
                                                        (_n + 1) ** 2, _n**2 + 2 * _n + 1)),
     "labelled 'induction'"),
    ("registry", "'induction' recorded, but its base case is not displayed",
     _induction_base_hidden, "labelled 'induction'"),
    ("registry", "a label read from words: every label says 'by induction', the proof is at one "
     "value", _words_of_induction, "returned False"),
    ("induction", "a base case no check produced",
     lambda: _label_of(lambda: induction(("base", sympy.Eq(_a, _b, evaluate=False)),
                                         _every_n())), "not a checked step"),
    ("induction", "an induction step checked at one value only",
     lambda: _label_of(lambda: induction(_every_n(), _one_value())), "no symbolic size"),
    ("induction", "one step as base case and step",
     lambda: _label_of(lambda: induction(_every_n(), _every_n())), "are one step"),
    ("registry", "a declared assumption no step uses", _unused_assumption,
     "no step uses"),
    ("assume", "an assumption the theorem does not declare", _undeclared_assumption,
     "not a declared assumption"),
    ("hypothesis", "a hypothesis's sympy assumption in a theorem that does not declare it",
     _undeclared_hypothesis, "returned False"),
    ("cite", "a fact the lemma does not display",
     lambda: cite("planted", "lemma.unit_vectors", sympy.Eq(_a, _b, evaluate=False)),
     "does not display"),
    ("cite", "a fact of a lemma whose proof failed", _failed_lemma, "does not prove"),
    ("lemma_rewrite", "a rewrite the cited fact does not state (1ᵀ1 = n cited for 1ᵀ e_j = 1)",
     lambda: lemma_rewrite("lemma.unit_vectors", lemmas.ONES, (_ONE.T, _E), sympy.Identity(1),
                           entries=_UNIT_J), "not an instance"),
    ("lemma_rewrite", "a fact the lemma does not display",
     lambda: lemma_rewrite("lemma.unit_vectors", sympy.Eq(sympy.Sum(1, (lemmas.R, 1, lemmas.N)),
                                                          lemmas.N + 1, evaluate=False),
                           (_ONE.T, _ONE), (lemmas.N + 1) * sympy.Identity(1),
                           entries=_ONE_COL), "does not display"),
)
"""Planted false inputs, one (at least) for every branch of the kernel that can reject:
``(predicate, class, check, fragment)``; the kernel must reject every one (return False or
raise), and by the branch whose message contains ``fragment`` (so a weakened branch is not
hidden by a later one)."""

TRUE_INPUTS: tuple[tuple[str, str, Callable[[], object]], ...] = (
    ("registry", "a checked induction with no word of induction in its labels earns 'induction'",
     _induction_without_words),
    ("exact_zero", "a zero symbolic-size expression", lambda: checks.exact_zero(
        (_A + _B).T - _A.T - _B.T)),
    ("chain", "a sum with its index renamed", _chain(
        sympy.Sum(_x[_j], (_j, 0, _n - 1)), sympy.Sum(_x[_k], (_k, 0, _n - 1)))),
    ("chain", "linearity of a finite sum",
     _chain(sympy.Sum(_x[_j] + 1, (_j, 0, _n - 1)), sympy.Sum(_x[_j], (_j, 0, _n - 1)) + _n)),
    ("chain", "Fubini for constant limits",
     _chain(sympy.Sum(_x[_i] * _x[_j], (_j, 0, _n - 1), (_i, 0, _n - 1)),
            sympy.Sum(_x[_i] * _x[_j], (_i, 0, _n - 1), (_j, 0, _n - 1)))),
    ("chain", "a given fact used", _chain(_ONE.T * _A.T, _ONE.T, using=(
        Given("A 1 = 1", factors=(_A, _ONE), rhs=_ONE),))),
    ("decide", "≥ 0 for a square", lambda: checks.decide(sympy.GreaterThan(
        (_a - _b) ** 2, 0, evaluate=False))),
    ("require_doubly_stochastic", "a permutation matrix",
     lambda: ds.require_doubly_stochastic("planted", sympy.Matrix([[0, 1], [1, 0]]))),
)
"""True inputs of the same classes: the kernel must accept them (it is not a kernel that says no
to everything)."""


def verdicts() -> dict[str, list[str]]:
    """``{"accepted false": [...], "rejected elsewhere": [...], "rejected true": [...]}``: the
    planted cases the kernel got wrong (all empty for a sound, non-trivial kernel whose every
    rejecting branch answers for its own planted input)."""
    found: dict[str, list[str]] = {"accepted false": [], "rejected elsewhere": [],
                                   "rejected true": []}
    for predicate, case, check, fragment in FALSE_INPUTS:
        why = _verdict(check)
        if why is None:
            found["accepted false"].append(f"{predicate}: {case}")
        elif fragment not in why:
            found["rejected elsewhere"].append(f"{predicate}: {case}: {why[:120]}")
    found["rejected true"] = [f"{p}: {c}" for p, c, check in TRUE_INPUTS if not _accepts(check)]
    return found


@theorem(
    "kernel.soundness",
    "Every branch of the proof kernel that can reject rejects a planted false input that only "
    "it rejects (its message names it): the numeric gates, every stage of the exact zero test, "
    "the rewrites' capture guards, block matrices, chains and notation, decide's relations and "
    "numeric witness, compact displays on both sides, steps true by construction, index-form "
    "positivity, doubly stochastic checks, the labels, unused and undeclared assumptions, "
    "citations and lemma rewrites that are not the fact used; it accepts true inputs.",
    assumptions=(),
    setting=(
        "The planted inputs of spec/theorems/kernel.py (FALSE_INPUTS, TRUE_INPUTS); "
        "`python -m tools.spec_mutation --kernel` weakens each branch in turn and checks that "
        "this theorem then fails.",
    ),
    cases="the fixed planted inputs",
    generality="instance",
    source="the checks every proof of the HC (arXiv:2409.19606) and mHC (arXiv:2512.24880) "
           "theorems relies on",
)
def _kernel_soundness() -> list[Step]:
    found = verdicts()
    if any(found.values()):
        raise ProofFailure(f"the kernel is unsound or trivial: {found}")
    predicates = sorted({p for p, _, _, _ in FALSE_INPUTS})
    return [prose(f"{len(FALSE_INPUTS)} planted false inputs rejected, each by its own branch, "
                  f"{len(TRUE_INPUTS)} true ones accepted, covering {', '.join(predicates)}")]
