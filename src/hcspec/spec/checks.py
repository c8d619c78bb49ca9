"""Building blocks of the spec's proofs: explicit symbol matrices, exact zero checks, numeric gates.

Every identity a theorem claims goes through :func:`require_equal` (or :func:`require_zero`):

1. a **numeric gate** first — the residual is evaluated at a few seeded random points, with every
   undefined function (an arbitrary branch φ, F, f, …) replaced by a fixed smooth concrete function.
   A wrong form fails here in milliseconds, before any slow simplification;
2. then the **exact step** — the residual is expanded (polynomial identities), then simplified,
   then, for hyperbolic functions, rewritten with ``exp`` and simplified (sympy's ``simplify`` alone
   gives false negatives on tanh/sech identities). The proof only passes if the residual is
   structurally zero.

Sizes in these helpers are concrete Python ints: sympy proves the HC facts per explicit n and d
(symbolic MatrixSymbol algebra is used only where it demonstrably works, see the theorem modules).
"""

from __future__ import annotations

import contextlib
import itertools
import random
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import sympy
from sympy.core.function import AppliedUndef
from sympy.printing.latex import LatexPrinter

from hcspec.spec.registry import ProofFailure, Step
from hcspec.spec.steps import Given, record

GATE_POINTS = 2
"""Random points per numeric gate."""

GATE_TOLERANCE = 1e-9
"""Relative tolerance of the numeric gate (float64 evaluation of exact identities)."""


def require_size(name: str, value: int, minimum: int = 1) -> int:
    """Return ``value`` if it is an int ≥ ``minimum``.

    Raises:
        ValueError: naming ``name``, the expected range and the received value.
    """
    if isinstance(value, sympy.Integer):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _indexed_name(name: str, index: str) -> str:
    """``name`` with ``index`` appended to its subscript (never a LaTeX double subscript)."""
    if "_" in name:
        base, sub = name.split("_", 1)
        return f"{base}_{{{sub.strip('{}')},{index}}}"
    return f"{name}_{{{index}}}"


def symbol_matrix(name: str, rows: int, cols: int, **assumptions: bool) -> sympy.Matrix:
    """A rows×cols matrix of fresh scalar symbols ``name_{i,j}`` (0-based indices).

    Raises:
        ValueError: if ``rows`` or ``cols`` is < 1.
    """
    rows, cols = require_size("rows", rows), require_size("cols", cols)
    def entry(i: int, j: int) -> sympy.Symbol:
        return sympy.Symbol(_indexed_name(name, f"{i}{j}"), real=True, **assumptions)

    return sympy.Matrix(rows, cols, entry)


def symbol_vector(name: str, size: int, **assumptions: bool) -> sympy.Matrix:
    """A size×1 column of fresh scalar symbols ``name_{i}`` (0-based indices).

    Raises:
        ValueError: if ``size`` is < 1.
    """
    size = require_size("size", size)
    return sympy.Matrix(
        size, 1, lambda i, _: sympy.Symbol(_indexed_name(name, str(i)), real=True, **assumptions)
    )


def instantiate(expr: Any, mapping: Mapping[Any, Any]) -> sympy.Matrix:
    """Replace the MatrixSymbols of a matrix expression by explicit matrices and evaluate it."""
    replaced = expr.xreplace({key: sympy.ImmutableMatrix(value) for key, value in mapping.items()})
    return sympy.Matrix(replaced.doit())


class _LatexPrinter(LatexPrinter):  # type: ignore[misc]
    """sympy's LaTeX printer, except that a symbol whose name is already LaTeX (it contains a
    backslash or a brace) is printed verbatim instead of being split at ``^`` and ``_``."""

    def _print_Symbol(self, expr: sympy.Symbol, style: str = "plain") -> str:
        if "\\" in expr.name or "{" in expr.name:
            return str(expr.name)
        return str(super()._print_Symbol(expr, style=style))

    def _print_Sum(self, expr: sympy.Sum) -> str:
        """A sum over several indices as nested sums, the outermost first (Σ_i Σ_j a_ij, not
        one Σ with stacked ranges), so a swap of the order shows on the page."""
        if len(expr.limits) == 1:
            return str(super()._print_Sum(expr))
        inner = sympy.Sum(expr.function, expr.limits[0])
        outer = expr.limits[1:]
        signs = "".join(rf"\sum_{{{self._print(index)}={self._print(low)}}}"
                        rf"^{{{self._print(high)}}} " for index, low, high in reversed(outer))
        return signs + str(self._print(inner))


