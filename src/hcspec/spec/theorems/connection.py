"""One HC sublayer: the paper's layout, the shapes, and the closed-form backward.

Theorems: ``layout.paper_rows``, ``forward.shapes``, ``backward.closed_form``,
``numeric.matches_formulas``.
Sources: HC arXiv:2409.19606 §2.1 Eq. 1–7 (the (n+1)×(n+1) matrix, width/depth connections);
mHC arXiv:2512.24880 Eq. 3 (the same map in row form).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sympy

from hcspec.spec import formulas, network
from hcspec.spec.checks import (
    chain,
    instantiate,
    require_equal,
    require_true,
    symbol_matrix,
    symbol_vector,
)
from hcspec.spec.formulas import ConnectionSymbols
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import Given, prose

SIZES_N = (1, 2, 3, 4)
SIZES_D = (1, 2, 3)


def _paper_symbols(rows: sympy.Expr | int, cols: sympy.Expr | int) -> dict[str, sympy.MatrixSymbol]:
    return {
        "B": sympy.MatrixSymbol("B", 1, rows),
        "A_m": sympy.MatrixSymbol("A_m", rows, 1),
        "A_r": sympy.MatrixSymbol("A_r", rows, rows),
        "H": sympy.MatrixSymbol("H", rows, cols),
        "z": sympy.MatrixSymbol("z", cols, 1),
    }


def _row_form_in_paper_terms(
    s: ConnectionSymbols, p: dict[str, sympy.MatrixSymbol]
) -> tuple[sympy.MatrixExpr, sympy.MatrixExpr]:
    mapping = {s.h_pre: p["A_m"], s.h_post: p["B"].T, s.H_res: p["A_r"].T, s.X: p["H"], s.z: p["z"]}
    return formulas.aggregate(s).xreplace(mapping), formulas.forward(s).xreplace(mapping)


@theorem(
    "layout.paper_rows",
    "The paper's Ĥ = Bᵀ T(Hᵀ A_m)ᵀ + A_rᵀ H equals the row form X' = H_res X + h_post zᵀ "
    "under h_pre = A_m, h_post = Bᵀ, H_res = A_rᵀ.",
    assumptions=(),
    setting=(
        "HC = [[0, B], [A_m, A_r]] with B: 1×n, A_m: n×1, A_r: n×n (HC Eq. 1).",
        "Streams are the rows of H = X ∈ R^{n×d}; z = T(h_0) is the branch output on "
        "h_0 = Hᵀ A_m.",
    ),
    cases="symbolic n, d (MatrixSymbol algebra); explicit entries for n in {1,2,3,4} × "
          "d in {1,2,3}",
    generality="all sizes",
    source="HC arXiv:2409.19606 §2.1 Eq. 1–5 and Eq. 7 (width connection); "
           "mHC arXiv:2512.24880 Eq. 3",
)
def _layout_paper_rows() -> list[Step]:
    s = formulas.connection_symbols()
    p = _paper_symbols(formulas.n, formulas.d)
    read, new_state = _row_form_in_paper_terms(s, p)
    paper_read = p["H"].T * p["A_m"]
    paper_state = p["B"].T * p["z"].T + p["A_r"].T * p["H"]
    steps = [
        require_equal("every n, d, read: x_in = Xᵀ h_pre is the paper's h_0 = Hᵀ A_m (Eq. 3)", read,
                      paper_read),
        require_equal("every n, d, write: H_res X + h_post zᵀ is the paper's Bᵀ zᵀ + A_rᵀ H "
                      "(Eq. 2, 4, 5)",
                      new_state, paper_state),
    ]
    for n in SIZES_N:
        for d in SIZES_D:
            c = formulas.connection_symbols(n, d)
            B, A_m = symbol_matrix("B", 1, n), symbol_vector("A_m", n)
            A_r, H, z = symbol_matrix("A_r", n, n), symbol_matrix("H", n, d), symbol_vector("z", d)
            mapping = {c.X: H, c.h_pre: A_m, c.h_post: B.T, c.H_res: A_r.T, c.z: z}
            require_equal(f"read, n={n}, d={d}", instantiate(formulas.aggregate(c), mapping),
                          H.T * A_m)
            require_equal(f"write, n={n}, d={d}", instantiate(formulas.forward(c), mapping),
                          B.T * z.T + A_r.T * H)
            # Eq. 7: one product with the width-connection matrix WC = [A_m, A_r] gives both the
            # branch input (row 0) and the mixed streams (rows 1..n).
            fused = sympy.Matrix.hstack(A_m, A_r).T * H
            fused_step = require_equal(f"width connection WCᵀ H, n={n}, d={d}", fused,
                                       sympy.Matrix.vstack((H.T * A_m).T, A_r.T * H))
            if (n, d) == (2, 3):
                width = fused_step[1]
    n, d = 2, 3
    B, A_m, A_r = symbol_matrix("B", 1, n), symbol_vector("A_m", n), symbol_matrix("A_r", n, n)
    steps.append(prose("the HC matrix (Eq. 1) is [[0, B], [A_m, A_r]]: B (1×n) the depth "
                       "weights, A_m (n×1) the read weights, A_r (n×n) the stream mix"))
    for size in (2, 3):  # the reader network.from_paper on a generic (non-symmetric) matrix
        B_, A_m_, A_r_ = (symbol_matrix("B", 1, size), symbol_vector("A_m", size),
                          symbol_matrix("A_r", size, size))
        read = network.from_paper(sympy.Matrix(sympy.BlockMatrix(
            [[sympy.zeros(1, 1), B_], [A_m_, A_r_]])))
        for name, got, want in (("h_pre", read.h_pre, A_m_), ("h_post", read.h_post, B_.T),
                                ("H_res", read.H_res, A_r_.T)):
            step = require_equal(f"network.from_paper reads {name}, n={size}", got, want)
        if size == 2:
            steps.append(("the reader network.from_paper on a generic, non-symmetric HC matrix "
                          "(n = 2) gives H_res = A_rᵀ", step[1]))
    steps.append(("width connection at n = 2, d = 3 (Eq. 7): row 0 of WCᵀ H is x_inᵀ, rows 1..n "
                  "are H_res X", width))
    return steps


def _shape_step(label: str, expr: sympy.MatrixExpr, expected: tuple[sympy.Expr, ...]) -> Step:
    got = sympy.Tuple(*expr.shape)
    want = sympy.Tuple(*expected)
    if got != want:
        raise ProofFailure(f"{label}: shape {tuple(got)} != expected {tuple(want)}")
    name = sympy.Symbol(r"\operatorname{shape}\left(" + sympy.latex(expr) + r"\right)")
    return require_true(f"{label}: its shape, every n, d", got == want,
                        sympy.Eq(name, want, evaluate=False),
                        where={name: got})


@theorem(
    "forward.shapes",
    "x_in, z, g_z, g_in ∈ R^d; X' ∈ R^{n×d}; each backward term has the shape of its variable: "
    "∂L/∂X: n×d, ∂L/∂H_res: n×n, ∂L/∂h_pre, ∂L/∂h_post: n×1.",
    assumptions=(),
    setting=(
        "Row convention: X ∈ R^{n×d} (streams are rows), h_pre, h_post ∈ R^n, H_res ∈ R^{n×n}.",
        "The branch F maps R^d → R^d and is called once per token on x_in.",
    ),
    cases="symbolic n, d; re-checked with explicit entries at (n, d) in "
          "{(1,2), (2,3), (3,1), (4,2)}",
    generality="all sizes",
    source="HC arXiv:2409.19606 §2.1 Eq. 2–5; mHC arXiv:2512.24880 Eq. 3",
)
def _forward_shapes() -> list[Step]:
    s = formulas.connection_symbols()
    n, d = formulas.n, formulas.d
    terms: list[tuple[str, Callable[[ConnectionSymbols], sympy.MatrixExpr], tuple[sympy.Expr, ...]]]
    terms = [
        ("x_in = Xᵀ h_pre", formulas.aggregate, (d, 1)),
        ("X' = H_res X + h_post zᵀ", formulas.forward, (n, d)),
        ("g_z = Gᵀ h_post", formulas.branch_cotangent, (d, 1)),
        ("∂L/∂X = H_resᵀ G + h_pre g_inᵀ", formulas.grad_X, s.X.shape),
        ("∂L/∂H_res = G Xᵀ", formulas.grad_H_res, s.H_res.shape),
        ("∂L/∂h_post = G z", formulas.grad_h_post, s.h_post.shape),
        ("∂L/∂h_pre = X g_in", formulas.grad_h_pre, s.h_pre.shape),
    ]
    steps = [_shape_step("z = F(x_in)", s.z, (d, 1)), _shape_step("g_in = Jᵀ g_z", s.g_in, (d, 1))]
    steps += [_shape_step(label, build(s), shape) for label, build, shape in terms]
    for rows, cols in ((1, 2), (2, 3), (3, 1), (4, 2)):
        c = formulas.connection_symbols(rows, cols)
        explicit = {m: symbol_matrix(m.name, *m.shape) for m in
                    (c.X, c.h_pre, c.h_post, c.H_res, c.z, c.G, c.g_in)}
        for label, build, shape in terms:
            want = tuple(int(k) for k in sympy.Tuple(*shape).subs({n: rows, d: cols}))
            try:
                got = instantiate(build(c), explicit).shape
            except sympy.ShapeError as error:
                raise ProofFailure(f"{label} at n={rows}, d={cols}: {error}") from None
            if got != want:
                raise ProofFailure(f"{label} at n={rows}, d={cols}: shape {got} != {want}")
    return steps


GradientForm = Callable[[ConnectionSymbols], sympy.MatrixExpr]

EXAMPLE_SIZES = ((2, 3),)
"""(n, d) where the symbolic backward is re-derived entry by entry with a nonlinear branch."""


@dataclass(frozen=True)
class BackwardClaim:
    """The closed forms a backward proof checks (the defaults are :mod:`hcspec.spec.formulas`).

    Tests build deliberately wrong claims (e.g. H_res in place of H_resᵀ) to see the prover fail.
    """

    grad_X: GradientForm = formulas.grad_X
    grad_H_res: GradientForm = formulas.grad_H_res
    grad_h_pre: GradientForm = formulas.grad_h_pre
    grad_h_post: GradientForm = formulas.grad_h_post
    branch_cotangent: GradientForm = formulas.branch_cotangent


def _backward_case(claim: BackwardClaim, n: int, d: int) -> None:
    """Entry-by-entry check at explicit (n, d): F = φ∘W with φ undefined elementwise."""
    X, G = symbol_matrix("X", n, d), symbol_matrix("G", n, d)
    h_pre, h_post = symbol_vector("p", n), symbol_vector("q", n)
    H_res, W = symbol_matrix("H", n, n), symbol_matrix("W", d, d)
    phi = sympy.Function("phi")
    x_in = X.T * h_pre
    z = (W * x_in).applyfunc(phi)
    new_state = H_res * X + h_post * z.T
    loss = sum(G.multiply_elementwise(new_state), sympy.Integer(0))

    def derived(variable: sympy.Matrix) -> sympy.Matrix:
        return variable.applyfunc(lambda entry: sympy.diff(loss, entry))

    xi = symbol_vector("xi", d)
    jacobian = (W * xi).applyfunc(phi).jacobian(xi).subs(dict(zip(xi, x_in, strict=True)))
    c = formulas.connection_symbols(n, d)
    g_z = instantiate(claim.branch_cotangent(c), {c.G: G, c.h_post: h_post, c.h_pre: h_pre,
                                                  c.X: X, c.H_res: H_res})
    values = {c.X: X, c.G: G, c.h_pre: h_pre, c.h_post: h_post, c.H_res: H_res, c.z: z,
              c.g_in: jacobian.T * g_z}
    zeta = symbol_vector("zeta", d)
    free_loss = sum(G.multiply_elementwise(H_res * X + h_post * zeta.T), sympy.Integer(0))
    require_equal(f"g_z at n={n}, d={d}", zeta.applyfunc(lambda e: sympy.diff(free_loss, e)),
                  g_z)
    for name, variable, form in (
        ("∂L/∂X", X, claim.grad_X),
        ("∂L/∂H_res", H_res, claim.grad_H_res),
        ("∂L/∂h_pre", h_pre, claim.grad_h_pre),
        ("∂L/∂h_post", h_post, claim.grad_h_post),
    ):
        try:
            closed = instantiate(form(c), values)
        except sympy.ShapeError as error:
            raise ProofFailure(
                f"{name} at n={n}, d={d}: the claimed form is ill-shaped: {error}") from None
        require_equal(f"{name} at n={n}, d={d}", derived(variable), closed)


def _symbolic_backward(claim: BackwardClaim) -> list[Step]:
    """Matrix calculus for symbolic n, d on L = tr(Gᵀ X') with the branch linearised at the
    point: z = z₀ + J x_in (the gradient depends on the branch only through dz = J dx_in)."""
    s = formulas.connection_symbols()
    d = formulas.d
    J, z0 = sympy.MatrixSymbol("J", d, d), sympy.MatrixSymbol("z_0", d, 1)
    x_in = formulas.aggregate(s)
    z_lin = z0 + J * x_in
    loss_z = sympy.Trace(s.G.T * formulas.forward(s))
    loss = sympy.Trace(s.G.T * formulas.forward(s).xreplace({s.z: z_lin}))
    try:
        g_z = claim.branch_cotangent(s)
    except sympy.ShapeError as error:
        raise ProofFailure(f"g_z: the claimed form is ill-shaped: {error}") from None
    require_equal("g_z = ∂L/∂z, symbolic n, d", loss_z.diff(s.z), g_z)
    steps: list[Step] = [
        prose("the loss L = tr(Gᵀ X') is the Frobenius inner product of the upstream gradient "
              "G = ∂L/∂X' with X'"),
        prose("the branch enters only through its differential dz = J dx_in, so at the point "
              "z = z₀ + J x_in with z₀ = F(x_in) − J x_in fixed (J the branch Jacobian)"),
        ("gradient reaching the branch output: differentiate the trace in z",
         chain(r"g_z = \frac{\partial L}{\partial z}", loss_z.diff(s.z), g_z)),
    ]
    values = {s.g_in: J.T * g_z, s.z: z_lin}
    for name, variable, form in (
        (r"\frac{\partial L}{\partial X}", s.X, claim.grad_X),
        (r"\frac{\partial L}{\partial H_{res}}", s.H_res, claim.grad_H_res),
        (r"\frac{\partial L}{\partial h_{pre}}", s.h_pre, claim.grad_h_pre),
        (r"\frac{\partial L}{\partial h_{post}}", s.h_post, claim.grad_h_post),
    ):
        try:
            closed = form(s)
            at_point = closed.xreplace(values)
        except sympy.ShapeError as error:
            raise ProofFailure(f"{variable} (symbolic n, d): the claimed form is ill-shaped: "
                               f"{error}") from None
        derived = loss.diff(variable)
        require_equal(f"∂L/∂{variable}, symbolic n, d", derived, at_point)
        used = [Given(text, ((symbol, values[symbol]),)) for symbol, text in (
            (s.g_in, "g_in = Jᵀ g_z"), (s.z, "z = z₀ + J x_in")) if closed.has(symbol)]
        named = " and ".join(given.text for given in used)
        steps.append((f"differentiate the trace in {variable} (matrix calculus, every n, d)"
                      + (f"; with {named} this is the closed form" if used else ""),
                      chain(name, derived, closed, using=used)))
    return steps


def backward_proof(
    claim: BackwardClaim = BackwardClaim(),
    sizes: Sequence[tuple[int, int]] = EXAMPLE_SIZES,
    *,
    symbolic: bool = True,
) -> Callable[[], list[Step]]:
    """A proof function for ``backward.closed_form`` checking ``claim``.

    With ``symbolic`` (the registered proof): matrix calculus on L = tr(Gᵀ X') for symbolic
    n, d, the branch linearised at the point (z = z₀ + J x_in). Then, at each explicit (n, d) of
    ``sizes``: symbol matrices X, G (n×d), h_pre, h_post (n), H_res (n×n), W (d×d), F = φ∘W with
    φ an undefined elementwise function, L = Σ G ∘ X'; each gradient obtained by differentiating
    L entrywise must equal the claimed closed form with g_in = Jᵀ g_z.
    """

    def prove() -> list[Step]:
        steps = _symbolic_backward(claim) if symbolic else []
        for n, d in sizes:
            _backward_case(claim, n, d)
        steps.append(_worked_backward_case())
        return steps

    return prove


def _worked_backward_case() -> Step:
    n, d = 2, 1
    X, h_pre, W = symbol_matrix("X", n, d), symbol_vector("p", n), symbol_matrix("W", d, d)
    G, h_post = symbol_matrix("G", n, d), symbol_vector("q", n)
    phi = sympy.Function("phi")
    loss = sum(G.multiply_elementwise(
        symbol_matrix("H", n, n) * X + h_post * (W * X.T * h_pre).applyfunc(phi).T
    ), sympy.Integer(0))
    derived = h_pre.applyfunc(lambda entry: sympy.diff(loss, entry))
    t = sympy.Symbol("t")
    pre_activation = (W * X.T * h_pre)[0, 0]
    g_z = (G.T * h_post)[0, 0]
    g_in = W[0, 0] * sympy.diff(phi(t), t).subs(t, pre_activation) * g_z
    name = sympy.Symbol(r"\frac{\partial L}{\partial p_{0}}")
    closed = X[0, 0] * g_in
    return require_equal("example with explicit entries, n = 2, d = 1, F = φ(W x) (p = h_pre, "
                         "q = h_post): the first entry of ∂L/∂h_pre, differentiated entrywise, is "
                         "X₀ g_in with g_in = W φ'(W x_in) g_z", derived[0], closed,
                         show=(name, closed), where={name: derived[0]})


theorem(
    "backward.closed_form",
    "Differentiating L = Σ G ∘ X' (G = ∂L/∂X', the upstream gradient) gives "
    "∂L/∂X = H_resᵀ G + h_pre g_inᵀ, ∂L/∂H_res = G Xᵀ, "
    "∂L/∂h_pre = X g_in, ∂L/∂h_post = G z, with g_z = Gᵀ h_post and g_in = Jᵀ g_z.",
    assumptions=(),
    setting=(
        "F: R^d → R^d any differentiable branch with Jacobian J (a d×d MatrixSymbol) at x_in; the "
        "gradient depends on F only through dz = J dx_in, so g_in = Jᵀ g_z.",
        "Examples: F = φ∘W, W a d×d symbol matrix, φ an undefined elementwise function, "
        "J = diag(φ'(W x_in)) W.",
        "X feeds both the bypass H_res X and the branch input x_in, so its two terms add.",
        "The weights h_pre, h_post, H_res are treated as independent of X (static HC; for dynamic "
        "weights the chain rule adds their own terms).",
    ),
    cases="symbolic n, d (matrix calculus, numerically gated at (n, d) = (3, 2) and (2, 5)); "
          "example with explicit entries and a nonlinear branch at (n, d) = (2, 3)",
    generality="all sizes",
    source="chain rule on HC arXiv:2409.19606 Eq. 2–5 / mHC arXiv:2512.24880 Eq. 3",
)(backward_proof())


NUMERIC_POINT_SIZES = ((3, 2), (2, 5))
"""(n, d) where the numeric callables are compared with the sympy expressions."""


@theorem(
    "numeric.matches_formulas",
    "The numeric callables of hcspec.spec.numeric (aggregate, forward, branch_cotangent, "
    "backward, rms_norm, layer_norm) give the values of the spec's sympy expressions.",
    assumptions=(),
    setting=(
        "Seeded random float64 inputs; agreement to 1e-12 relative (float64 "
                 "evaluation of the same expressions).",
    ),
    cases="random points at (n, d) in {(3,2), (2,5)}",
    generality="instance",
    source="the expressions of hcspec.spec.formulas and hcspec.spec.norms: HC arXiv:2409.19606 "
           "Eq. 2–5, mHC arXiv:2512.24880 Eq. 3 and 7",
)
def _numeric_matches_formulas() -> list[Step]:
    import numpy as np

    from hcspec.spec import norms, numeric

    rng = np.random.default_rng(11)
    worst = 0.0

    def agree(label: str, got: object, sympy_value: sympy.Matrix) -> None:
        nonlocal worst
        want = np.array(sympy_value.evalf(), dtype=float)
        got_ = np.asarray(got, dtype=float).reshape(want.shape)
        error = float(np.max(np.abs(got_ - want)) / max(1.0, float(np.max(np.abs(want)))))
        worst = max(worst, error)
        if not error < 1e-12:
            raise ProofFailure(f"numeric.{label} differs from the sympy expression by {error:.3g}")

    for n, d in NUMERIC_POINT_SIZES:
        s = formulas.connection_symbols(n, d)
        values = {m: sympy.Matrix(rng.normal(size=tuple(int(k) for k in m.shape)))
                  for m in (s.X, s.h_pre, s.h_post, s.H_res, s.z, s.G, s.g_in)}
        arr = {m: np.array(v, dtype=float) for m, v in values.items()}
        vec = {m: a[:, 0] for m, a in arr.items() if a.shape[1] == 1}
        agree("aggregate", numeric.aggregate(arr[s.X], vec[s.h_pre]),
              instantiate(formulas.aggregate(s), values))
        agree("forward", numeric.forward(arr[s.X], vec[s.h_post], arr[s.H_res], vec[s.z]),
              instantiate(formulas.forward(s), values))
        agree("branch_cotangent", numeric.branch_cotangent(arr[s.G], vec[s.h_post]),
              instantiate(formulas.branch_cotangent(s), values))
        grads = numeric.backward(arr[s.G], arr[s.X], vec[s.h_pre], vec[s.h_post], arr[s.H_res],
                                 vec[s.z], vec[s.g_in])
        for name, form in (("X", formulas.grad_X), ("H_res", formulas.grad_H_res),
                           ("h_pre", formulas.grad_h_pre), ("h_post", formulas.grad_h_post)):
            agree(f"backward.{name}", getattr(grads, name), instantiate(form(s), values))
        x = sympy.Matrix(rng.normal(size=(d, 1)))
        for eps in (0.0, 1e-3):
            agree("rms_norm", numeric.rms_norm(np.array(x, dtype=float)[:, 0], eps),
                  norms.rms_norm(x, eps))
            agree("layer_norm", numeric.layer_norm(np.array(x, dtype=float)[:, 0], eps),
                  norms.layer_norm(x, eps))
    return [require_true("largest relative difference over every callable and point",
                         worst < 1e-12, sympy.StrictLessThan(sympy.Float(worst, 3),
                                                             sympy.Float(1e-12)))]
