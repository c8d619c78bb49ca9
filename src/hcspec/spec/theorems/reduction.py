"""n = 1 reductions: pre-norm is static HC, post-norm is not (but is dynamic HC).

Theorems: ``reduction.prenorm_forward``, ``reduction.prenorm_backward``,
``reduction.postnorm_unreachable_static``, ``reduction.postnorm_dynamic``.
Sources: HC arXiv:2409.19606 §3.1 Eq. 15–16 and App. G Eq. 30–41.
"""

from __future__ import annotations

import sympy
from sympy.matrices.expressions.matexpr import MatrixElement

from hcspec.spec import formulas, network, norms
from hcspec.spec.checks import (
    chain,
    instantiate,
    require_equal,
    require_relation,
    require_true,
    symbol_matrix,
    symbol_vector,
)
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import Given, assume, hypothesis, prose
from hcspec.spec.sums import split_sums
from hcspec.spec.theorems.backprop import frobenius_loss, generic_map, gradient
from hcspec.spec.theorems.norm import _D as _NORM_D
from hcspec.spec.theorems.norm import _I as _NORM_I
from hcspec.spec.theorems.norm import _K as _NORM_K
from hcspec.spec.theorems.norm import _L as _NORM_L
from hcspec.spec.theorems.norm import _X as _NORM_X
from hcspec.spec.theorems.norm import _index_layer_norm, _index_rms_norm

HC_PRENORM = sympy.Matrix([[0, 1], [1, 1]])
"""HC Eq. 15: the pre-norm residual as a (1+1)×(1+1) HC matrix."""

UNIT = network.from_paper(HC_PRENORM)


def _unit_sublayer(d: int, branch_input: sympy.Matrix | None = None
                   ) -> tuple[sympy.Matrix, sympy.Matrix, sympy.Matrix]:
    """(x, x_in, X') for n = 1 with unit weights and the branch F = f∘N (f, N arbitrary)."""
    x = symbol_vector("x", d)
    c = formulas.connection_symbols(1, d)
    x_in = instantiate(formulas.aggregate(c), {c.X: x.T, c.h_pre: UNIT.h_pre})
    u = branch_input if branch_input is not None else x_in
    z = generic_map("f", generic_map("N", u, d), d)
    new_state = instantiate(formulas.forward(c), {c.X: x.T, c.h_post: UNIT.h_post,
                                                  c.H_res: UNIT.H_res, c.z: z})
    return x, x_in, new_state


def _unit_symbols() -> tuple[formulas.ConnectionSymbols, dict[sympy.Expr, sympy.Expr]]:
    """Symbols of one sublayer with n = 1 and symbolic d, and the unit weights [1] as 1×1
    identities."""
    c = formulas.connection_symbols(1, formulas.d)
    one = sympy.Identity(1)
    return c, {c.h_pre: one, c.h_post: one, c.H_res: one}


def _prenorm_forward_any_d() -> list[Step]:
    """x_in = Xᵀ [1] = x and X' = [1] X + [1] zᵀ = (x + z)ᵀ for symbolic d."""
    c, unit = _unit_symbols()
    x_in = formulas.aggregate(c).xreplace(unit)
    new_state = formulas.forward(c).xreplace(unit)
    require_equal("x_in = Xᵀ [1] = xᵀ as a column, symbolic d", x_in, c.X.T)
    require_equal("X' = X + zᵀ, symbolic d", new_state, c.X + c.z.T)
    units = Given("h_pre = h_post = H_res = [1]", tuple(unit.items()))
    return [("every d: the branch reads the stream itself (X = xᵀ is 1×d)",
             chain(formulas.aggregate(c), x_in, c.X.T, using=[units])),
            ("every d: with z = f(Norm(x)) the sublayer writes back x + z",
             chain(formulas.forward(c), new_state, c.X + c.z.T, using=[units]))]


