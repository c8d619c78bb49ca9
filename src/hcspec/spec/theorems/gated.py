"""The general HC law with a branch-input map, and Qwen4-exp's gated read as one case of it.

General law (one token, streams are rows, ``X ∈ R^{n×d}``)::

    X' = H_res X + h_post F(x_in(X))ᵀ        x_in: R^{n×d} → R^d, any map

- the **per-stream** read is ``x_in = Xᵀ h_pre`` (HC, mHC, DeepSeek-V4: the closed form
  :func:`hcspec.spec.formulas.forward`);
- the **gated** read (Qwen4-exp, transformers 5.23.0 ``Qwen4ExpTextGatedResidual``) normalises
  each stream with a group RMSNorm ``N_s = (1 + w_s) ⊙ X_s / √(mean_k X_sk² + ε)``, gates it
  element-wise with ``G = σ(U silu(D vec(N) / n))`` (``D ∈ R^{r×nd}``, ``U ∈ R^{nd×r}``) and
  takes the mean over the streams: ``x_in = (1/n) Σ_s G_s ⊙ N_s``; the write is
  ``h_post = 2σ(W vec(N) / n)`` (``W ∈ R^{n×nd}``) and there is no mixing, ``H_res = I``.

Theorems: ``gated.general_law``, ``gated.stream_sum``, ``gated.per_stream_only``,
``gated.read_backward``, ``gated.constant_gate``, ``gated.n1_gated_prenorm``,
``gated.init_scale`` and ``published.qwen4_exp_step``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy

from hcspec.spec import formulas
from hcspec.spec.checks import (
    chain,
    require_equal,
    symbol_matrix,
    symbol_vector,
)
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import assume, prose
from hcspec.spec.sums import split_sums

SOURCE = ("Qwen4-exp (transformers 5.23.0 models/qwen4_exp/modeling_qwen4_exp.py "
          "Qwen4ExpTextGatedResidual, Qwen4ExpTextDecoderLayer); HC arXiv:2409.19606 §2 Eq. 1-5; "
          "mHC arXiv:2512.24880 Eq. 3")

_N, _D = formulas.n, formulas.d
_S, _J, _K = sympy.symbols("s j k", integer=True, nonnegative=True)
_X = sympy.IndexedBase("X", real=True)
_H = sympy.IndexedBase("H", real=True)
_P = sympy.IndexedBase("p", real=True)
_Z = sympy.IndexedBase("z", real=True)
_G = sympy.IndexedBase("G", real=True)
_NS = sympy.IndexedBase("N", real=True)
_W = sympy.IndexedBase("w", real=True)
_Q = sympy.IndexedBase("q", real=True)


def sigmoid(x: sympy.Expr) -> sympy.Expr:
    """σ(x) = 1 / (1 + e^{−x}) as a sympy expression."""
    return 1 / (1 + sympy.exp(-x))


Activation = Callable[[Any], Any]
"""σ as a function of a sympy expression: :func:`sigmoid` or the opaque :class:`Sigma`."""


def silu(x: sympy.Expr, act: Activation = sigmoid) -> sympy.Expr:
    """silu(x) = x σ(x) as a sympy expression."""
    return x * act(x)


def group_rms_norm(X: sympy.Matrix, w: sympy.Matrix, eps: sympy.Expr) -> sympy.Matrix:
    """The group RMSNorm of the n×d state ``X``, one group per stream (a row):
    ``N[s, k] = (1 + w[s, k]) X[s, k] / √(Σ_k X[s, k]² / d + ε)`` (n×d; ``w`` n×d)."""
    n, d = X.shape
    rows = []
    for s in range(n):
        r = sympy.sqrt(sum(X[s, k] ** 2 for k in range(d)) / d + eps)
        rows.append([(1 + w[s, k]) * X[s, k] / r for k in range(d)])
    return sympy.Matrix(rows)


def _flat(M: sympy.Matrix) -> sympy.Matrix:
    """``vec`` of an n×d matrix in row-major order (stream s, feature k at s·d + k), nd×1."""
    return sympy.Matrix([M[s, k] for s in range(M.shape[0]) for k in range(M.shape[1])])


def gate(Nm: sympy.Matrix, down: sympy.Matrix, up: sympy.Matrix,
         act: Activation = sigmoid) -> sympy.Matrix:
    """The element-wise gate ``G = σ(U silu(D vec(N) / n))`` as an n×d matrix (``down`` r×nd,
    ``up`` nd×r)."""
    n, d = Nm.shape
    hidden = (down * _flat(Nm) / n).applyfunc(lambda v: silu(v, act))
    logits = up * hidden
    return sympy.Matrix(n, d, lambda s, k: act(logits[s * d + k]))


def gated_read(Nm: sympy.Matrix, G: sympy.Matrix) -> sympy.Matrix:
    """``x_in = (1/n) Σ_s G_s ⊙ N_s`` (d×1)."""
    n, d = Nm.shape
    return sympy.Matrix([sum(G[s, k] * Nm[s, k] for s in range(n)) / n for k in range(d)])


def inject(Nm: sympy.Matrix, W: sympy.Matrix, act: Activation = sigmoid) -> sympy.Matrix:
    """``h_post = 2σ(W vec(N) / n)`` (n×1; ``W`` n×nd)."""
    n = Nm.shape[0]
    return (W * _flat(Nm) / n).applyfunc(lambda v: 2 * act(v))


def _branch(x_in: sympy.Matrix) -> sympy.Matrix:
    """An arbitrary branch ``F: R^d → R^d`` applied to the column ``x_in``."""
    return sympy.Matrix([sympy.Function(f"F_{k}")(*x_in) for k in range(x_in.shape[0])])


def _every(expr: sympy.Expr) -> sympy.Expr:
    """A sum over the streams ``s = 0..n−1`` with n symbolic."""
    return sympy.Sum(expr, (_S, 0, _N - 1))


@theorem(
    "gated.general_law",
    "The general law X' = H_res X + h_post F(x_in(X))ᵀ, entry by entry X'[j,k] = Σ_s H_res[j,s] "
    "X[s,k] + h_post[j] z_k, is the spec's closed form when the read is per-stream "
    "(x_in = Xᵀ h_pre); with H_res = I it is X' = X + h_post zᵀ for any read map.",
    assumptions=("The stream index satisfies 0 ≤ j ≤ n − 1.",),
    setting=("X ∈ R^{n×d}, H_res ∈ R^{n×n}, h_post ∈ R^n, z = F(x_in(X)) ∈ R^d; x_in any map "
             "R^{n×d} → R^d (per-stream, gated or other)",),
    cases="symbolic n, d (index form); the per-stream case as MatrixSymbol algebra, symbolic n, d",
    generality="all sizes",
    source=SOURCE,
)
def _general_law() -> list[Step]:
    s = formulas.connection_symbols()
    entry = _every(_H[_J, _S] * _X[_S, _K]) + _P[_J] * _Z[_K]
    index = assume("0 ≤ j ≤ n − 1", replace={sympy.Le(_J, _N - 1): True})
    return [
        require_equal("every n, d: the per-stream read x_in = Xᵀ h_pre with the general write is "
                      "the closed form H_res X + h_post zᵀ",
                      s.H_res * s.X + s.h_post * s.z.T, formulas.forward(s)),
        ("every n, d: the general law entry by entry, with H_res = I (H[j,s] = δ_js, "
         "0 ≤ j ≤ n − 1) the bypass is X itself",
         chain(r"X'_{jk}", entry.xreplace({_H[_J, _S]: sympy.KroneckerDelta(_J, _S)}),
               _X[_J, _K] + _P[_J] * _Z[_K], using=[index])),
        prose("the read map enters only through z = F(x_in(X)): every statement about the "
              "write and the mixing (stream sums, the bypass, H_res probes) holds for any read "
              "map; only statements about h_pre need the per-stream read"),
    ]


@theorem(
    "gated.stream_sum",
    "With H_res = I (Qwen4-exp), the stream sum evolves like a residual for any read map: "
    "1ᵀ X' = 1ᵀ X + (1ᵀ h_post) zᵀ = 1ᵀ X + n·mean(h_post)·zᵀ, and the bypass gradient is "
    "G' itself (so it keeps the gradient's stream sum).",
    assumptions=("The stream index satisfies 0 ≤ j ≤ n − 1.",),
    setting=("X ∈ R^{n×d}, h_post ∈ R^n, z ∈ R^d the branch output at any read x_in(X); "
             "G' = ∂L/∂X' the upstream gradient",),
    cases="symbolic n, d (index form)",
    generality="all sizes",
    source=SOURCE,
)
def _stream_sum() -> list[Step]:
    total = _every(_X[_S, _K] + _P[_S] * _Z[_K])
    mean_post = _every(_P[_S]) / _N
    bypass = _every(sympy.KroneckerDelta(_S, _J) * _G[_S, _K])
    index = assume("0 ≤ j ≤ n − 1", replace={sympy.Le(_J, _N - 1): True})
    return [
        ("every n, d: Σ_s X'_{sk} splits by linearity of the finite sum",
         chain(r"\sum_s X'_{sk}", total, split_sums(total),
               _every(_X[_S, _K]) + _N * mean_post * _Z[_K])),
        ("every n, d: the bypass gradient (H_res)ᵀ G' with H_res = I is G' (entry j, k)",
         chain(r"(I^T G')_{jk}", bypass, _G[_J, _K], using=[index])),
    ]


@theorem(
    "gated.per_stream_only",
    "The gated read is not a per-stream read: at n = 1, d = 2, x = (1, 2) and the gate "
    "G = (1/4, 3/4) there is no h_pre ∈ R with h_pre x = G ⊙ N(x); so h_pre, the identity-branch "
    "probe solved for h_pre and the closed-form ∂L/∂h_pre = X g_in exist only for the "
    "per-stream form.",
    assumptions=(),
    setting=("N(x) = x / √(mean(x²) + ε) with ε = 0, norm weight 0 (a positive multiple of x); "
             "a gate's entries lie in (0, 1)",),
    cases="n = 1, d = 2, one state and one gate (a counterexample refutes the per-stream form "
          "for every size that contains it: pad with streams that the gate reads as 0)",
    generality="instance",
    source=SOURCE,
)
def _per_stream_only() -> list[Step]:
    h = sympy.Symbol("h", real=True)
    x = sympy.Matrix([1, 2])
    g = sympy.Matrix([sympy.Rational(1, 4), sympy.Rational(3, 4)])
    Nx = group_rms_norm(x.T, sympy.zeros(1, 2), 0).T
    x_in = sympy.Matrix([g[0] * Nx[0], g[1] * Nx[1]])
    solutions = sympy.solve(list(h * x - x_in), h, dict=True)
    if solutions:
        raise ProofFailure(f"a per-stream h_pre exists: {solutions}")
    h0 = sympy.solve(h * x[0] - x_in[0], h)[0]
    root = sympy.sqrt(sympy.Rational(5, 2))
    return [
        require_equal("N(x) at x = (1, 2), ε = 0", Nx, x / root),
        require_equal("the first entry forces h_pre = g_0 N_0 / x_0", h0, 1 / (4 * root)),
        require_equal("then the second entry misses by (g_0 − g_1) x_1 / √(5/2) ≠ 0",
                      h0 * x[1] - x_in[1], -1 / root),
        prose("so no scalar h_pre reads this x_in (sympy.solve finds no solution): the "
              "per-stream quantities h_pre, the identity probe h_post (h_preᵀ X)ᵀ solved for "
              "h_pre, and ∂L/∂h_pre = X g_in (backward.closed_form) have no gated counterpart; "
              "the H_res probe X'(F ≡ 0) = H_res X, the write probe X'(F ≡ c) − X'(F ≡ 0) = "
              "h_post cᵀ and the identity probe X'(F = id) − X'(F ≡ 0) = h_post x_inᵀ hold for "
              "every read map"),
    ]


def _sigma_slope(self: Any, argindex: int = 1) -> Any:
    """dσ/dx = σ (1 − σ)."""
    return self * (1 - self)


def _sigma_value(self: Any, prec: int) -> Any:
    return sigmoid(self.args[0])._eval_evalf(prec)


Sigma: Any = type("Sigma", (sympy.Function,), {
    "fdiff": _sigma_slope, "_eval_evalf": _sigma_value,
    "__doc__": "σ as an opaque sympy function whose derivative is σ(1 − σ) (proven for "
               "1/(1 + e^{−x}) in ``gated.read_backward``); it evaluates numerically as "
               "1/(1 + e^{−x}). Differentiating through it keeps the expressions polynomial in "
               "σ(·), so the exact backward check expands instead of simplifying nested "
               "exponentials."})
"""The opaque σ (see its docstring)."""


def _silu_slope(a: sympy.Expr, act: Any = sigmoid) -> sympy.Expr:
    """silu'(a) = σ(a) (1 + a (1 − σ(a)))."""
    return act(a) * (1 + a * (1 - act(a)))