def page_latex(expr: Any) -> str:
    """``expr`` as the derivation pages typeset it (:class:`_LatexPrinter`: LaTeX-named symbols
    verbatim, a sum over several indices as nested sums)."""
    return str(_LatexPrinter().doprint(expr))


def _concrete(call: Any) -> Any:
    """A fixed smooth stand-in for an undefined function call, chosen by the function's name."""
    seed = zlib.crc32(str(call.func).encode())
    weights = [sympy.Rational(1 + (seed >> (3 * k)) % 7, 5) for k in range(len(call.args))]
    inner = sum((w * a for w, a in zip(weights, call.args, strict=True)), sympy.Integer(0))
    return sympy.sin(inner + sympy.Rational(seed % 11, 10)) + inner / 3


def _sample(symbol: sympy.Symbol, rng: random.Random) -> sympy.Float:
    if symbol.is_positive:
        value = rng.uniform(0.5, 2.0)
    elif symbol.is_nonnegative:
        value = rng.uniform(0.05, 1.0)
    else:
        value = rng.uniform(-1.5, 1.5)
    return sympy.Float(value, 30)


def _entries(expr: Any) -> list[Any]:
    if isinstance(expr, sympy.MatrixBase):
        return list(expr)
    if isinstance(expr, sympy.MatrixExpr):
        return list(sympy.Matrix(expr.as_explicit()))
    return [expr]


def _differentiates_free_symbol(entry: Any) -> bool:
    """True when a derivative is taken w.r.t. a free symbol (numbers cannot be put in first)."""
    free = entry.free_symbols
    return any(not free.isdisjoint(derivative.variables)
               for derivative in entry.atoms(sympy.Derivative))


def _concretize(entry: Any) -> Any:
    """Replace undefined functions by their concrete stand-ins and evaluate derivatives.

    Outermost functions go first, so that a derivative taken with respect to an inner call
    (sympy writes ∂F(N(x))/∂N(x)) is evaluated before that inner call is replaced.
    """
    while True:
        calls = entry.atoms(AppliedUndef)
        if not calls:
            return entry.doit()
        inner = set().union(*(arg.atoms(AppliedUndef) for call in calls for arg in call.args))
        outer = {call.func for call in calls if call not in inner}
        entry = entry.replace(
            lambda e, outer=outer: isinstance(e, AppliedUndef) and e.func in outer, _concrete
        ).doit()


def numeric_gate(label: str, residual: Any, *, points: int = GATE_POINTS, seed: int = 0) -> None:
    """Evaluate ``residual`` at seeded random points; it must vanish there.

    Undefined functions are replaced by fixed concrete functions, derivatives evaluated, and every
    free symbol drawn at random (positive symbols from [0.5, 2], nonnegative from [0.05, 1],
    others from [-1.5, 1.5]).

    Raises:
        ProofFailure: naming ``label`` and the non-zero residual found.
    """
    entries = [_concretize(entry) if _differentiates_free_symbol(entry) else entry
               for entry in _entries(residual)]
    symbols = sorted(set().union(*(entry.free_symbols for entry in entries)), key=str)
    rng = random.Random(seed)
    for _ in range(points):
        values = {symbol: _sample(symbol, rng) for symbol in symbols}
        for entry in entries:
            numeric = _concretize(entry.xreplace(values))
            value = complex(numeric.evalf(20))
            if not abs(value) <= GATE_TOLERANCE:
                raise ProofFailure(
                    f"{label}: numeric gate failed, residual {value:.3g} at a random point"
                )


SHAPE_INSTANCES = ({"n": 3, "d": 2}, {"n": 2, "d": 5})
"""Concrete sizes at which a symbolic-shape identity is numerically gated (n != d in each)."""


def _explicit_instances(expr: Any) -> list[Any]:
    """Explicit-entry versions of a MatrixExpr whose shape involves symbolic sizes: n and d take
    the values of :data:`SHAPE_INSTANCES`, any other size symbol (m, k, p, …) a small value that
    differs between instances and from its neighbours."""
    shape_symbols = {s for m in (expr, *expr.atoms(sympy.MatrixSymbol)) for dim in m.shape
                     for s in sympy.sympify(dim).free_symbols}
    size_symbols = sorted(shape_symbols | {s for s in expr.atoms(sympy.Symbol)
                                           if s.name in ("n", "d") and s.is_integer}, key=str)
    instances = []
    for index, sizes in enumerate(SHAPE_INSTANCES):
        values = {s: sizes[s.name] if s.name in sizes else 2 + (position + index) % 4
                  for position, s in enumerate(size_symbols)}
        sized = expr.subs(values)
        explicit = sized.xreplace({
            m: sympy.ImmutableMatrix(symbol_matrix(m.name, *(int(k) for k in m.shape)))
            for m in sized.atoms(sympy.MatrixSymbol)
        })
        instances.append(sympy.Matrix(explicit.doit()))
    return instances