def _prenorm_backward_any_d() -> list[Step]:
    """The closed form at n = 1 for symbolic d: g_xᵀ = G' + g_inᵀ with g_in = Jᵀ G'ᵀ, and the
    derivative of L = tr(G'ᵀ X') with the branch linearised (z = z₀ + J x) gives the same."""
    c, unit = _unit_symbols()
    J, z0 = sympy.MatrixSymbol("J", formulas.d, formulas.d), sympy.MatrixSymbol(
        "z_0", formulas.d, 1)
    g_z = formulas.branch_cotangent(c).xreplace(unit)
    closed = formulas.grad_X(c).xreplace({**unit, c.g_in: J.T * g_z})
    step = require_equal("closed form at n = 1: g_x = g' + Jᵀ g', symbolic d", closed.T,
                         c.G.T + J.T * c.G.T)
    loss = sympy.Trace(c.G.T * formulas.forward(c).xreplace({**unit, c.z: z0 + J * c.X.T}))
    derived = loss.diff(c.X)
    require_equal("equals ∂L/∂X of L = tr(G'ᵀ X'), symbolic d", derived, closed)
    return [step, ("every d: differentiate L = tr(G'ᵀ X') with z = z₀ + J x (J the branch "
                   "Jacobian at x)", chain(sympy.Symbol(r"\frac{\partial L}{\partial X}"),
                                           derived, closed))]


@theorem(
    "reduction.prenorm_forward",
    "At n = 1 with h_pre = h_post = H_res = [1] (HC = [[0, 1], [1, 1]]) the HC sublayer is the "
    "pre-norm residual x + f(Norm(x)).",
    assumptions=(),
    setting=(
        "The branch is F = f∘Norm with f and Norm arbitrary maps R^d → R^d.",
    ),
    cases="symbolic d (MatrixSymbol algebra with 1×1 unit weights); examples with arbitrary f, "
          "Norm at d in {1,3}",
    generality="all sizes",
    source="HC arXiv:2409.19606 §3.1 Eq. 15, App. G Eq. 30–33",
)
def _prenorm_forward() -> list[Step]:
    paper = network.from_paper(sympy.Matrix([[0, 1], [1, 1]]))
    read_from = sympy.Symbol(r"[h_{pre} \mid h_{post} \mid H_{res}]_{\text{Eq. 15}}")
    weights = sympy.Matrix.hstack(paper.h_pre, paper.h_post, paper.H_res)
    unit = sympy.Matrix.hstack(UNIT.h_pre, UNIT.h_post, UNIT.H_res)
    steps: list[Step] = [require_equal(
        "HC_PreNorm = [[0, 1], [1, 1]] (Eq. 15) read in row form: h_pre = h_post = H_res = [1]",
        weights, unit, show=(read_from, unit), where={read_from: weights}),
        *_prenorm_forward_any_d()]
    for d in (1, 3):
        x, x_in, new_state = _unit_sublayer(d)
        read_name, write_name = sympy.Symbol(r"x_{in}"), sympy.Symbol(r"X'^{T}")
        closed_name = sympy.Symbol(rf"x + f(N(x)),\ x = (x_{{0}}, \dots, x_{{{d - 1}}})^{{T}}")
        read = require_equal(f"x_in = x, d={d}", x_in, x, show=(read_name, x),
                             where={read_name: x_in})
        f_of_norm = generic_map("f", generic_map("N", x, d), d)
        write = require_equal(f"X'ᵀ = x + f(N(x)), d={d}", new_state.T, x + f_of_norm,
                              show=(write_name, closed_name),
                              where={write_name: new_state.T, closed_name: x + f_of_norm})
        if d == 3:
            steps += [(f"example: {read[0]}", read[1]), (f"example: {write[0]}", write[1])]
    return steps


@theorem(
    "reduction.prenorm_backward",
    "At n = 1 with unit weights the closed-form backward gives g_x = g' + Jᵀ g' (J the Jacobian of "
    "F = f∘Norm at x), and this equals the derivative of L = g'ᵀ (x + F(x)).",
    assumptions=(),
    setting=(
        "F = f∘Norm arbitrary and differentiable; g' the upstream gradient.",
    ),
    cases="symbolic d (matrix calculus, the branch entering through its Jacobian J); example "
          "with arbitrary f, Norm at d = 2",
    generality="all sizes",
    source="HC arXiv:2409.19606 §3.1 Eq. 15; backward.closed_form at n = 1",
)
def _prenorm_backward() -> list[Step]:
    steps: list[Step] = _prenorm_backward_any_d()
    for d in (2,):
        x, _, new_state = _unit_sublayer(d)
        g = symbol_vector("g", d)
        F = generic_map("f", generic_map("N", x, d), d)
        J = F.jacobian(x)
        c = formulas.connection_symbols(1, d)
        g_z = instantiate(formulas.branch_cotangent(c), {c.G: g.T, c.h_post: UNIT.h_post})
        closed = instantiate(formulas.grad_X(c), {c.G: g.T, c.H_res: UNIT.H_res,
                                                  c.h_pre: UNIT.h_pre, c.g_in: J.T * g_z})
        require_equal(f"closed form at n = 1: g_x = g' + Jᵀ g', d={d}", closed.T, g + J.T * g)
        require_equal(f"equals ∂L/∂x of L = g'ᵀ X'ᵀ, d={d}",
                      gradient(frobenius_loss(g.T, new_state), x), closed.T)
    return steps