def read_backward(Nm: sympy.Matrix, down: sympy.Matrix, up: sympy.Matrix, W: sympy.Matrix,
                  upstream: sympy.Matrix, z: sympy.Matrix, J: sympy.Matrix,
                  act: Activation = sigmoid) -> dict[str, sympy.Matrix]:
    """The closed-form backward of the gated step ``X' = X + h_post zᵀ`` (``z = F(x_in)``, J the
    branch Jacobian at x_in) through the read, the gate and the inject, as a function of the
    normalised state ``Nm`` (n×d), for the upstream gradient ``upstream = G' = ∂L/∂X'``:

        g_z = G'ᵀ h_post,  g_in = Jᵀ g_z,  g_h = G' z,  g_ℓ = g_h ⊙ h_post ⊙ (1 − h_post/2)
        g_G = N ⊙ g_in / n (per stream),  g_v = g_G ⊙ G ⊙ (1 − G),  g_a = silu'(a) ⊙ Uᵀ vec(g_v)
        g_N = G ⊙ g_in / n + mat(Dᵀ g_a / n + Wᵀ g_ℓ / n)

    with a = D vec(N) / n, ℓ = W vec(N) / n. Returns ``grad_N`` (n×d) and ``grad_W``
    (n×nd: g_ℓ vec(N)ᵀ / n).
    """
    n, d = Nm.shape
    G = gate(Nm, down, up, act)
    h = inject(Nm, W, act)
    g_in = J.T * (upstream.T * h)
    g_h = upstream * z
    g_l = sympy.Matrix([g_h[s] * h[s] * (1 - h[s] / 2) for s in range(n)])
    g_G = sympy.Matrix(n, d, lambda s, k: Nm[s, k] * g_in[k] / n)
    g_v = _flat(sympy.Matrix(n, d, lambda s, k: g_G[s, k] * G[s, k] * (1 - G[s, k])))
    a = down * _flat(Nm) / n
    g_a = sympy.Matrix([_silu_slope(a[i], act) * (up.T * g_v)[i] for i in range(a.shape[0])])
    flat = (down.T * g_a + W.T * g_l) / n
    g_N = sympy.Matrix(n, d, lambda s, k: G[s, k] * g_in[k] / n + flat[s * d + k])
    return {"grad_N": g_N, "grad_W": g_l * _flat(Nm).T / n}