def _symbolic_matrix_expr(expr: Any) -> bool:
    return isinstance(expr, sympy.MatrixExpr) and not isinstance(expr, sympy.MatrixBase)


def _matrix_terms_cancel(expr: Any) -> bool:
    """True when the expanded MatrixExpr ``expr`` is a sum of scalar multiples of matrix
    products whose coefficients, grouped by product, each simplify to 0 (e.g.
    ``a I + b 11ᵀ − (a I + b 11ᵀ)`` with ``a``, ``b`` written differently)."""
    expanded = sympy.expand(expr.doit())
    terms = expanded.args if isinstance(expanded, sympy.MatAdd) else (expanded,)
    groups: dict[Any, Any] = {}
    for term in terms:
        factors = term.args if isinstance(term, sympy.MatMul) else (term,)
        scalar = sympy.Mul(*(f for f in factors if not getattr(f, "is_Matrix", False)))
        matrix = [f for f in factors if getattr(f, "is_Matrix", False)]
        if not matrix:
            return False
        key = sympy.MatMul(*matrix).doit() if len(matrix) > 1 else matrix[0]
        groups[key] = groups.get(key, sympy.Integer(0)) + scalar
    return all(sympy.simplify(coefficient) == 0 for coefficient in groups.values())


def exact_zero(residual: Any) -> bool:
    """True when ``residual`` (scalar, explicit matrix or MatrixExpr) is exactly zero.

    Tries, in order: ``doit`` + ``expand``; ``cancel`` (rational functions); ``simplify``;
    ``rewrite(exp)`` + ``simplify``.
    A MatrixExpr with symbolic shape must simplify to a ZeroMatrix.
    """
    if _symbolic_matrix_expr(residual):
        evaluated = _doit(residual)
        expanded = sympy.expand(evaluated)
        if bool(expanded.is_ZeroMatrix) or expanded == 0:
            return True
        reduced = sympy.simplify(evaluated)
        if bool(reduced.is_ZeroMatrix) or reduced == 0:
            return True
        return _matrix_terms_cancel(residual)
    entries = [sympy.expand(_doit(entry)) for entry in _entries(residual)]
    if all(entry == 0 for entry in entries):
        return True
    entries = [sympy.cancel(entry) for entry in entries]
    if all(entry == 0 for entry in entries):
        return True
    entries = [sympy.simplify(entry) for entry in entries]
    if all(entry == 0 for entry in entries):
        return True
    return all(sympy.simplify(entry.rewrite(sympy.exp)) == 0 for entry in entries)


def require_zero(label: str, residual: Any) -> None:
    """Require ``residual`` to be exactly zero, after a numeric gate.

    A MatrixExpr with symbolic sizes is gated at the explicit sizes of :data:`SHAPE_INSTANCES`.

    Raises:
        ProofFailure: naming ``label``, when the gate or the exact check fails.
    """
    if _symbolic_matrix_expr(residual) and not all(
        isinstance(size, (int, sympy.Integer)) for size in residual.shape
    ):
        for instance in _explicit_instances(residual):
            numeric_gate(label, instance)
    else:
        numeric_gate(label, residual)
    if not exact_zero(residual):
        shown = str(residual)
        raise ProofFailure(f"{label}: residual does not simplify to zero: {shown[:300]}")


def _same(label: str, shown: Any, value: Any) -> None:
    """Require a displayed side (its notation already substituted) to equal the proven one."""
    if isinstance(value, sympy.MatrixBase) or isinstance(shown, (sympy.MatrixBase,
                                                                   sympy.MatrixExpr)):
        if isinstance(shown, sympy.MatrixExpr) and not isinstance(shown, sympy.MatrixBase):
            shown = shown.doit()
        if isinstance(shown, sympy.Mul) and shown.has(sympy.MatrixBase):
            shown = shown.doit()  # a product of substituted notation symbols
        shown = sympy.Matrix(shown.as_explicit() if isinstance(shown, sympy.MatrixExpr)
                             else shown)
        value = sympy.Matrix(value)
        if shown == value:
            return
        if shown.shape != value.shape:
            raise ProofFailure(f"{label}: the displayed form has shape {shown.shape}, the proven "
                               f"side {value.shape}")
    if shown == value or _cheap_zero(shown - value):
        return
    if not exact_zero(shown - value):
        raise ProofFailure(f"{label}: the displayed form is not the proven identity")