_E = sympy.Symbol("e", integer=True, nonnegative=True)
"""d − 2 ≥ 0: the witness x₀ = e_0 − e_1 needs d ≥ 2."""


def _witness_entry(norm_entry: sympy.Expr, scale: int) -> sympy.Expr:
    """Entry 0 of an index-form Norm (norm module: x indexed by k, d symbolic) at
    x = scale·(e_0 − e_1), with d = e + 2 ≥ 2."""
    x0 = {index: scale * (sympy.KroneckerDelta(index, 0) - sympy.KroneckerDelta(index, 1))
          for index in (_NORM_I, _NORM_K, _NORM_L)}
    value = norm_entry.xreplace({_NORM_X[a]: b for a, b in x0.items()})
    value = value.subs(_NORM_D, _E + 2).subs(_NORM_I, 0)
    value = value.replace(lambda e: isinstance(e, sympy.Sum), split_sums).doit()  # Σ δ's
    return sympy.simplify(sympy.piecewise_fold(value))


def _unreachable_every_size(eps: sympy.Expr) -> list[Step]:
    """Symbolic n and d ≥ 2: with F ≡ 0 the state is (H_res 1) xᵀ (MatrixSymbols), and the
    witness x₀ = e_0 − e_1 (index form) makes r x = Norm(x) at x₀ and 2x₀ contradictory:
    entry 0 asks r = a and 2r = b with a² − (b/2)² > 0.

    Raises:
        ProofFailure: when a step does not reduce as claimed.
    """
    n, d = formulas.n, formulas.d
    one, x = sympy.MatrixSymbol(r"\mathbf{1}", n, 1), sympy.MatrixSymbol("x", d, 1)
    c = formulas.connection_symbols()
    state = formulas.forward(c).xreplace({c.X: one * x.T, c.z: sympy.ZeroMatrix(d, 1)})
    require_equal("F ≡ 0: X' = (H_res 1) xᵀ, symbolic n, d", state, (c.H_res * one) * x.T)
    steps: list[Step] = [
        ("every n and d: with F ≡ 0 and X = 1 xᵀ every stream is a constant multiple of xᵀ "
         "(r_i = (H_res 1)_i; the stream sum has r = 1ᵀ H_res 1)",
         chain(state, (c.H_res * one) * x.T)),
    ]
    for name, (entry, *_) in (("LayerNorm", _index_layer_norm(_NORM_X, eps)),
                              ("RMSNorm", _index_rms_norm(_NORM_X, eps))):
        a, b = _witness_entry(entry, 1), _witness_entry(entry, 2)
        norm = norms.layer_norm if name == "LayerNorm" else norms.rms_norm
        require_equal(f"{name}: a and b are entry 0 of Norm(x₀) and Norm(2x₀) at d = 2",
                      sympy.Matrix([a, b]).xreplace({_E: 0}),
                      sympy.Matrix([norm(X0, eps)[0], norm(2 * X0, eps)[0]]))
        gap = sympy.cancel(a**2 - (b / 2) ** 2)
        if gap.is_positive is not True:
            raise ProofFailure(f"{name}: r = {a} and 2r = {b} are not provably contradictory "
                               f"(a² − (b/2)² = {gap})")
        at_one = sympy.Symbol(r"N(x_{0})_{0}")
        at_two = sympy.Symbol(r"N(2 x_{0})_{0}")
        # by hand: x₀ and 2x₀ have mean 0, so both norms divide entry 0 (1, resp. 2) by
        # sqrt(Σ_k x_k²/d + ε) with Σ_k x_k² = 2 (resp. 8) and d = e + 2
        by_hand_one = 1 / sympy.sqrt(sympy.Integer(2) / (_E + 2) + eps)
        by_hand_two = 2 / sympy.sqrt(sympy.Integer(8) / (_E + 2) + eps)
        steps += [
            require_relation(f"{name}, every d ≥ 2 (d = e + 2, e ≥ 0), ε ≥ 0: entry 0 of "
                             "r x = Norm(x) at x₀ = e_0 − e_1 asks r = N(x₀)₀, computed from "
                             "the index-form Norm; by hand, 1/√(2/d + ε)",
                             sympy.Eq(at_one, by_hand_one, evaluate=False), where={at_one: a}),
            require_relation("and at 2x₀ asks 2r = N(2x₀)₀ = 2/√(8/d + ε)",
                             sympy.Eq(at_two, by_hand_two, evaluate=False), where={at_two: b}),
            require_true("but a² − (b/2)² > 0 (Norm is scale invariant, r x is linear): no "
                         f"constant r exists for {name}", gap.is_positive is True,
                         sympy.StrictGreaterThan(gap, 0, evaluate=False))]
    return steps


