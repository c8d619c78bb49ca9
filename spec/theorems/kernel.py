"""The proof kernel checks itself: every checking predicate the proofs rely on is run on planted
false inputs of each expression class it accepts, and on true ones, inside ``hc-spec prove``.

A kernel that answered "yes" by mistake would let every theorem through; this theorem fails
instead. Theorems: ``kernel.soundness``.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy

from hcspec.spec import checks
from hcspec.spec import doubly_stochastic as ds
from hcspec.spec.registry import ProofFailure, Step, Theorem, theorem
from hcspec.spec.steps import Given, assume, cite, ledger, prose
from hcspec.spec.sums import split_sums, swap_sum

_n = sympy.Symbol("n", integer=True, positive=True)
_i, _j, _k = sympy.symbols("i j k", integer=True, nonnegative=True)
_x = sympy.IndexedBase("x", real=True)
_a, _b = sympy.symbols("a b", real=True)
_A, _B = sympy.MatrixSymbol("A", _n, _n), sympy.MatrixSymbol("B", _n, _n)
_ONE = sympy.MatrixSymbol(r"\mathbf{1}", _n, 1)


def _accepts(check: Callable[[], object]) -> bool:
    """True when ``check`` returns a truthy value without raising (the kernel said yes)."""
    try:
        return bool(check() is not False)
    except (ProofFailure, ValueError):
        return False


def _chain(*sides: object, using: tuple[Given, ...] = ()) -> Callable[[], object]:
    return lambda: checks.chain(*sides, using=using)


def _unchecked_display() -> object:
    result = Theorem("kernel.planted", "s", ("a",), "c", "arXiv", lambda: [
        ("a display no check produced", sympy.Eq(_a, _b, evaluate=False))], "instance").prove()
    return result.ok


def _undeclared_assumption() -> object:
    with ledger(("x ∈ R^n real.",)):
        return assume("H 1 = 1", replace={_a: 1})


DS_ALMOST = sympy.Matrix([[sympy.Rational(1, 2) + sympy.Rational(1, 10**20), sympy.Rational(1, 2)],
                          [sympy.Rational(1, 2), sympy.Rational(1, 2)]])
"""Row and column sums 1 + 10⁻²⁰ and 1: passes a float gate, fails the exact sum check."""

FALSE_INPUTS: tuple[tuple[str, str, Callable[[], object]], ...] = (
    ("exact_zero", "a non-zero scalar", lambda: checks.exact_zero(_a - _b)),
    ("exact_zero", "a non-zero explicit matrix",
     lambda: checks.exact_zero(sympy.Matrix([[0, _a - _a ** 2]]))),
    ("exact_zero", "a non-zero symbolic-size product (A B − B A)",
     lambda: checks.exact_zero(_A * _B - _B * _A)),
    ("exact_zero", "a non-zero symbolic-size transpose (A − Aᵀ)",
     lambda: checks.exact_zero(_A - _A.T)),
    ("exact_zero", "a symbolic-size scalar multiple ((n − 1) A − n A)",
     lambda: checks.exact_zero((_n - 1) * _A - _n * _A)),
    ("exact_zero", "a sum with a symbolic limit, one term short",
     lambda: checks.exact_zero(sympy.Sum(_x[_j], (_j, 0, _n - 1))
                               - sympy.Sum(_x[_j], (_j, 0, _n - 2)))),
    ("exact_zero", "a piecewise expression that differs on one branch",
     lambda: checks.exact_zero(sympy.Piecewise((_a, _a > 0), (0, True)) - _a)),
    ("require_zero", "a non-zero symbolic-size matrix expression",
     lambda: checks.require_zero("planted", _A * _B - _B * _A)),
    ("chain", "a link between different finite sums",
     _chain(sympy.Sum(_x[_j], (_j, 0, _n - 1)), sympy.Sum(_x[_j], (_j, 1, _n - 1)))),
    ("chain", "a swap of a double sum with dependent limits",
     _chain(sympy.Sum(_x[_j], (_j, 0, _i), (_i, 0, _n - 1)),
            sympy.Sum(_x[_j], (_i, 0, _n - 1), (_j, 0, _i)))),
    ("chain", "a link that needs a fact not given",
     _chain(_ONE.T * _A * _ONE, _n * sympy.Identity(1))),
    ("chain", "a link the given fact does not reach",
     _chain(_ONE.T * _A, _ONE.T, using=(Given("A 1 = 1", factors=(_A, _ONE), rhs=_ONE),))),
    ("chain", "a limit whose value is not the one shown",
     _chain(sympy.Limit(1 + 1 / _a, _a, sympy.oo), 0)),
    ("chain", "a piecewise sum whose range condition is not given",
     _chain(sympy.Sum(sympy.KroneckerDelta(_i, _j), (_j, 0, _n - 1)), 1)),
    ("swap_sum", "a double sum with dependent limits",
     lambda: swap_sum(sympy.Sum(_x[_j], (_j, 0, _i), (_i, 0, _n - 1)))),
    ("split_sums", "linearity that would drop a term",
     lambda: sympy.expand(split_sums(sympy.Sum(_x[_j] + 1, (_j, 0, _n - 1)))
                          - sympy.Sum(_x[_j], (_j, 0, _n - 1))) == 0),
    ("decide", "≠ between equal expressions", lambda: checks.decide(
        sympy.Ne(_a * (_a + 1), _a ** 2 + _a, evaluate=False))),
    ("decide", "≥ 0 for an expression of unknown sign",
     lambda: checks.decide(sympy.GreaterThan(_a - _b, 0, evaluate=False))),
    ("decide", "> for a false numeric relation",
     lambda: checks.decide(sympy.StrictGreaterThan(sympy.Float(1e-7), sympy.Float(1e-6),
                                                   evaluate=False))),
    ("require_true", "a displayed relation that does not hold",
     lambda: checks.require_true("planted", True, sympy.GreaterThan(_a, 0, evaluate=False))),
    ("require_equal", "a compact display that is not the proven identity",
     lambda: checks.require_equal("planted", sympy.Matrix([_a]), sympy.Matrix([_a]),
                                  show=(sympy.Symbol("u"), sympy.Symbol("v")),
                                  where={sympy.Symbol("u"): sympy.Matrix([_a]),
                                         sympy.Symbol("v"): sympy.Matrix([_b])})),
    ("require_doubly_stochastic", "unit sums only up to 10⁻²⁰",
     lambda: ds.require_doubly_stochastic("planted", DS_ALMOST)),
    ("require_doubly_stochastic", "a negative entry",
     lambda: ds.require_doubly_stochastic("planted", sympy.Matrix([[2, -1], [-1, 2]]))),
    ("registry", "a proof that displays an unchecked step", _unchecked_display),
    ("assume", "an assumption the theorem does not declare", _undeclared_assumption),
    ("cite", "a fact the lemma does not display",
     lambda: cite("planted", "lemma.unit_vectors", sympy.Eq(_a, _b, evaluate=False))),
)
"""Planted false inputs: ``(predicate, class, check)``; the kernel must reject every one (return
False or raise)."""

TRUE_INPUTS: tuple[tuple[str, str, Callable[[], object]], ...] = (
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
    """``{"accepted false": [...], "rejected true": [...]}``: the planted cases the kernel got
    wrong (both empty for a sound, non-trivial kernel)."""
    return {
        "accepted false": [f"{p}: {c}" for p, c, check in FALSE_INPUTS if _accepts(check)],
        "rejected true": [f"{p}: {c}" for p, c, check in TRUE_INPUTS if not _accepts(check)],
    }


@theorem(
    "kernel.soundness",
    "The proof kernel rejects planted false inputs of every expression class it accepts "
    "(symbolic-size matrix expressions, finite sums with symbolic and dependent limits, "
    "piecewise expressions, limits, displayed relations, doubly stochastic checks, unchecked "
    "displays, undeclared assumptions, uncited facts) and accepts true ones.",
    assumptions=(),
    setting=(
        "The planted inputs of spec/theorems/kernel.py (FALSE_INPUTS, TRUE_INPUTS).",
    ),
    cases="the fixed planted inputs",
    generality="instance",
    source="the checks every proof of the HC (arXiv:2409.19606) and mHC (arXiv:2512.24880) "
           "theorems relies on",
)
def _kernel_soundness() -> list[Step]:
    found = verdicts()
    if found["accepted false"] or found["rejected true"]:
        raise ProofFailure(f"the kernel is unsound or trivial: {found}")
    predicates = sorted({p for p, _, _ in FALSE_INPUTS})
    return [prose(f"{len(FALSE_INPUTS)} planted false inputs rejected, {len(TRUE_INPUTS)} true "
                  f"ones accepted, covering {', '.join(predicates)}")]