def require_independent(label: str, lhs: Any, rhs: Any) -> None:
    """The meta-check against steps true by construction: the two sides of a step must be
    separate constructions, not one expression object used twice.

    sympy shares the objects of equal atoms and singletons (numbers, ∅) and of cached results,
    so two numbers, or two
    equal results of one cached computation, may be one object without being one construction:
    only compound expressions are compared.

    Raises:
        ProofFailure: naming ``label`` when ``lhs`` and ``rhs`` are the same compound object (a
            step ``A = A`` that checks nothing).
    """
    if lhs is rhs and bool(getattr(lhs, "args", ())):
        raise ProofFailure(f"{label}: true by construction: both sides are the same expression "
                           "object")


def require_equal(label: str, lhs: Any, rhs: Any, *, show: tuple[Any, Any] | None = None,
                  where: Mapping[Any, Any] | None = None) -> Step:
    """Prove ``lhs == rhs`` exactly (numeric gate, then exact residual) and return the step.

    ``show`` replaces the pair printed in the derivation by a compact form (e.g. names for the
    explicit matrices an identity was proven on); ``where`` maps each notation symbol of that
    form to its value, and the form with them substituted must equal ``(lhs, rhs)`` exactly, so
    a compact display is checked too. When both sides print the same, the step shows that one
    form (a derivation never displays ``A = A``).

    Raises:
        ProofFailure: naming ``label`` when the identity does not hold, or the displayed form is
            not the proven one.
    """
    require_independent(label, lhs, rhs)
    both_matrices = all(isinstance(side, (sympy.MatrixBase, sympy.MatrixExpr))
                        for side in (lhs, rhs))
    if both_matrices and sympy.Tuple(*lhs.shape) != sympy.Tuple(*rhs.shape):
        raise ProofFailure(f"{label}: shapes differ, {lhs.shape} vs {rhs.shape}")
    require_zero(label, lhs - rhs)
    left, right = show if show is not None else (lhs, rhs)
    if show is not None:
        values = {key: sympy.ImmutableMatrix(value) if isinstance(value, sympy.MatrixBase)
                  else value for key, value in (where or {}).items()}
        for shown, value in ((left, lhs), (right, rhs)):
            _same(label, sympy.sympify(shown).xreplace(values), value)
    if left == right:  # never display A = A
        return (f"{label} (the derivation gives this form directly)",
                record(left, (lhs, rhs)))
    return (label, record(sympy.Eq(left, right, evaluate=False), (lhs, rhs)))


def _provably_nonzero(value: Any) -> bool:
    """True when ``value`` is shown non-zero: a number that is not 0, a polynomial with rational
    coefficients whose expanded form has a non-zero one (a non-zero polynomial is not the zero
    function; a coefficient such as sin²1 + cos²1 − 1 may be 0 without looking it), or else a
    numeric witness: a point where it is not 0."""
    value = sympy.expand(sympy.sympify(value).doit())
    if value.is_number:
        return bool(value != 0 and abs(complex(value.evalf(30))) > 0)
    if not value.atoms(AppliedUndef) and value.is_polynomial(*value.free_symbols):
        poly = sympy.Poly(value, *sorted(value.free_symbols, key=str))
        if poly.domain.is_ZZ or poly.domain.is_QQ:  # rational coefficients: 0 only if all are
            return not poly.is_zero
    rng = random.Random(1)  # a witness: one point (arbitrary functions made concrete) where
    point = {symbol: _sample(symbol, rng) for symbol in value.free_symbols}  # it is not 0
    try:
        number = complex(_concretize(_concretize(value).xreplace(point)).evalf(30))
    except (TypeError, ValueError):
        return False
    return abs(number) > 1e-6