X0 = sympy.Matrix([1, -1])
"""The witness x₀ = (1, −1): zero mean, unit variance (d = 2)."""


@theorem(
    "reduction.postnorm_unreachable_static",
    "For d ≥ 2, no constant (h_pre, h_post, H_res) makes the HC sublayer equal Norm(x + F(x)) "
    "for all x and F: with F ≡ 0 each stream is r xᵀ for a constant r, and r x = Norm(x) at x₀ "
    "and 2x₀ has no solution because Norm is scale invariant but r x is linear. (At d = 1 "
    "LayerNorm ≡ 0 is reached by zero weights, so d ≥ 2 is needed.)",
    assumptions=(
        "d ≥ 2 (the witness x₀ = e_0 − e_1 needs two entries).",
        "Any ε ≥ 0.",
    ),
    setting=(
        "Norm is LayerNorm or RMSNorm without affine; d = 2 witness x₀ = (1, −1).",
        "Input replicated, X = 1_n xᵀ; the claim is read on any one stream or on the stream sum "
        "(both are r xᵀ with r a constant: (H_res 1)_i or 1ᵀ H_res 1).",
    ),
    cases="every n and every d ≥ 2 (F ≡ 0 form with MatrixSymbols; the witness x₀ = e_0 − e_1 in "
          "index form); examples: the F ≡ 0 form for n in {1,2,3,4}, d = 2, and the d = 2 "
          "system solved for a generic scalar r",
    generality="all sizes",
    source="HC arXiv:2409.19606 §3.1 Eq. 16 (post-norm needs input-dependent weights), App. G",
)
def _postnorm_unreachable_static() -> list[Step]:
    assume("d ≥ 2")  # the witness below has two entries: the proof uses the side condition
    eps = hypothesis("ε ≥ 0", "epsilon", weaker={"real": True}, nonnegative=True)
    steps: list[Step] = _unreachable_every_size(eps)
    x1, f1 = sympy.symbols("x f", real=True)
    steps.append(require_equal("the side condition is needed: at d = 1 LayerNorm(x + F(x)) ≡ 0, "
                               "which zero weights reach", norms.layer_norm(
                                   sympy.Matrix([x1 + f1]), sympy.Symbol("epsilon", positive=True)),
                               sympy.zeros(1, 1)))
    for n in (1, 2, 3, 4):
        weights = network.ConnectionWeights(symbol_vector("p", n), symbol_vector("q", n),
                                            symbol_matrix("H", n, n))
        x = symbol_vector("x", 2)
        trace = network.run_stack(network.replicate(x, n), [weights],
                                  [lambda u: sympy.zeros(2, 1)])
        step = require_equal(f"F ≡ 0: X' = (H_res 1) xᵀ, n={n}", trace.states[1],
                             weights.H_res * sympy.ones(n, 1) * x.T)
        if n == 2:
            steps.append(("example, " + step[0], step[1]))
    r = sympy.Symbol("r", real=True)
    for name, norm in (("LayerNorm", norms.layer_norm), ("RMSNorm", norms.rms_norm)):
        equations = list(r * X0 - norm(X0, eps)) + list(r * 2 * X0 - norm(2 * X0, eps))
        solutions = sympy.solve(equations, [r], dict=True)
        if solutions:
            raise ProofFailure(f"{name}: a constant r solves r x = Norm(x) at x₀, 2x₀: {solutions}")
        steps.append(require_true(
            f"example, {name}, d = 2, ε ≥ 0: r x₀ = Norm(x₀) and r (2x₀) = Norm(2x₀) has no "
            "solution r",
            not solutions,
            sympy.Eq(sympy.Symbol(r"\{r : r x_0 = N(x_0),\ 2 r x_0 = N(2 x_0)\}"),
                     sympy.EmptySet, evaluate=False),
            where={sympy.Symbol(r"\{r : r x_0 = N(x_0),\ 2 r x_0 = N(2 x_0)\}"):
                   sympy.FiniteSet(*(found[r] for found in solutions))}))
        if name == "LayerNorm":
            steps.insert(len(steps) - 1, prose(
                "the system (LayerNorm, x₀ = (1, −1)), entry 0 at x₀ and at 2x₀: "
                + ", ".join(f"{e} = 0" for e in equations[:1] + equations[2:3])))
    return steps