def norm_backward(x: sympy.Matrix, w: sympy.Matrix, eps: sympy.Expr,
                  g: sympy.Matrix) -> dict[str, sympy.Matrix]:
    """The backward of one stream's RMSNorm with weight ``1 + w`` (``x``, ``w``, ``g`` 1×d; g
    the cotangent of N): with ρ = √(mean_k x_k² + ε) and ŷ = (1 + w) ⊙ g,
    ``grad_x = (ŷ − x (x · ŷ) / (d ρ²)) / ρ`` and ``grad_w = g ⊙ x / ρ`` (both 1×d)."""
    d = x.shape[1]
    rho2 = sum(x[k] ** 2 for k in range(d)) / d + eps
    rho = sympy.sqrt(rho2)
    y = sympy.Matrix(1, d, lambda _, k: (1 + w[k]) * g[k])
    dot = sum(x[k] * y[k] for k in range(d))
    return {"grad_x": sympy.Matrix(1, d, lambda _, k: (y[k] - x[k] * dot / (d * rho2)) / rho),
            "grad_w": sympy.Matrix(1, d, lambda _, k: g[k] * x[k] / rho)}


BACKWARD_N, BACKWARD_D, BACKWARD_R = 2, 2, 1
NORM_D = (1, 2, 3)


@theorem(
    "gated.read_backward",
    "The gated step X' = X + h_post F(x_in)ᵀ has the closed-form backward ∂L/∂X = G' + "
    "(per stream) the RMSNorm backward of g_N, with g_N = G ⊙ g_in / n + mat(Dᵀ g_a + Wᵀ g_ℓ)/n "
    "(g_in = Jᵀ G'ᵀ h_post, g_ℓ = G' z ⊙ h_post ⊙ (1 − h_post/2), g_a = silu'(a) ⊙ Uᵀ(g_G ⊙ G ⊙ "
    "(1 − G)), g_G = N ⊙ g_in / n), and the norm's backward (ŷ − x (x·ŷ)/(d ρ²))/ρ, "
    "ŷ = (1 + w) ⊙ g_N; ∂L/∂W = g_ℓ vec(N)ᵀ / n, ∂L/∂w = g_N ⊙ X / ρ.",
    assumptions=(),
    setting=("ε > 0 the norm's epsilon; the branch is affine, F(x) = A x + c: the derivative "
             "at a point depends on F only through z = F(x_in) and J = ∂F/∂x there, so this "
             "covers every differentiable F; L = Σ G' ⊙ X' for any upstream G'",
             "X feeds the bypass (X' = X + …, giving G') and the norm; the norm's output N "
             "feeds the gate, the read and the inject (giving g_N); the chain rule adds them"),
    cases="the read/gate/inject part at n = 2, d = 2, r = 1 (every entry a symbol); the norm "
          "part per stream at d in {1, 2, 3}",
    generality="explicit sizes",
    source=SOURCE,
)
def _read_backward() -> list[Step]:
    n, d, r = BACKWARD_N, BACKWARD_D, BACKWARD_R
    Nm = symbol_matrix("N", n, d)
    down, up, W = symbol_matrix("D", r, n * d), symbol_matrix("U", n * d, r), \
        symbol_matrix("W", n, n * d)
    A, c = symbol_matrix("A", d, d), symbol_vector("c", d)
    upstream = symbol_matrix("Gp", n, d)
    x_in = gated_read(Nm, gate(Nm, down, up, Sigma))
    z = A * x_in + c
    write = inject(Nm, W, Sigma) * z.T
    loss = sum(upstream[s, k] * write[s, k] for s in range(n) for k in range(d))
    closed = read_backward(Nm, down, up, W, upstream, z, A, Sigma)
    x = sympy.Symbol("x", real=True)
    eps = sympy.Symbol("epsilon", positive=True)
    steps = [
        require_equal("σ'(x) = σ(x)(1 − σ(x)) for σ(x) = 1/(1 + e^{−x}) (the rule the opaque σ "
                      "below differentiates by)", sympy.diff(sigmoid(x), x),
                      sigmoid(x) * (1 - sigmoid(x))),
        require_equal("silu'(x) = σ(x)(1 + x(1 − σ(x)))", sympy.diff(silu(x), x),
                      _silu_slope(x)),
        require_equal("∂L/∂N through the read, the gate and the inject (autodiff) is g_N",
                      sympy.Matrix(n, d, lambda s, k: sympy.diff(loss, Nm[s, k])),
                      closed["grad_N"]),
        require_equal("∂L/∂W is g_ℓ vec(N)ᵀ / n",
                      sympy.Matrix(n, n * d, lambda s, m: sympy.diff(loss, W[s, m])),
                      closed["grad_W"]),
    ]
    for size in NORM_D:
        xs, ws, gs = (symbol_matrix(name, 1, size) for name in ("x", "w", "g"))
        N_s = group_rms_norm(xs, ws, eps)
        inner = sum(gs[k] * N_s[k] for k in range(size))
        closed_norm = norm_backward(xs, ws, eps, gs)
        steps.append(require_equal(
            f"d = {size}: one stream's RMSNorm backward, ∂⟨g, N⟩/∂x",
            sympy.Matrix([[sympy.diff(inner, v) for v in xs]]), closed_norm["grad_x"]))
        steps.append(require_equal(
            f"d = {size}: ∂⟨g, N⟩/∂w = g ⊙ x / ρ",
            sympy.Matrix([[sympy.diff(inner, v) for v in ws]]), closed_norm["grad_w"]))
    steps.append(prose("by the chain rule ∂L/∂X_s = G'_s + (the norm backward of stream s at "
                       "g = g_N,s): the bypass and the norm are the two uses of X"))
    return steps