def decide(relation: Any) -> bool:
    """True only when ``relation`` (a sympy relation or boolean, sides explicit) is shown to
    hold: ``=`` by :func:`exact_zero`, ``≠`` by :func:`_provably_nonzero` (entrywise for
    matrices: some entry non-zero), ``<, ≤, >, ≥`` from the sign of ``lhs − rhs`` under the
    symbols' assumptions, other booleans by ``simplify`` to ``True``. Whatever it cannot decide
    is False: the kernel never answers True by default."""
    if relation is True or relation == sympy.true:
        return True
    if isinstance(relation, sympy.Eq):
        if relation.lhs == relation.rhs:
            return True
        try:
            return exact_zero(relation.lhs - relation.rhs)
        except (TypeError, ValueError, AttributeError, sympy.ShapeError):
            return False
    if isinstance(relation, sympy.Ne):
        gap = relation.lhs - relation.rhs
        return any(_provably_nonzero(entry) for entry in _entries(gap))
    signs = {sympy.StrictGreaterThan: "is_positive", sympy.GreaterThan: "is_nonnegative",
             sympy.StrictLessThan: "is_negative", sympy.LessThan: "is_nonpositive"}
    for kind, attribute in signs.items():
        if isinstance(relation, kind):
            gap = relation.lhs - relation.rhs
            return any(getattr(form, attribute) is True
                       for form in (gap, sympy.expand(gap), sympy.factor(gap)))
    if isinstance(relation, sympy.logic.boolalg.Boolean):
        return bool(sympy.simplify(relation) == sympy.true)
    return False


def _substituted(shown: Any, where: Mapping[Any, Any] | None) -> Any:
    """The relation ``shown`` with its notation symbols replaced by their values ``where``."""
    values = {key: sympy.ImmutableMatrix(value) if isinstance(value, sympy.MatrixBase)
              else value for key, value in (where or {}).items()}
    if isinstance(shown, sympy.core.relational.Relational):
        return type(shown)(shown.lhs.xreplace(values), shown.rhs.xreplace(values),
                           evaluate=False)
    return shown.xreplace(values)


def _require_decided(label: str, shown: Any, where: Mapping[Any, Any] | None) -> Step:
    """Decide the displayed relation ``shown`` (notation replaced by ``where``) and return the
    step; a relation whose two sides differ on the page but are one expression once the
    notation is replaced (``N(x₀)₀ = a`` with ``N(x₀)₀`` standing for the very expression ``a``
    shown on the other side) is true by naming alone and is rejected (the meta-check of
    :func:`require_independent`)."""
    shown = sympy.sympify(shown)
    relation = _substituted(shown, where)
    named = {key: value for key, value in (where or {}).items()
             if getattr(value, "args", ())}
    if isinstance(shown, sympy.Eq) and any(
            (side in named and named[side] is other)
            for side, other in ((shown.lhs, shown.rhs), (shown.rhs, shown.lhs))):
        raise ProofFailure(f"{label}: true by construction: the displayed {shown} is decided "
                           f"as {relation.lhs} = {relation.rhs}")
    if not decide(relation):
        raise ProofFailure(f"{label}: the displayed relation {shown} is not shown to hold")
    return (label, record(shown, (relation,)))


def require_true(label: str, condition: Any, shown: Any = None,
                 where: Mapping[Any, Any] | None = None) -> Step:
    """Require ``condition`` (a computed sympy boolean or Python bool, never a literal ``True``:
    tests/spec/test_kernel_soundness.py reads every call) to be exactly True and return the
    step; the relation ``shown`` on the page (notation symbols replaced by ``where``) is decided
    again by :func:`decide`, so what the page displays is what was checked.

    Raises:
        ProofFailure: naming ``label`` when ``condition`` is not True or ``shown`` does not hold.
    """
    if condition is not True and condition != sympy.true:
        raise ProofFailure(f"{label}: expected True, got {condition}")
    if shown is None:
        return (label, record(sympy.true))
    return _require_decided(label, shown, where)


def require_relation(label: str, shown: Any, where: Mapping[Any, Any] | None = None) -> Step:
    """Decide the displayed relation ``shown`` (:func:`decide`, after replacing the notation
    symbols by ``where``) and return it as a checked step: the page shows the relation that was
    decided, with no separate condition.

    Raises:
        ProofFailure: naming ``label`` when the relation is not shown to hold, or holds only
            because the notation names one side by the other.
    """
    return _require_decided(label, shown, where)


def require_nonnegative(label: str, entries: Iterable[Any]) -> None:
    """Require every entry to be provably nonnegative from its symbols' assumptions.

    Raises:
        ProofFailure: naming ``label`` and the first entry that is not provably ≥ 0.
    """
    for entry in entries:
        if entry.is_nonnegative is not True and sympy.expand(entry).is_nonnegative is not True:
            raise ProofFailure(f"{label}: entry {entry} is not provably nonnegative")