def _zero_mean(name: str, d: int) -> sympy.Matrix:
    v = symbol_vector(name, d)
    return v.subs(v[d - 1], -sum(v[: d - 1], sympy.Integer(0)))


_F_IDX = sympy.IndexedBase("f", real=True)


def _postnorm_every_d(eps: sympy.Expr) -> list[Step]:
    """Symbolic d, index form: Eq. 39 (σ²_{x+F} = σ_x² + σ_F² + 2σ_xF), and X'ᵀ = Norm(x + F(x))
    for LayerNorm (x, F(x) of zero mean) and RMSNorm (second moments about 0), the sublayer
    evaluated from :func:`formulas.forward` at n = 1 with h_post = H_res = w.

    Raises:
        ProofFailure: when a step does not reduce as claimed.
    """
    d = formulas.d
    x, f, k, i = _NORM_X, _F_IDX, _NORM_K, _NORM_I

    def mean(entry: sympy.Expr) -> sympy.Expr:
        return sympy.Sum(entry, (k, 0, d - 1)) / d

    mx, mf = mean(x[k]), mean(f[k])
    lhs = mean((x[k] + f[k] - mean(x[k] + f[k])) ** 2)
    rhs = mean((x[k] - mx) ** 2) + mean((f[k] - mf) ** 2) + 2 * mean((x[k] - mx) * (f[k] - mf))
    if sympy.expand(split_sums(split_sums(lhs) - split_sums(rhs))) != 0:
        raise ProofFailure("Eq. 39 does not hold in index form")
    steps: list[Step] = [("Eq. 39, every d: μ_{x+F} = μ_x + μ_F and the square expands under Σ_k "
                          "(linearity): σ²_{x+F} = σ_x² + σ_F² + 2σ_xF, σ_xF the covariance",
                          chain(sympy.Symbol(r"\sigma^2_{x+F}"), lhs, rhs))]

    c = formulas.connection_symbols(1, d)
    w = sympy.Symbol("w", positive=True)
    element = formulas.forward(c).xreplace({c.H_res: w * sympy.Identity(1),
                                            c.h_post: w * sympy.Identity(1)}).doit()[0, i]
    sublayer = element.replace(
        lambda e: isinstance(e, MatrixElement) and e.parent == c.X, lambda e: x[e.j]).replace(
        lambda e: isinstance(e, MatrixElement) and e.parent == c.z, lambda e: f[e.i])
    second = {"x": mean(x[k] ** 2), "F": mean(f[k] ** 2), "xF": mean(x[k] * f[k])}
    weight = 1 / sympy.sqrt(second["x"] + second["F"] + 2 * second["xF"] + eps)
    zero_mean = assume("x and F(x) have zero mean", replace={sympy.Sum(x[k], (k, 0, d - 1)): 0,
                                                              sympy.Sum(f[k], (k, 0, d - 1)): 0})
    s_idx = sympy.IndexedBase("s", real=True)
    for name, (entry, *_) in (("LayerNorm", _index_layer_norm(s_idx, eps)),
                              ("RMSNorm", _index_rms_norm(s_idx, eps))):
        summed = entry.replace(lambda e: isinstance(e, sympy.Indexed) and e.base == s_idx,
                               lambda e: x[e.indices[0]] + f[e.indices[0]])
        norm = summed.replace(lambda e: isinstance(e, sympy.Sum),
                              lambda e: split_sums(e.xreplace({e.limits[0][0]: k}))
                              )
        norm = zero_mean.apply(norm)
        norm = zero_mean.apply(norm.replace(lambda e: isinstance(e, sympy.Sum), split_sums))
        weighted = Given("w = 1/√(σ_x² + σ_F² + 2σ_xF + ε) (second moments)", ((w, weight),))
        steps.append((f"{name}, every d: with h_post = H_res = w = 1/sqrt(σ_x² + σ_F² + 2σ_xF + ε) "
                      "(second moments; zero means for LayerNorm) the sublayer's entry i is "
                      f"{name}(x + F(x))_i (the last side)",
                      chain(sympy.Symbol("X'_{0,i}"), sublayer, w * (x[i] + f[i]), norm,
                            using=[weighted])))
    return steps