@theorem(
    "gated.constant_gate",
    "With a constant gate G ≡ 1 the gated read is the mean of the normalised streams, "
    "x_in = (1/n) Σ_s N_s; with the up projection U = 0 the gate is σ(0) = 1/2 and x_in = "
    "(1/(2n)) Σ_s N_s (G ≡ 1 itself is the limit of U → +∞ entries: σ < 1).",
    assumptions=(),
    setting=("N ∈ R^{n×d} the normalised state; G ∈ (0, 1)^{n×d} the gate",),
    cases="symbolic n, d (index form, entry k)",
    generality="all sizes",
    source=SOURCE,
)
def _constant_gate() -> list[Step]:
    read = _every(_G[_S, _K] * _NS[_S, _K]) / _N
    half = read.xreplace({_G[_S, _K]: sigmoid(sympy.Integer(0))})
    return [
        ("every n, d: G ≡ 1 gives the mean of the normalised streams",
         chain(r"x_{\mathrm{in},k}", read.xreplace({_G[_S, _K]: 1}),
               _every(_NS[_S, _K]) / _N)),
        ("every n, d: U = 0 gives G = σ(0) = 1/2 everywhere, half the mean",
         chain(r"x_{\mathrm{in},k}", half, split_sums(half),
               _every(_NS[_S, _K]) / (2 * _N))),
    ]


