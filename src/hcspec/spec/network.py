"""Stacks of HC sublayers with explicit sympy matrices: the paper layout, the static init, the
unrolled cross-layer connection weights.

Row convention (docs/reference.md, Conventions): the state X is n×d (streams are rows); one
sublayer computes ``x_in = Xᵀ h_pre``, ``z = F(x_in)``, ``X' = H_res X + h_post zᵀ``. The
network input is the replicated embedding ``X₀ = 1_n h₀ᵀ`` and the output is the stream sum
``1ᵀ X_L``.

Sources: HC arXiv:2409.19606 §2.1 Eq. 1–5, §2.3 Eq. 14 (init), §4.5 Eq. 20 / App. F Eq. 27
(unrolled connections); mHC arXiv:2512.24880 Eq. 3–4.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from hcspec.spec import formulas
from hcspec.spec.checks import evaluate, require_size

Branch = Callable[[sympy.Matrix], sympy.Matrix]
"""A sublayer F: a d×1 input to a d×1 output."""


@dataclass(frozen=True)
class ConnectionWeights:
    """The weights of one HC sublayer in row form.

    Attributes:
        h_pre: n×1 read weights (HC A_m, mHC H_pre).
        h_post: n×1 write weights (HC Bᵀ, mHC H_postᵀ).
        H_res: n×n stream mixing (HC A_rᵀ, mHC H_res).

    Raises:
        ValueError: if the shapes are not n×1, n×1, n×n for one n ≥ 1.
    """

    h_pre: sympy.Matrix
    h_post: sympy.Matrix
    H_res: sympy.Matrix

    def __post_init__(self) -> None:
        n = self.H_res.shape[0]
        require_size("n", n)
        expected = {"h_pre": (n, 1), "h_post": (n, 1), "H_res": (n, n)}
        for name, shape in expected.items():
            got = getattr(self, name).shape
            if got != shape:
                raise ValueError(f"{name}: expected shape {shape} (n = {n}), got {got}")

    @property
    def n(self) -> int:
        """The expansion rate (number of streams)."""
        return int(self.H_res.shape[0])


def from_paper(hc: sympy.Matrix) -> ConnectionWeights:
    """Read the paper's (n+1)×(n+1) matrix HC = [[0, B], [A_m, A_r]] (HC Eq. 1) in row form:
    h_pre = A_m, h_post = Bᵀ, H_res = A_rᵀ (proven as ``layout.paper_rows``).

    Raises:
        ValueError: if ``hc`` is not square of size ≥ 2 or its top-left entry is not 0.
    """
    rows, cols = hc.shape
    if rows != cols or rows < 2:
        raise ValueError(f"HC matrix must be (n+1)×(n+1) with n >= 1, got shape {hc.shape}")
    if hc[0, 0] != 0:
        raise ValueError(f"HC matrix top-left entry must be 0, got {hc[0, 0]}")
    h_pre, h_post, H_res = read_blocks(hc[0, 1:], hc[1:, 0], hc[1:, 1:])
    return ConnectionWeights(h_pre=h_pre, h_post=h_post, H_res=H_res)


def read_blocks(B: Any, A_m: Any, A_r: Any) -> tuple[Any, Any, Any]:
    """The row-form weights ``(h_pre, h_post, H_res) = (A_m, Bᵀ, A_rᵀ)`` of the paper's blocks
    B (1×n), A_m (n×1), A_r (n×n) (HC Eq. 1); explicit matrices or matrix expressions with a
    symbolic n alike (:func:`from_paper` reads an explicit matrix through it)."""
    return A_m, B.T, A_r.T


def static_init(n: int, k: int) -> ConnectionWeights:
    """Static init of sublayer k (0-based): h_pre = e_{k mod n}, H_res = I, h_post = 1 (HC Eq. 14).

    Raises:
        ValueError: if n < 1 or k < 0.
    """
    require_size("n", n)
    require_size("k", k, minimum=0)
    return ConnectionWeights(
        h_pre=sympy.Matrix(n, 1, lambda i, _: 1 if i == k % n else 0),
        h_post=sympy.ones(n, 1),
        H_res=sympy.eye(n),
    )


def replicate(h0: sympy.Matrix, n: int) -> sympy.Matrix:
    """The network input X₀ = 1_n h₀ᵀ (n×d) from a d×1 embedding."""
    return sympy.ones(require_size("n", n), 1) * h0.T


@dataclass(frozen=True)
class StackTrace:
    """A forward pass through a stack: states[k] is X_k (states[0] = X₀), inputs[k] and
    outputs[k] are the branch input and output of sublayer k+1."""

    states: tuple[sympy.Matrix, ...]
    inputs: tuple[sympy.Matrix, ...]
    outputs: tuple[sympy.Matrix, ...]


def run_stack(
    X0: sympy.Matrix, weights: Sequence[ConnectionWeights], branches: Sequence[Branch]
) -> StackTrace:
    """Apply the sublayers in order: x_in = Xᵀ h_pre, z = F(x_in), X' = H_res X + h_post zᵀ,
    each step evaluating :func:`hcspec.spec.formulas.aggregate` and
    :func:`hcspec.spec.formulas.forward` (the stack never re-types the connection).

    Raises:
        ValueError: if the numbers of weights and branches differ, or a shape does not match.
    """
    if len(weights) != len(branches):
        raise ValueError(f"expected one branch per sublayer: {len(weights)} weights, "
                         f"{len(branches)} branches")
    states, inputs, outputs = [X0], [], []
    for w, branch in zip(weights, branches, strict=True):
        X = states[-1]
        if X.shape[0] != w.n:
            raise ValueError(f"state has {X.shape[0]} streams, sublayer expects n = {w.n}")
        s = formulas.connection_symbols(w.n, X.shape[1])
        x_in = evaluate(formulas.aggregate(s), {s.X: X, s.h_pre: w.h_pre})
        z = branch(x_in)
        if z.shape != x_in.shape:
            raise ValueError(f"branch output shape {z.shape} != input shape {x_in.shape}")
        inputs.append(x_in)
        outputs.append(z)
        states.append(evaluate(formulas.forward(s), {s.X: X, s.H_res: w.H_res,
                                                     s.h_post: w.h_post, s.z: z}))
    return StackTrace(tuple(states), tuple(inputs), tuple(outputs))


def connection_weights(weights: Sequence[ConnectionWeights]) -> sympy.Matrix:
    """Unroll a stack into cross-layer weights (HC §4.5 Eq. 20; mHC Eq. 4).

    Nodes: 0 = the embedding h₀, k = 1..L the sublayers, L+1 = the output (stream sum). Entry
    (k, j) is w_{j,k}, the coefficient of node j's output in node k's input:

        w_{0,k} = h_pre,kᵀ H_res,k-1 ⋯ H_res,1 1_n
        w_{j,k} = h_pre,kᵀ H_res,k-1 ⋯ H_res,j+1 h_post,j       (1 ≤ j < k)

    with h_pre,L+1 = 1_n. The result is (L+2)×(L+2) and strictly lower triangular.

    Raises:
        ValueError: if the sublayers disagree on n or ``weights`` is empty.
    """
    if not weights:
        raise ValueError("expected at least one sublayer, got none")
    n = weights[0].n
    if any(w.n != n for w in weights):
        raise ValueError(f"all sublayers must share n; got {[w.n for w in weights]}")
    L = len(weights)
    reads = [w.h_pre for w in weights] + [sympy.ones(n, 1)]
    writes = [sympy.ones(n, 1)] + [w.h_post for w in weights]
    C = sympy.zeros(L + 2, L + 2)
    for k in range(1, L + 2):
        carried = reads[k - 1].T  # row vector: h_pre,kᵀ H_res,k-1 ⋯ H_res,j+1
        for j in range(k - 1, -1, -1):
            C[k, j] = sympy.expand((carried * writes[j])[0, 0])
            if j >= 1:
                carried = carried * weights[j - 1].H_res
    return C