@theorem(
    "reduction.postnorm_dynamic",
    "At n = 1 the input-dependent weights h_pre = 1, h_post = H_res = 1/sqrt(σ_x² + σ_F² + 2σ_xF "
    "+ ε) (HC Eq. 16) make the HC sublayer exactly Norm(x + F(x)).",
    assumptions=(
        "For LayerNorm, x and F(x) have zero mean (paper §3.1 / App. G: Norm's affine part is "
        "absorbed into the next layer and its re-centring into the current one).",
    ),
    setting=(
        "Norm is LayerNorm without affine with population statistics, or RMSNorm; any ε (ε ≥ 0 "
        "in practice; the identity holds as written for every ε).",
        "σ_x², σ_F² are the variances of x and F(x) and σ_xF their covariance; the weights depend "
        "on x through F(x) (not the tanh form of DHC Eq. 10–13).",
        "RMSNorm variant: no zero-mean assumption, second moments about 0.",
        "The branch F is applied to x directly (post-norm has no norm before F).",
    ),
    cases="symbolic d in index form (Eq. 39 and both norms); examples: LayerNorm at d in "
          "{2,3,4} with zero-mean x, F(x); RMSNorm at d in {1,2,3}; Eq. 39 for d in {1,2,3,4}",
    generality="all sizes",
    source="HC arXiv:2409.19606 §3.1 Eq. 16, App. G Eq. 34–41",
)
def _postnorm_dynamic() -> list[Step]:
    eps = sympy.Symbol("epsilon", nonnegative=True)
    steps: list[Step] = _postnorm_every_d(eps)
    for d in (1, 2, 3, 4):
        x, f = symbol_vector("x", d), symbol_vector("f", d)
        mx, mf = norms.mean(x), norms.mean(f)
        cov = norms.mean((x - mx * sympy.ones(d, 1)).multiply_elementwise(
            f - mf * sympy.ones(d, 1)))
        require_equal(f"Eq. 39: σ²_(x+F) = σ_x² + σ_F² + 2σ_xF, d={d}",
                      norms.variance(x + f), norms.variance(x) + norms.variance(f) + 2 * cov)
    cases = [("LayerNorm", norms.layer_norm, d, True) for d in (2, 3, 4)]
    cases += [("RMSNorm", norms.rms_norm, d, False) for d in (1, 2, 3)]
    for name, norm, d, centred in cases:
        x = _zero_mean("x", d) if centred else symbol_vector("x", d)
        f = _zero_mean("f", d) if centred else symbol_vector("f", d)
        sigma_x2, sigma_f2 = norms.mean_square(x), norms.mean_square(f)
        sigma_xf = norms.mean(x.multiply_elementwise(f))
        w = 1 / sympy.sqrt(sigma_x2 + sigma_f2 + 2 * sigma_xf + eps)
        c = formulas.connection_symbols(1, d)
        weights = network.ConnectionWeights(sympy.Matrix([[1]]), sympy.Matrix([[w]]),
                                            sympy.Matrix([[w]]))
        new_state = instantiate(formulas.forward(c), {c.X: x.T, c.h_post: weights.h_post,
                                                      c.H_res: weights.H_res, c.z: f})
        step = require_equal(f"{name}: X'ᵀ = Norm(x + F(x)), d={d}", new_state.T, norm(x + f, eps))
        if (name, d) == ("LayerNorm", 2):
            steps.append(("example, " + step[0], step[1]))
    return steps