@theorem(
    "gated.n1_gated_prenorm",
    "At n = 1 the gated step is a gated pre-norm residual: x' = x + 2σ(w·N(x)) F(g(x) ⊙ N(x)) "
    "with g(x) = σ(U silu(D N(x))) and N(x) = (1 + w_N) ⊙ x / √(mean(x²) + ε): the mean over "
    "one stream is that stream, and the /n are /1.",
    assumptions=("The stream index satisfies 0 ≤ j ≤ n − 1.",),
    setting=("x ∈ R^d the one stream; G, N as in the module docstring",),
    cases="n = 1, symbolic d (index form, entry k); the whole step at d = 2, r = 1 with an "
          "arbitrary branch",
    generality="all sizes",
    source=SOURCE,
)
def _n1_gated_prenorm() -> list[Step]:
    one = {_N: 1}
    read = (_every(_G[_S, _K] * _NS[_S, _K]) / _N).xreplace(one)
    d, r = 2, 1
    x, wn = symbol_matrix("x", 1, d), symbol_matrix("w", 1, d)
    down, up, W = symbol_matrix("D", r, d), symbol_matrix("U", d, r), symbol_matrix("v", 1, d)
    eps = sympy.Symbol("epsilon", positive=True)
    Nx = group_rms_norm(x, wn, eps)
    step = x.T + inject(Nx, W)[0] * _branch(gated_read(Nx, gate(Nx, down, up)))
    g = (up * (down * Nx.T).applyfunc(silu)).applyfunc(sigmoid)
    prenorm = x.T + 2 * sigmoid((W * Nx.T)[0]) * _branch(
        sympy.Matrix([g[k] * Nx[k] for k in range(d)]))
    index = assume("0 ≤ j ≤ n − 1", replace={sympy.Le(_J, _N - 1): True})
    return [
        ("every d, n = 1: the mean over one stream is G_0 ⊙ N_0",
         chain(r"x_{\mathrm{in},k}", read, _G[0, _K] * _NS[0, _K], using=[index])),
        require_equal("d = 2, r = 1: the gated step at n = 1 is x + 2σ(w·N(x)) F(g ⊙ N(x))",
                      step, prenorm),
    ]