def _rename_bound(expr: Any) -> Any:
    """``expr`` with the index of every one-limit ``Sum`` renamed to a canonical symbol by
    nesting level (alpha-equivalence: Σ_j a_j and Σ_k a_k become the same expression)."""
    def level(total: Any) -> int:
        inner = [e for e in total.function.atoms(sympy.Sum)]
        return 1 + max((level(e) for e in inner), default=0)

    def rename(total: Any) -> Any:
        if len(total.limits) != 1:
            return total
        (index, *bounds), = total.limits
        fresh = sympy.Symbol(f"_bound{level(total)}", integer=True)
        if fresh in total.free_symbols:
            return total
        return sympy.Sum(total.function.xreplace({index: fresh}), (fresh, *bounds))

    if not isinstance(expr, sympy.Basic) or not expr.has(sympy.Sum):
        return expr
    return expr.replace(lambda e: isinstance(e, sympy.Sum), rename)


def _unnest(expr: Any) -> Any:
    """``Σ_{i,j} a`` written as ``Σ_j (c Σ_i b)`` with the factors ``c`` of ``a`` free of ``i``
    pulled out of the inner sum (the same finite sum; sympy merges a bare nested ``Sum``)."""
    from sympy.simplify.simplify import factor_sum

    def one(total: Any) -> Any:
        inner = factor_sum(sympy.Sum(total.function, total.limits[0]))
        return sympy.Sum(inner, *total.limits[1:])

    return expr.replace(lambda e: isinstance(e, sympy.Sum) and len(e.limits) > 1, one)


def _push_in(expr: Any) -> Any:
    """``Σ_j c_j Σ_i a_ij`` written as ``Σ_j Σ_i c_j a_ij`` (a factor free of the inner index
    moved into the inner sum: linearity read backwards)."""
    def push(total: Any) -> Any:
        factors = sympy.Mul.make_args(total.function)
        inner = [f for f in factors if isinstance(f, sympy.Sum)]
        if len(inner) != 1:
            return total
        rest = sympy.Mul(*(f for f in factors if f is not inner[0]))
        indices = {limit[0] for limit in inner[0].limits}
        if indices & rest.free_symbols:
            return total
        return sympy.Sum(sympy.Sum(rest * inner[0].function, *inner[0].limits), *total.limits)

    return expr.replace(lambda e: isinstance(e, sympy.Sum) and e.function.is_Mul, push)


_MEMO: dict[tuple[Any, ...], Any] = {}
"""Results of the kernel's pure rewriting functions (:func:`_cheap_zero`, :func:`_normal_forms`)
by value of their arguments: a chain's middle side is reduced once, not once per link, and a
finite sum sympy cannot evaluate is not tried again on every pair of forms. Each result is what
the call computes; nothing is accepted that the uncached call would reject."""


def _memo(key: tuple[Any, ...], compute: Any) -> Any:
    """``compute()`` remembered under ``key`` (computed each time when ``key`` is unhashable: a
    mutable explicit Matrix)."""
    try:
        if key in _MEMO:
            return _MEMO[key]
    except TypeError:
        return compute()
    value = compute()
    _MEMO[key] = value
    return value


def _doit(expr: Any) -> Any:
    """``expr.doit()``, computed once per value (:data:`_MEMO`): a finite sum sympy cannot
    evaluate in closed form is tried once, not once per form and per pair of forms."""
    return _memo(("doit", expr), expr.doit)


def _cheap_zero_pair(left: Any, right: Any) -> bool:
    """``left − right`` expands to exactly zero: :func:`_cheap_zero` with each side evaluated
    once (``doit`` acts term by term, so ``(l − r).doit()`` is ``l.doit() − r.doit()``)."""
    if not (isinstance(left, sympy.Basic) and isinstance(right, sympy.Basic)):
        return _cheap_zero(left - right)
    return _cheap_zero_uncached(_doit(left) - _doit(right), evaluated=True)


def _cheap_zero(residual: Any) -> bool:
    """``residual`` expands to exactly zero (no simplification heuristics)."""
    return bool(_memo(("cheap_zero", residual), lambda: _cheap_zero_uncached(residual)))


