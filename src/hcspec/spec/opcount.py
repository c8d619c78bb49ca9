"""An independent FLOP count: the forward of each connection kind written out scalar by scalar,
run on a number type that counts its own arithmetic.

The closed forms in :mod:`hcspec.spec.counts` are checked against these counts (theorem
``counts.flops``). Convention: every scalar +, −, ×, ÷ and every elementary function (exp, sqrt,
tanh, σ) costs 1 FLOP; a sum of k terms is accumulated from 0, so it costs k additions (a
multiply-add is 2 FLOPs, the convention of :mod:`hcspec.spec.counts`). Values are not
computed, only operations counted, so the count does not depend on the input.

Sources: HC arXiv:2409.19606 §2.1 Eq. 1–5 (hc-static), §2.2 Eq. 10–13 (hc-dynamic);
mHC arXiv:2512.24880 Eq. 3, 7–9 (mhc).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hcspec.spec.kinds import HC_DYNAMIC, HC_STATIC, MHC, Kind, require_kind


@dataclass
class Tally:
    """The running FLOP count of one forward."""

    flops: int = 0


@dataclass(frozen=True)
class Scalar:
    """A number that adds one FLOP to its :class:`Tally` per arithmetic operation."""

    tally: Tally = field(repr=False)

    def _op(self, other: object) -> Scalar:
        self.tally.flops += 1
        return Scalar(self.tally)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _op


def _fn(x: Scalar) -> Scalar:
    """An elementary function (exp, sqrt, tanh, σ): one FLOP."""
    x.tally.flops += 1
    return Scalar(x.tally)


Matrix = list[list[Scalar]]


def _leaf(tally: Tally, rows: int, cols: int) -> Matrix:
    return [[Scalar(tally) for _ in range(cols)] for _ in range(rows)]


def _zero(tally: Tally) -> Scalar:
    """The accumulator a sum starts from (a free constant, not an operation)."""
    return Scalar(tally)


def _matmul(a: Matrix, b: Matrix) -> Matrix:
    inner, cols = len(b), len(b[0])
    out = []
    for row in a:
        out_row = []
        for j in range(cols):
            acc = _zero(row[0].tally)
            for k in range(inner):
                acc = acc + row[k] * b[k][j]
            out_row.append(acc)
        out.append(out_row)
    return out


def _transpose(a: Matrix) -> Matrix:
    return [list(column) for column in zip(*a, strict=True)]


def _add(a: Matrix, b: Matrix) -> Matrix:
    return [[x + y for x, y in zip(ra, rb, strict=True)] for ra, rb in zip(a, b, strict=True)]


def _map(a: Matrix, fn: object) -> Matrix:
    assert callable(fn)
    return [[fn(x) for x in row] for row in a]


def _connection(tally: Tally, X: Matrix, h_pre: Matrix, h_post: Matrix, H_res: Matrix) -> None:
    """x_in = Xᵀ h_pre, X' = H_res X + h_post zᵀ (the branch F itself is not counted)."""
    d = len(X[0])
    _matmul(_transpose(X), h_pre)  # x_in
    z = _leaf(tally, d, 1)  # the branch output (not counted)
    outer = [[h_post[i][0] * z[j][0] for j in range(d)] for i in range(len(X))]  # h_post zᵀ
    _add(_matmul(H_res, X), outer)


def _layer_norm_rows(X: Matrix) -> Matrix:
    """Per-row LayerNorm without affine: mean, centre, variance, + ε, sqrt, divide."""
    out = []
    for row in X:
        d = len(row)
        total = _zero(row[0].tally)
        for x in row:
            total = total + x
        mean = total / d
        centred = [x - mean for x in row]
        square = _zero(row[0].tally)
        for c in centred:
            square = square + c * c
        scale = _fn(square / d + 1e-5)
        out.append([c / scale for c in centred])
    return out


def _sinkhorn(tally: Tally, logits: Matrix, rounds: int) -> Matrix:
    """mHC Eq. 9: M = exp(logits), then ``rounds`` × (column then row normalisation)."""
    M = _map(logits, _fn)
    n = len(M)
    for _ in range(rounds):
        for j in range(n):
            col = _zero(tally)
            for i in range(n):
                col = col + M[i][j]
            for i in range(n):
                M[i][j] = M[i][j] / col
        for i in range(n):
            row = _zero(tally)
            for j in range(n):
                row = row + M[i][j]
            M[i] = [m / row for m in M[i]]
    return M


def forward_flops(kind: str, n: int, d: int, rounds: int = 20) -> int:
    """FLOPs of one forward of a ``kind`` connection at one token, counted operation by operation
    (``rounds``: Sinkhorn–Knopp rounds, mhc only).

    Raises:
        ValueError: if ``kind`` is not one of :data:`hcspec.spec.kinds.KINDS`.
    """
    known: Kind = require_kind(kind)
    tally = Tally()
    X = _leaf(tally, n, d)
    if known == HC_STATIC:
        _connection(tally, X, _leaf(tally, n, 1), _leaf(tally, n, 1), _leaf(tally, n, n))
    elif known == HC_DYNAMIC:
        X_bar = _layer_norm_rows(X)
        gates = []
        for width, static in ((1, _leaf(tally, n, 1)), (1, _leaf(tally, n, 1)),
                              (n, _leaf(tally, n, n))):
            projected = _matmul(X_bar, _leaf(tally, d, width))
            scaled = _map(_map(projected, _fn), lambda x: x * Scalar(tally))
            gates.append(_add(scaled, static))
        h_post, h_pre, H_res_t = gates
        _connection(tally, X, h_pre, h_post, _transpose(H_res_t))
    elif known == MHC:
        flat = [[x for row in X for x in row]]
        square = _zero(tally)
        for entry in flat[0]:
            square = square + entry * entry
        rms = _fn(square / (n * d) + 1e-6)
        mixed = _matmul(flat, _leaf(tally, n * d, n * n + 2 * n))[0]
        gated = [(value / rms) * Scalar(tally) + Scalar(tally) for value in mixed]
        h_pre = [[_fn(g)] for g in gated[:n]]
        h_post = [[2 * _fn(g)] for g in gated[n:2 * n]]
        logits = [gated[2 * n + i * n: 2 * n + (i + 1) * n] for i in range(n)]
        _connection(tally, X, h_pre, h_post, _sinkhorn(tally, logits, rounds))
    return tally.flops