@theorem(
    "gated.init_scale",
    "At init the norm weight is 0 (transformers 5.23.0 _init_weights zeros "
    "Qwen4ExpTextRMSNorm.weight), so the scale 1 + w is 1 and the group norm is the plain "
    "per-stream RMSNorm N_s = X_s / √(mean_k X_sk² + ε).",
    assumptions=(),
    setting=("X ∈ R^{n×d}; ε > 0 the norm's epsilon",),
    cases="symbolic d (index form, entry k of one stream); the whole group norm at n = 2, "
          "d = 2",
    generality="all sizes",
    source=SOURCE,
)
def _init_scale() -> list[Step]:
    eps = sympy.Symbol("epsilon", positive=True)
    rho = sympy.sqrt(sympy.Sum(_X[_S, _J] ** 2, (_J, 0, _D - 1)) / _D + eps)
    X, w = symbol_matrix("X", 2, 2), symbol_matrix("w", 2, 2)
    plain = sympy.Matrix(2, 2, lambda s, k: X[s, k] / sympy.sqrt(
        (X[s, 0] ** 2 + X[s, 1] ** 2) / 2 + eps))
    return [
        ("every d: with w = 0 the scale (1 + w_sk) is 1",
         chain(r"N_{sk}", ((1 + _W[_S, _K]) * _X[_S, _K] / rho).xreplace({_W[_S, _K]: 0}),
               _X[_S, _K] / rho)),
        require_equal("n = 2, d = 2: the group norm at w = 0 is the per-stream RMSNorm",
                      group_rms_norm(X, w, eps).xreplace({v: 0 for v in w}), plain),
    ]