def _cheap_zero_uncached(residual: Any, evaluated: bool = False) -> bool:
    try:
        value = (sympy.expand(residual if evaluated else residual.doit())
                 if isinstance(residual, sympy.Basic) else residual)
    except (TypeError, ValueError, AttributeError, sympy.ShapeError):
        return False
    return bool(value == 0 or getattr(value, "is_ZeroMatrix", False)
                or (isinstance(value, sympy.MatrixBase) and value.is_zero_matrix))


def _normal_forms(side: Any, using: tuple[Given, ...], swap: bool = False) -> list[Any]:
    """``side`` and the forms the kernel's rewrites give it: evaluated (``doit``,
    ``piecewise_fold``), finite sums unnested and split by linearity (and, with ``swap``, a
    double sum swapped), the facts ``using`` applied until nothing changes (at most four
    passes), and every summation index renamed canonically (computed once per side, facts and
    ``swap``: :data:`_MEMO`)."""
    return list(_memo(("normal_forms", side, using, swap),
                      lambda: tuple(_normal_forms_uncached(side, using, swap))))


def _normal_forms_uncached(side: Any, using: tuple[Given, ...], swap: bool) -> list[Any]:
    from hcspec.spec.sums import split_sums, swap_sum

    base = sympy.sympify(side)
    forms = [base]
    if swap and isinstance(base, sympy.Sum) and len(base.limits) == 2:
        with contextlib.suppress(ValueError):  # dependent limits: the swap rule does not apply
            forms.append(swap_sum(base))
    for form in list(forms):
        with contextlib.suppress(TypeError, ValueError, AttributeError):
            forms.append(sympy.piecewise_fold(_doit(form)))
    starts = [forms[-1]]
    if base.has(sympy.Sum):
        forms += [split_sums(_unnest(form)) for form in list(forms)]
        starts = [split_sums(_unnest(base)), forms[-1]]
        forms += [_push_in(form) for form in list(forms)]
    for current in starts if using else []:
        for _ in range(4):
            before = current
            for given in using:
                current = given.apply(current)
            with contextlib.suppress(TypeError, ValueError, AttributeError):
                current = sympy.piecewise_fold(sympy.expand(_doit(current)))
            if current.has(sympy.Sum):
                current = split_sums(_unnest(current))
            if current == before:
                break
        forms.append(current)
    if base.has(sympy.Sum) or any(form.has(sympy.Sum) for form in forms):
        forms += [_rename_bound(form) for form in list(forms)]
    unique: list[Any] = []
    for form in forms:
        if form not in unique:
            unique.append(form)
    return unique


def _link_holds(a: Any, b: Any, using: tuple[Given, ...] = ()) -> bool:
    """One link ``a = b`` of a chain: the residual of some pair of the sides' normal forms
    (:func:`_normal_forms`: evaluation, the named finite-sum rewrites
    :func:`hcspec.spec.sums.split_sums` and :func:`hcspec.spec.sums.swap_sum`, the facts
    ``using``, renamed summation indices) expands to zero, or else the most reduced pair is
    :func:`exact_zero`. Anything it cannot show is False, never True by default."""
    def pairs_vanish(lefts: list[Any], rights: list[Any]) -> bool:
        if any(left == right for left in lefts for right in rights):
            return True
        for left, right in [*zip(lefts, rights, strict=False), (lefts[-1], rights[-1]),
                            (lefts[0], rights[-1]), (lefts[-1], rights[0])]:
            try:
                if _cheap_zero_pair(left, right):
                    return True
            except (TypeError, ValueError, AttributeError, sympy.ShapeError):
                continue
        return False

    if any(isinstance(side, sympy.Basic) and side.has(sympy.BlockMatrix) for side in (a, b)):
        a, b = (sympy.block_collapse(side) if isinstance(side, sympy.MatrixExpr) else side
                for side in (a, b))
        if isinstance(a, sympy.BlockMatrix) and isinstance(b, sympy.BlockMatrix):
            return bool(a.blockshape == b.blockshape and all(
                _link_holds(x, y, using) for x, y in zip(a.blocks, b.blocks, strict=True)))
    lefts, rights = _normal_forms(a, (), swap=True), _normal_forms(b, ())
    if pairs_vanish(lefts, rights):
        return True
    if using:
        lefts = _normal_forms(a, using, swap=True)
        if pairs_vanish(lefts[-2:], rights):
            return True
        rights = _normal_forms(b, using)
        if pairs_vanish(lefts, rights):
            return True
    if any(isinstance(side, sympy.Basic) and side.has(sympy.Product) for side in (a, b)) and \
            sympy.simplify(a) == sympy.simplify(b):  # sympy joins adjacent product ranges
        return True
    try:
        return exact_zero(lefts[-1] - rights[-1])
    except (TypeError, ValueError, AttributeError, sympy.ShapeError):
        return False


