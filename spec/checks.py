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

import random
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import sympy
from sympy.core.function import AppliedUndef

from hcspec.spec.registry import ProofFailure, Step

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


def exact_zero(residual: Any) -> bool:
    """True when ``residual`` (scalar, explicit matrix or MatrixExpr) is exactly zero.

    Tries, in order: ``doit`` + ``expand``; ``cancel`` (rational functions); ``simplify``;
    ``rewrite(exp)`` + ``simplify``.
    A MatrixExpr with symbolic shape must simplify to a ZeroMatrix.
    """
    if _symbolic_matrix_expr(residual):
        expanded = sympy.expand(residual.doit())
        if bool(expanded.is_ZeroMatrix) or expanded == 0:
            return True
        reduced = sympy.simplify(residual.doit())
        return bool(reduced.is_ZeroMatrix) or reduced == 0
    entries = [sympy.expand(entry.doit()) for entry in _entries(residual)]
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


def require_equal(label: str, lhs: Any, rhs: Any, *, show: tuple[Any, Any] | None = None) -> Step:
    """Prove ``lhs == rhs`` exactly (numeric gate, then exact residual) and return the step.

    ``show`` replaces the pair printed in the derivation (e.g. the compact MatrixSymbol form of an
    identity proven on explicit entries). When both sides print the same, the step shows that
    one form (a derivation never displays ``A = A``).

    Raises:
        ProofFailure: naming ``label`` when the identity does not hold.
    """
    both_matrices = all(isinstance(side, (sympy.MatrixBase, sympy.MatrixExpr))
                        for side in (lhs, rhs))
    if both_matrices and sympy.Tuple(*lhs.shape) != sympy.Tuple(*rhs.shape):
        raise ProofFailure(f"{label}: shapes differ, {lhs.shape} vs {rhs.shape}")
    require_zero(label, lhs - rhs)
    left, right = show if show is not None else (lhs, rhs)
    if left == right:  # never display A = A
        return (f"{label} (the derivation gives this form directly)", left)
    return (label, sympy.Eq(left, right, evaluate=False))


def require_true(label: str, condition: Any, shown: Any = None) -> Step:
    """Require a sympy boolean (or Python bool) to be exactly True and return the step.

    Raises:
        ProofFailure: naming ``label`` when ``condition`` is not True.
    """
    if condition is not True and condition != sympy.true:
        raise ProofFailure(f"{label}: expected True, got {condition}")
    return (label, shown if shown is not None else sympy.true)


def require_nonnegative(label: str, entries: Iterable[Any]) -> None:
    """Require every entry to be provably nonnegative from its symbols' assumptions.

    Raises:
        ProofFailure: naming ``label`` and the first entry that is not provably ≥ 0.
    """
    for entry in entries:
        if entry.is_nonnegative is not True and sympy.expand(entry).is_nonnegative is not True:
            raise ProofFailure(f"{label}: entry {entry} is not provably nonnegative")


def chain(*exprs: Any) -> sympy.Symbol:
    """A display ``e₀ = e₁ = …`` for a derivation step, each side in LaTeX; a side printed the
    same as the one before it is dropped, so a step never shows ``A = A``.

    Strings are taken as LaTeX already. Raises ValueError if fewer than two distinct sides remain.
    """
    sides: list[str] = []
    for expr in exprs:
        text = expr if isinstance(expr, str) else sympy.latex(expr)
        if not sides or text != sides[-1]:
            sides.append(text)
    if len(sides) < 2:
        raise ValueError(f"a chain needs two different sides, got {sides}")
    return sympy.Symbol(" = ".join(sides))


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