@theorem(
    "published.qwen4_exp_step",
    "Qwen4-exp's step, in its own layout (flattened state h ∈ R^{nd}, hc_norm.weight w ∈ R^{nd}, "
    "input_mix_weight_down D ∈ R^{r×nd}, input_mix_weight_up U ∈ R^{nd×r}, block_inject_weight "
    "W ∈ R^{n×nd}): h' = h + vec(2σ(W N / n) ⊗ F(mean_s(mat(σ(U silu(D N / n))) ⊙ mat(N))_s)) "
    "with N = group RMSNorm(h), is the general law with H_res = I, h_post = 2σ(W vec(N)/n) and "
    "the gated read x_in = (1/n) Σ_s G_s ⊙ N_s.",
    assumptions=(),
    setting=("ε > 0 the norm's epsilon (rms_norm_eps); r = hc_lowrank; streams are contiguous "
             "blocks of d in the flattened state (unflatten(-1, (n, d)))",),
    cases="n = 2, d = 2, r = 1: symbolic state and weights, an arbitrary branch",
    generality="explicit sizes",
    source=SOURCE,
)
def _qwen4_exp_step() -> list[Step]:
    n, d, r = 2, 2, 1
    h = symbol_vector("h", n * d)
    w = symbol_vector("w", n * d)
    down, up, W = symbol_matrix("D", r, n * d), symbol_matrix("U", n * d, r), \
        symbol_matrix("W", n, n * d)
    eps = sympy.Symbol("epsilon", positive=True)
    # the layout's own computation, on the flat vector
    flat_norm = sympy.Matrix([
        (1 + w[i]) * h[i] / sympy.sqrt(sum(h[(i // d) * d + k] ** 2 for k in range(d)) / d + eps)
        for i in range(n * d)])
    mix = (up * (down * flat_norm / n).applyfunc(silu)).applyfunc(sigmoid)
    mixed = sympy.Matrix([sum(mix[s * d + k] * flat_norm[s * d + k] for s in range(n)) / n
                          for k in range(d)])
    inj = (W * flat_norm / n).applyfunc(lambda v: 2 * sigmoid(v))
    z = _branch(mixed)
    layout = sympy.Matrix([h[s * d + k] + inj[s] * z[k] for s in range(n) for k in range(d)])
    # the general law on X = mat(h)
    X, Wm = sympy.Matrix(n, d, list(h)), sympy.Matrix(n, d, list(w))
    Nm = group_rms_norm(X, Wm, eps)
    x_in = gated_read(Nm, gate(Nm, down, up))
    law = sympy.eye(n) * X + inject(Nm, W) * _branch(x_in).T
    return [
        require_equal("the layout's normalised state is vec(N) of the group norm", flat_norm,
                      _flat(Nm)),
        require_equal("mean_s(G ⊙ N) of the layout is the gated read x_in", mixed, x_in),
        require_equal("the layout's step is vec(H_res X + h_post F(x_in)ᵀ) with H_res = I",
                      layout, _flat(law)),
    ]