def require_link(label: str, lhs: Any, rhs: Any, *, using: Iterable[Given] = ()) -> Step:
    """Prove ``lhs = rhs`` as one chain link (:func:`_link_holds`: exact, possibly after the
    kernel's finite-sum rewrites and the facts ``using``) and return it as a step showing the
    equation (a lemma's fact is displayed this way so that :func:`hcspec.spec.steps.cite` can
    use it).

    Raises:
        ProofFailure: naming ``label`` when the link does not hold.
    """
    facts = tuple(using)
    require_independent(label, lhs, rhs)
    if not _link_holds(lhs, rhs, facts):
        raise ProofFailure(f"{label}: {lhs} = {rhs} does not hold exactly")
    return (label, record(sympy.Eq(lhs, rhs, evaluate=False)))


def chain(*exprs: Any, using: Iterable[Given] = (), via: tuple[Any, ...] = ()) -> sympy.Symbol:
    """A display ``e₀ = e₁ = …`` for a derivation step, each side in LaTeX, with every link
    checked (:func:`_link_holds`): an exact residual, possibly after using the facts ``using``
    (declared assumptions, :func:`hcspec.spec.steps.assume`, or lemma facts,
    :func:`hcspec.spec.steps.from_lemma`, named after the display), or a named finite-sum
    rewrite. A side printed the same as the one before it is dropped, so a step never shows
    ``A = A``.

    ``via`` are intermediate forms between the first two values: every link through them is
    checked, but the page shows only the sides in ``exprs`` (a long reduction kept off the page).

    Only the first side may be notation: a string (LaTeX) or a symbol whose name is LaTeX
    (contains a backslash, a brace, a space, a parenthesis or a bar), the name of the side after
    it.

    Raises:
        ProofFailure: when a link does not hold.
        ValueError: if fewer than two distinct sides remain, or notation appears after the
            first side.
    """
    def is_notation(expr: Any) -> bool:
        return isinstance(expr, str) or (isinstance(expr, sympy.Symbol) and any(
            mark in expr.name for mark in ("\\", "{", " ", "(", "|")))

    facts = tuple(using)
    if any(is_notation(expr) for expr in exprs[1:]):
        raise ValueError("only the first side of a chain may be notation")
    values = list(exprs[1:] if exprs and is_notation(exprs[0]) else exprs)
    if len(values) < 2:
        raise ValueError("a chain needs at least one checked link (two values after any "
                         "notation)")
    for a, b in itertools.pairwise([values[0], *via, *values[1:]]):
        if not _link_holds(a, b, facts):
            raise ProofFailure(f"chain: the link {a} = {b} does not hold exactly"
                               + (f" using {[g.text for g in facts]}" if facts else ""))
    sides: list[str] = []
    for expr in exprs:
        text = expr if isinstance(expr, str) else page_latex(expr)
        if not sides or text != sides[-1]:
            sides.append(text)
    if len(sides) < 2:
        raise ValueError(f"a chain needs two different sides, got {sides}")
    shown = " = ".join(sides)
    if facts:
        shown += r" \quad (\text{using } " + r",\ ".join(g.shown() for g in facts) + ")"
    return record(sympy.Symbol(shown), (*values, *via))


def evaluate(expr: Any, mapping: Mapping[Any, Any]) -> Any:
    """Evaluate a matrix expression built from MatrixSymbols, products, sums and transposes with
    the explicit matrices of ``mapping``, operation by operation (the entries are combined by
    explicit matrix arithmetic and never simplified or ``doit``-ed).

    Raises:
        ValueError: for a MatrixSymbol missing from ``mapping``.
    """
    if expr in mapping:
        return sympy.Matrix(mapping[expr])
    if isinstance(expr, sympy.MatrixSymbol):
        raise ValueError(f"no value given for {expr}")
    if isinstance(expr, sympy.MatMul):
        values = [evaluate(arg, mapping) for arg in expr.args]
        result = values[0]
        for value in values[1:]:
            result = result * value
        return result
    if isinstance(expr, sympy.MatAdd):
        values = [evaluate(arg, mapping) for arg in expr.args]
        return sum(values[1:], values[0])
    if isinstance(expr, sympy.Transpose):
        return evaluate(expr.arg, mapping).T
    return expr
