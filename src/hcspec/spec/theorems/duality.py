"""Cross-layer structure of HC stacks: unrolled connection weights and the sequential–parallel
duality (the paper's n = 2 matrices and their general-n forms, App. H Eq. 42 and 54–55).

Theorems: ``unroll.connection_weights``, ``unroll.gradient``, ``duality.sequential``,
``duality.parallel``.
Sources: HC arXiv:2409.19606 §3.2 Eq. 17–19 (Fig. 4), App. H Eq. 42–55, §4.5 Eq. 20 / App. F
Eq. 27; mHC arXiv:2512.24880 Eq. 4.
"""

from __future__ import annotations

import sympy

from hcspec.spec import doubly_stochastic as ds
from hcspec.spec import formulas, network
from hcspec.spec.checks import (
    chain,
    evaluate,
    require_equal,
    require_relation,
    require_size,
    symbol_matrix,
    symbol_vector,
)
from hcspec.spec.network import ConnectionWeights
from hcspec.spec.registry import ProofFailure, Step, theorem
from hcspec.spec.steps import Given, assume, cite, from_lemma, induction, lemma_rewrite, prose
from hcspec.spec.sums import split_sums
from hcspec.spec.theorems import lemmas

D = 3  # feature size of the stacks below: never equal to n = 2 (catches transposition slips)


def generic_branch(k: int) -> network.Branch:
    """An arbitrary differentiable sublayer T_k: R^d → R^d (undefined functions T^k_i)."""

    def branch(x: sympy.Matrix) -> sympy.Matrix:
        return sympy.Matrix(x.shape[0], 1, lambda i, _: sympy.Function(f"T^{k}_{i}")(*x))

    return branch


def free_branch(k: int) -> network.Branch:
    """A sublayer whose output is a fresh symbol vector z_k (the unrolled identity is linear in
    the branch outputs, so it holds for any values they take)."""

    def branch(x: sympy.Matrix) -> sympy.Matrix:
        return symbol_vector(f"z^{k}", x.shape[0])

    return branch


def symbolic_weights(n: int, k: int) -> ConnectionWeights:
    """Fully symbolic weights of sublayer k: p^k (h_pre), q^k (h_post), H^k (H_res)."""
    return ConnectionWeights(symbol_vector(f"p^{k}", n), symbol_vector(f"q^{k}", n),
                             symbol_matrix(f"H^{k}", n, n))


def prenorm_pattern(L: int, n: int) -> sympy.Matrix:
    """The unrolled weights of a pre-norm stack of L sublayers carried on n equal streams:
    every node reads every earlier node with weight 1, the output (stream sum) with weight n."""
    C = sympy.Matrix(L + 2, L + 2, lambda i, j: 1 if j < i else 0)
    C[L + 1, : L + 1] = n * sympy.ones(1, L + 1)
    return C


def unroll_induction() -> list[Step]:
    """The unrolled weights for every L, by induction on the layer (symbolic n, d).

    X_k = H_k X_{k-1} + q_k z_kᵀ is linear in X_{k-1}, so X_k is a sum of one term per earlier
    node: R_{k,0} X₀ and R_{k,j} q_j z_jᵀ (1 ≤ j ≤ k), with R_{k,k} = I. Step: sublayer k+1 maps
    each term T to H_{k+1} T (so R_{k+1,j} = H_{k+1} R_{k,j} = H_{k+1} ⋯ H_{j+1}) and adds
    q_{k+1} z_{k+1}ᵀ. Read-out: node k+1 reads X_kᵀ p_{k+1}, whose term j is
    z_j (p_{k+1}ᵀ R_{k,j} q_j): w_{j,k+1} = p_{k+1}ᵀ H_k ⋯ H_{j+1} q_j. Every step evaluates
    :mod:`hcspec.spec.formulas`."""
    n, d = formulas.n, formulas.d
    s = formulas.connection_symbols()
    A, B = sympy.MatrixSymbol("A", n, d), sympy.MatrixSymbol("B", n, d)
    R, q_j = sympy.MatrixSymbol("R_{k,j}", n, n), sympy.MatrixSymbol("q_j", n, 1)
    z_j, p = sympy.MatrixSymbol("z_j", d, 1), sympy.MatrixSymbol("p_{k+1}", n, 1)
    H, q, z = sympy.MatrixSymbol("H_{k+1}", n, n), sympy.MatrixSymbol("q_{k+1}", n, 1), \
        sympy.MatrixSymbol("z_{k+1}", d, 1)
    split = formulas.forward(s).xreplace({s.X: A + B, s.H_res: H, s.h_post: q, s.z: z})
    linear = require_equal("a sublayer acts on a sum of terms term by term, symbolic n, d",
                           split, H * A + H * B + q * z.T)
    term = R * q_j * z_j.T
    carried = (formulas.forward(s) - s.h_post * s.z.T).xreplace({s.X: term, s.H_res: H})
    require_equal("term j after sublayer k+1: R_{k+1,j} = H_{k+1} R_{k,j}, symbolic n, d",
                  carried, (H * R) * q_j * z_j.T)
    read = formulas.aggregate(s).xreplace({s.X: term, s.h_pre: p})
    weight = p.T * R * q_j
    require_equal("node k+1 reads term j with weight w = p_{k+1}ᵀ R_{k,j} q_j, symbolic n, d",
                  read, z_j * weight.T)
    h0, p_1 = sympy.MatrixSymbol("h_0", d, 1), sympy.MatrixSymbol("p_1", n, 1)
    one = sympy.MatrixSymbol(r"\mathbf{1}", n, 1)
    first = formulas.aggregate(s).xreplace({s.X: one * h0.T, s.h_pre: p_1})
    base = ("base case: X₀ = 1 h₀ᵀ is the single term R_{0,0} X₀ with R_{0,0} = I, and node 1 "
            "reads it with the weight w_{0,1} = p_1ᵀ R_{0,0} 1",
            chain(first, h0 * (p_1.T * sympy.Identity(n) * one).T))
    step = ("each term is carried by H_{k+1}, so R_{k,j} = H_k ⋯ H_{j+1}",
            chain(carried, (H * R) * q_j * z_j.T))
    base, step = induction(base, step)
    return [
        base,
        ("induction step, every n and d: the sublayer is linear in the state", linear[1]),
        step,
        ("read-out: node k+1's input has term j equal to z_j times the scalar "
         "w_{j,k+1} = p_{k+1}ᵀ H_k ⋯ H_{j+1} q_j (a 1×1 equals its transpose)",
         chain(read, sympy.expand(read.doit()), z_j * weight.T, using=[Given(
             "a 1×1 matrix equals its transpose", replace=((weight.T, weight),))])),
    ]


def unrolled_gradient_induction() -> list[Step]:
    """∂L/∂X₀ for every L, by induction backwards from the top (symbolic n, d): with
    G_{k-1} = H_kᵀ G_k + p_k g_kᵀ (:func:`formulas.grad_X`, g_k the branch input gradient of
    sublayer k), G_0 = (H_L ⋯ H_1)ᵀ G_L + Σ_k (H_{k-1} ⋯ H_1)ᵀ p_k g_kᵀ: a bypass term through
    the product of the H_res and one term per sublayer."""
    n, d = formulas.n, formulas.d
    s = formulas.connection_symbols()
    A, B = sympy.MatrixSymbol("A", n, d), sympy.MatrixSymbol("B", n, d)
    H, p = sympy.MatrixSymbol("H_k", n, n), sympy.MatrixSymbol("p_k", n, 1)
    g = sympy.MatrixSymbol("g_k", d, 1)
    S, p_j, g_j = (sympy.MatrixSymbol("S", n, n), sympy.MatrixSymbol("p_j", n, 1),
                   sympy.MatrixSymbol("g_j", d, 1))
    back = formulas.grad_X(s).xreplace({s.G: A + B, s.H_res: H, s.h_pre: p, s.g_in: g})
    linear = require_equal("the backward step acts on a sum of terms term by term, symbolic n, "
                           "d", back, H.T * A + H.T * B + p * g.T)
    term = S.T * p_j * g_j.T  # S = H_{j-1} ⋯ H_{k}: the product below layer j, above layer k-1
    carried = (formulas.grad_X(s) - s.h_pre * s.g_in.T).xreplace({s.G: term, s.H_res: H})
    require_equal("term j below sublayer k: (S H_k)ᵀ p_j g_jᵀ, symbolic n, d", carried,
                  (S * H).T * p_j * g_j.T)
    H_1, p_1 = sympy.MatrixSymbol("H_1", n, n), sympy.MatrixSymbol("p_1", n, 1)
    G_1, g_1 = sympy.MatrixSymbol("G_1", n, d), sympy.MatrixSymbol("g_1", d, 1)
    top = formulas.grad_X(s).xreplace({s.G: G_1, s.H_res: H_1, s.h_pre: p_1, s.g_in: g_1})
    base = ("base case L = 1: the backward of the one sublayer is the closed form with the bypass "
            "H_1ᵀ G_1 and the empty product I below sublayer 1",
            chain(top, sympy.MatAdd(H_1.T * G_1, sympy.MatMul(sympy.Identity(n), p_1, g_1.T),
                                    evaluate=False)))
    return [
        *induction(base, ("step, every n and d: the backward of sublayer k is linear in G_k",
                          linear[1])),
        ("each term gains H_k on the right of its product: after all layers the term of "
         "sublayer j is (H_{j-1} ⋯ H_1)ᵀ p_j g_jᵀ and the bypass is (H_L ⋯ H_1)ᵀ G_L",
         chain(carried, (S * H).T * p_j * g_j.T)),
    ]


def backward_stack(weights: list[ConnectionWeights], G_top: sympy.Matrix,
                   g_ins: list[sympy.Matrix]) -> sympy.Matrix:
    """∂L/∂X₀ of a stack by the per-sublayer backward G ← H_resᵀ G + h_pre g_inᵀ (evaluating
    :func:`formulas.grad_X`), top sublayer first; ``g_ins[k]`` is sublayer k+1's g_in."""
    G = G_top
    for w, g_in in zip(reversed(weights), reversed(g_ins), strict=True):
        s = formulas.connection_symbols(w.n, G.shape[1])
        G = evaluate(formulas.grad_X(s), {s.G: G, s.H_res: w.H_res, s.h_pre: w.h_pre,
                                          s.g_in: g_in})
    return G


def unrolled_gradient(weights: list[ConnectionWeights], G_top: sympy.Matrix,
                      g_ins: list[sympy.Matrix]) -> sympy.Matrix:
    """The closed form (H_L ⋯ H_1)ᵀ G_L + Σ_k (H_{k-1} ⋯ H_1)ᵀ h_pre,k g_in,kᵀ."""
    n = weights[0].n
    below = [sympy.eye(n)]
    for w in weights:
        below.append(w.H_res * below[-1])
    total = below[-1].T * G_top
    for k, (w, g_in) in enumerate(zip(weights, g_ins, strict=True)):
        total += below[k].T * w.h_pre * g_in.T
    return total


@theorem(
    "unroll.gradient",
    "The gradient reaching the input of a stack of L HC sublayers is "
    "∂L/∂X₀ = (H_L ⋯ H_1)ᵀ G_L + Σ_k (H_{k-1} ⋯ H_1)ᵀ h_pre,k g_in,kᵀ: a bypass term through the "
    "product of the H_res (doubly stochastic for mHC, so it keeps the stream sum) plus one term "
    "per sublayer.",
    assumptions=(),
    setting=(
        "G_L = ∂L/∂X_L; g_in,k the gradient at sublayer k's input (J_kᵀ g_z,k), taken "
                 "as given: the identity is linear in them.",
    ),
    cases="every L by induction, symbolic n, d; examples: symbolic weights, (n, L) in {(1,3), "
          "(2,2), (3,2)}, d = 3",
    generality="induction",
    source="HC arXiv:2409.19606 §4.5 Eq. 20 (unrolled); mHC arXiv:2512.24880 Eq. 4–5 (the "
           "product of H_res across depth)",
)
def _unroll_gradient() -> list[Step]:
    steps = unrolled_gradient_induction()
    for n, L in ((1, 3), (2, 2), (3, 2)):
        weights = [symbolic_weights(n, k) for k in range(1, L + 1)]
        G_top = symbol_matrix("G_L", n, D)
        g_ins = [symbol_vector(f"g^{k}", D) for k in range(1, L + 1)]
        require_equal(f"∂L/∂X₀, n={n}, L={L}", backward_stack(weights, G_top, g_ins),
                      unrolled_gradient(weights, G_top, g_ins))
    return steps


@theorem(
    "unroll.connection_weights",
    "A stack of L HC sublayers feeds sublayer k the input Σ_j w_{j,k} z_j + w_{0,k} h₀ with "
    "w_{j,k} = h_pre,kᵀ H_res,k-1 ⋯ H_res,j+1 h_post,j; pre-norm gives the all-ones strictly "
    "lower triangle.",
    assumptions=(),
    setting=(
        "X₀ = 1_n h₀ᵀ (replicated embedding); the output node reads the stream sum (h_pre = 1_n).",
        "Branch outputs z_j are arbitrary (the identity is linear in them).",
    ),
    cases="every L by induction, symbolic n, d (the sublayer is linear in the state; each term is "
          "carried by H_res); examples: symbolic weights, (n, L) in {(1,3), (2,2), (3,2)}, d = 3; "
          "patterns: L = 6 for pre-norm (n = 1) and the static init (n in {1,2,3,4})",
    generality="induction",
    source="HC arXiv:2409.19606 §4.5 Eq. 20, App. F Eq. 27; mHC arXiv:2512.24880 Eq. 4",
)
def _unroll_connection_weights() -> list[Step]:
    steps: list[Step] = unroll_induction()
    h0 = symbol_vector("h_0", D)
    for n, L in ((1, 3), (2, 2), (3, 2)):
        weights = [symbolic_weights(n, k) for k in range(1, L + 1)]
        trace = network.run_stack(network.replicate(h0, n), weights,
                                  [free_branch(k) for k in range(1, L + 1)])
        C = network.connection_weights(weights)
        reads = [*trace.inputs, trace.states[-1].T * sympy.ones(n, 1)]
        for k in range(1, L + 2):
            unrolled = C[k, 0] * h0 + sum(
                (C[k, j] * trace.outputs[j - 1] for j in range(1, k)), sympy.zeros(D, 1))
            step = require_equal(f"input of node {k}, n={n}, L={L}", reads[k - 1], unrolled)
            if (n, L, k) == (2, 2, 2):
                steps.append(step)
        if (n, L) == (2, 2):
            steps.append(prose("the unrolled weights C of n = 2, L = 2 hold these closed forms "
                               "for every node (each input checked as above)"))
    prenorm = [ConnectionWeights(sympy.ones(1, 1), sympy.ones(1, 1), sympy.ones(1, 1))] * 6
    steps.append(require_equal("pre-norm (n = 1, unit weights, L = 6): all-ones strictly lower",
                               network.connection_weights(prenorm), prenorm_pattern(6, 1)))
    for n in (1, 2, 3, 4):
        init = [network.static_init(n, k) for k in range(6)]
        step = require_equal(
            f"static init (Eq. 14), n={n}, L=6: the same pattern, output row n (stream sum)",
            network.connection_weights(init), prenorm_pattern(6, n))
        if n == 2:
            steps.append(step)
    return steps


def replicated_induction(h_pre: sympy.MatrixSymbol) -> list[Step]:
    """The induction over L for a stack whose every sublayer has H_res = I, h_post = 1 and a read
    vector ``h_pre`` with 1ᵀ h_pre = 1 (symbolic n, d): if X = 1 hᵀ then x_in = h and
    X' = 1 (h + F(h))ᵀ, so X_L = 1 h_Lᵀ with h_k = h_{k-1} + F_k(h_{k-1}); the output stream sum is
    1ᵀ X_L = n h_Lᵀ. Both steps evaluate :mod:`hcspec.spec.formulas`.

    Raises:
        ProofFailure: when a step does not reduce as claimed.
    """
    n, d = formulas.n, formulas.d
    one = sympy.MatrixSymbol(r"\mathbf{1}", n, 1)
    h = sympy.MatrixSymbol("h", d, 1)
    F_h = sympy.MatrixSymbol("F(h)", d, 1)
    s = formulas.connection_symbols()
    X = one * h.T
    x_in = formulas.aggregate(s).xreplace({s.X: X, s.h_pre: h_pre})
    read = ds.rewrite(x_in, [one.T, h_pre], sympy.Identity(1))
    require_equal(f"induction step: x_in = h (1ᵀ {h_pre.name} = 1), symbolic n, d", read, h)
    new_state = formulas.forward(s).xreplace({s.X: X, s.H_res: sympy.Identity(n), s.h_post: one,
                                              s.z: F_h})
    require_equal("induction step: X' = 1 (h + F(h))ᵀ, symbolic n, d", new_state,
                  one * (h + F_h).T)
    output = ds.rewrite(one.T * X, [one.T, one], n * sympy.Identity(1))
    require_equal("output: 1ᵀ X = n hᵀ (1ᵀ 1 = n), symbolic n, d", output, n * h.T)
    unit = lemma_rewrite("lemma.unit_vectors", lemmas.UNIT_SUM, (one.T, h_pre),
                         sympy.Identity(1), entries={one: lambda r, c: 1, h_pre: lambda r, c:
                                                     sympy.KroneckerDelta(r, lemmas.J)})
    ones = lemma_rewrite("lemma.unit_vectors", lemmas.ONES, (one.T, one), n * sympy.Identity(1),
                         entries={one: lambda r, c: 1})
    h0 = sympy.MatrixSymbol("h_0", d, 1)
    base = ("base case L = 0: the network input X₀ = 1 h₀ᵀ (replicated embedding) has stream sum "
            "n h₀ᵀ", chain(one.T * (one * h0.T), n * h0.T, using=[ones]))
    base, step = induction(base, (
        "induction step: then H_res = I and h_post = 1 write back X' = 1 (h + F(h))ᵀ: the next "
        "state is again replicated, with h' = h + F(h)",
        chain(new_state, sympy.expand(new_state.doit()), one * (h + F_h).T)))
    return [
        base,
        (f"every n and d: with X = 1 hᵀ and h_pre = {h_pre.name} the branch reads h",
         chain(x_in, sympy.expand(x_in.doit()), read, using=[unit])),
        step,
        ("so by induction X_L = 1 h_Lᵀ for every L, and the output stream sum is n h_Lᵀ",
         chain(one.T * X, output, using=[ones])),
    ]


def sequential_blocks() -> list[Step]:
    """HC App. H Eq. 42 for symbolic n, read in row form: B = 1ᵀ, A_m = e_1, A_r = I give
    h_pre = e_1, h_post = 1, H_res = I (:func:`network.read_blocks`)."""
    n = formulas.n
    one, e_1 = sympy.MatrixSymbol(r"\mathbf{1}", n, 1), sympy.MatrixSymbol("e_1", n, 1)
    h_pre, h_post, H_res = network.read_blocks(one.T, e_1, sympy.Identity(n))
    for name, got, expected in (("h_pre", h_pre, e_1), ("h_post", h_post, one),
                                ("H_res", H_res, sympy.Identity(n))):
        if got.doit() != expected:
            raise ProofFailure(f"Eq. 42 in row form: {name} should be {expected}, got {got}")
    return [(f"Eq. 42 for every n: HC = [[0, 1ᵀ], [e_1, I]] read in row form gives {name}",
             chain(rf"\mathrm{{{name.replace('_', '')}}}", got, expected))
            for name, got, expected in (("h_pre", h_pre, e_1), ("h_post", h_post, one),
                                        ("H_res", H_res, sympy.Identity(n)))]


HC_SEQUENTIAL = sympy.Matrix([[0, 1, 1], [1, 1, 0], [0, 0, 1]])
"""HC Eq. 17 (n = 2), the n = 2 case of App. H Eq. 42: B = 1ᵀ, A_m = e_1, A_r = I."""

def sequential_matrix(n: int) -> sympy.Matrix:
    """HC App. H Eq. 42: [[0, 1_{1×n}], [e_1, I_n]]."""
    return sympy.Matrix(sympy.BlockMatrix([
        [sympy.zeros(1, 1), sympy.ones(1, n)],
        [sympy.Matrix(n, 1, lambda i, _: 1 if i == 0 else 0), sympy.eye(n)],
    ]))


@theorem(
    "duality.sequential",
    "With HC = [[0, 1, 1], [1, 1, 0], [0, 0, 1]] at every layer (n = 2; Eq. 42 for any n) every "
    "stream equals h_k = h_{k-1} + T_k(h_{k-1}): a sequential residual stack.",
    assumptions=(),
    setting=(
        "T_k arbitrary sublayers R^d → R^d; X₀ = 1_n h₀ᵀ.",
        "Paper matrices read in row form via layout.paper_rows.",
    ),
    cases="every L by induction, symbolic n, d (Eq. 42 read in row form is h_pre = e_1, "
          "h_post = 1, H_res = I; step X = 1hᵀ ⇒ X' = 1(h + F(h))ᵀ); examples: n = 2 (Eq. 17) and "
          "n in {3, 4} (Eq. 42), L = 6 layers, d = 3",
    generality="induction",
    source="HC arXiv:2409.19606 §3.2 Eq. 17, Fig. 4(a); App. H Eq. 42–50",
)
def _duality_sequential() -> list[Step]:
    h0 = symbol_vector("h_0", D)
    steps: list[Step] = sequential_blocks() + replicated_induction(
        sympy.MatrixSymbol("e_1", formulas.n, 1))
    for n in (2, 3, 4):
        hc = HC_SEQUENTIAL if n == 2 else sequential_matrix(n)
        if n == 2 and hc != sequential_matrix(2):
            raise ProofFailure("Eq. 17 is not the n = 2 case of Eq. 42")
        branches = [generic_branch(k) for k in range(1, 7)]
        trace = network.run_stack(network.replicate(h0, n), [network.from_paper(hc)] * 6, branches)
        h = h0
        for k, branch in enumerate(branches, start=1):
            h = h + branch(h)
            step = require_equal(f"every stream after layer {k} is h_{k}, n={n}",
                                 trace.states[k], sympy.ones(n, 1) * h.T)
            if n == 2 and k == 1:
                steps.append(step)
        if n == 2:
            read = network.from_paper(hc)
            steps.append(require_equal(
                "example: the n = 2 matrix (Eq. 17) in row form is Eq. 42's (e_1, 1, I)",
                sympy.Matrix.hstack(read.h_pre, read.h_post, read.H_res),
                sympy.Matrix([[1, 1, 1, 0], [0, 1, 0, 1]]),
                show=(sympy.Symbol(r"[h_{pre} \mid h_{post} \mid H_{res}]"),
                      sympy.Matrix([[1, 1, 1, 0], [0, 1, 0, 1]])),
                where={sympy.Symbol(r"[h_{pre} \mid h_{post} \mid H_{res}]"):
                       sympy.Matrix.hstack(read.h_pre, read.h_post, read.H_res)}))
            steps.append(require_equal(
                "unrolled: every layer reads every earlier one with weight 1 (as pre-norm); "
                "the output sums the n = 2 equal streams",
                network.connection_weights([network.from_paper(hc)] * 6), prenorm_pattern(6, 2)))
    return steps


HC_PARALLEL_ODD = sympy.Matrix([[0, 1, 0], [1, 1, 1], [1, 1, 1]])
"""HC Eq. 18: odd layers (the first of each pair) — B = e_1ᵀ, A_m = 1, A_r = 11ᵀ."""

HC_PARALLEL_EVEN = sympy.Matrix([[0, 0, 1], [0, 1, 0], [1, 0, 1]])
"""HC Eq. 19: even layers (the second of each pair) — B = e_2ᵀ, A_m = e_2, A_r = I."""


def unit(n: int, j: int) -> sympy.Matrix:
    """e_j ∈ R^{n×1}, the j-th unit column (1-based, as in the paper's e_1)."""
    return sympy.Matrix(n, 1, lambda r, _: 1 if r == j - 1 else 0)


def parallel_matrix(n: int, k: int, *, literal: bool = False) -> sympy.Matrix:
    """The HC matrix of layer k (1-based) in the parallel arrangement of App. H, i = (k−1) mod n.

    i = 0 (Eq. 54): [[0, e_1ᵀ], [1, 11ᵀ]] — read the stream sum, reset every stream to it, write
    to stream 1. i ≠ 0 (Eq. 55): [[0, e_{i+1}ᵀ], [e_{i+1}, I]] — read and write stream i + 1 only.
    ``literal=True`` uses e_i for i ≠ 0, Eq. 55 with its index taken literally in the 1-based e
    of Eq. 54 (the equations were read in a secondary transcription; the original's index base
    was not checked); it is not Eq. 19 at n = 2 (see :func:`literal_reading_fails`).

    Raises:
        ValueError: if n < 2 or k < 1.
    """
    require_size("n", n, minimum=2)
    require_size("k", k)
    i = (k - 1) % n
    if i == 0:
        B, A_m, A_r = unit(n, 1).T, sympy.ones(n, 1), sympy.ones(n, n)
    else:
        e = unit(n, i if literal else i + 1)
        B, A_m, A_r = e.T, e, sympy.eye(n)
    return sympy.Matrix(sympy.BlockMatrix([[sympy.zeros(1, 1), B], [A_m, A_r]]))


def parallel_induction() -> list[Step]:
    """The parallel arrangement for symbolic n and d, by induction over the layers of a group
    (every step evaluates :mod:`hcspec.spec.formulas` on the row form of Eq. 54–55).

    Group g starts from any state X with stream sum 1ᵀX = s_gᵀ. Layer 1 (Eq. 54) reads s_g and
    leaves X = 1 s_gᵀ + P with P = e_1 t_1ᵀ. Layer i + 1 (Eq. 55, stream e = e_{i+1}) sees
    X = 1 s_gᵀ + P with P = Σ_{j≤i} e_j t_jᵀ, so Pᵀ e = 0 (distinct unit vectors) and it reads s_g
    again, then adds e t_{i+1}ᵀ to P. After layer n, 1ᵀX = n s_gᵀ + Σ_j t_jᵀ = s_{g+1}ᵀ (Eq. 53).

    Raises:
        ProofFailure: when a step does not reduce as claimed.
    """
    n, d = formulas.n, formulas.d
    one = sympy.MatrixSymbol(r"\mathbf{1}", n, 1)
    e_1, e = sympy.MatrixSymbol("e_1", n, 1), sympy.MatrixSymbol("e_{i+1}", n, 1)
    X, P = sympy.MatrixSymbol("X", n, d), sympy.MatrixSymbol("P_i", n, d)
    s_g = sympy.MatrixSymbol("s_g", d, 1)
    t_1, t = sympy.MatrixSymbol("t_1", d, 1), sympy.MatrixSymbol("t_{i+1}", d, 1)
    s = formulas.connection_symbols()
    steps = [cite("every n, 1 ≤ j ≤ n: (e_j)_r = δ_{rj}, so a unit vector sums to 1",
                  "lemma.unit_vectors", lemmas.UNIT_SUM),
             cite("and distinct unit vectors are orthogonal", "lemma.unit_vectors",
                  lemmas.ORTHOGONAL)]

    h_pre, h_post, H_res = network.read_blocks(e_1.T, one, one * one.T)  # Eq. 54, row form
    first_read = formulas.aggregate(s).xreplace({s.X: X, s.h_pre: h_pre})
    read = ds.rewrite(first_read, [one.T, X], s_g.T)
    require_equal("layer 1 of the group reads x_in = Xᵀ 1 = s_g (1ᵀ X = s_gᵀ), symbolic n, d",
                  read, s_g)
    first_write = formulas.forward(s).xreplace({s.X: X, s.H_res: H_res, s.h_post: h_post,
                                                s.z: t_1})
    written = ds.rewrite(first_write, [one.T, X], s_g.T)
    require_equal("layer 1 writes X' = 1 s_gᵀ + e_1 t_1ᵀ, symbolic n, d", written,
                  one * s_g.T + e_1 * t_1.T)

    state = one * s_g.T + P
    h_pre, h_post, H_res = network.read_blocks(e.T, e, sympy.Identity(n))  # Eq. 55, row form
    later_read = formulas.aggregate(s).xreplace({s.X: state, s.h_pre: h_pre})
    unit_sum = ds.rewrite(later_read, [one.T, e], sympy.Identity(1))
    orthogonal = ds.rewrite(unit_sum, [P.T, e], sympy.ZeroMatrix(d, 1))
    require_equal("layer i + 1 reads x_in = s_g (1ᵀ e = 1, P_iᵀ e = 0), symbolic n, d",
                  orthogonal, s_g)
    later_write = formulas.forward(s).xreplace({s.X: state, s.H_res: H_res, s.h_post: h_post,
                                                s.z: t})
    require_equal("layer i + 1 writes X' = 1 s_gᵀ + (P_i + e_{i+1} t_{i+1}ᵀ), symbolic n, d",
                  later_write, one * s_g.T + (P + e * t.T))

    r, j, c = sympy.symbols("r j c", integer=True)
    t_idx, s_idx = sympy.IndexedBase("t"), sympy.IndexedBase("s_g")
    stream_sum = sympy.Sum(sympy.KroneckerDelta(r, j) * t_idx[j, c], (r, 1, n), (j, 1, n))
    by_unit = sympy.Sum(sympy.Sum(sympy.KroneckerDelta(r, j), (r, 1, n)).doit(), (j, 1, n))
    in_range = {sympy.Ge(j, 1): True, sympy.Le(j, n): True}
    reduced = sympy.Sum(sympy.piecewise_fold(by_unit.function).xreplace(in_range)
                        * t_idx[j, c], (j, 1, n))
    output = n * s_idx[c] + reduced
    eq53 = split_sums(sympy.Sum(s_idx[c] + t_idx[j, c], (j, 1, n)))
    if sympy.simplify(sympy.expand(output - eq53)) != 0 or sympy.simplify(
            by_unit.function.xreplace(in_range)) != 1:
        raise ProofFailure(f"after layer n: 1ᵀX = {output}, Eq. 53 gives {eq53}")
    start = assume("1ᵀ X = s_gᵀ", factors=(one.T, X), rhs=s_g.T)
    # index forms (1-based): 1_r = 1, (e_{i+1})_r = δ_{r,i+1}, one column of P_i = Σ_{j≤i} e_j t_jᵀ
    unit_entries = {one: lambda r, c: 1,
                    e: lambda r, c: sympy.KroneckerDelta(r, lemmas.I + 1),
                    P: lambda r, c: sympy.Sum(sympy.KroneckerDelta(r, lemmas.J)
                                              * lemmas.T[lemmas.J], (lemmas.J, 1, lemmas.I))}
    unit = lemma_rewrite("lemma.unit_vectors", lemmas.UNIT_SUM, (one.T, e), sympy.Identity(1),
                         {lemmas.J: lemmas.I + 1}, entries=unit_entries)
    earlier = lemma_rewrite("lemma.unit_vectors", lemmas.EARLIER_STREAMS, (P.T, e),
                            sympy.ZeroMatrix(d, 1), entries=unit_entries)
    by_unit_sum = from_lemma("lemma.unit_vectors", lemmas.UNIT_SUM, {lemmas.R: r, lemmas.J: j})
    base, step = induction(
        ("and resets every stream to s_g before writing t_1 = T_1(s_g) to stream 1: X = 1 s_gᵀ "
         "+ P_1",
         chain(first_write, sympy.expand(first_write.doit()), one * s_g.T + e_1 * t_1.T,
               using=[start])),
        ("and adds t_{i+1} = T_{i+1}(s_g) to stream i + 1 only: X = 1 s_gᵀ + P_{i+1}",
         chain(later_write, one * s_g.T + (P + e * t.T))))
    steps += [
        ("induction base, every n and d: group g starts from any X with 1ᵀ X = s_gᵀ; layer 1 "
         "(Eq. 54: h_pre = 1, h_post = e_1, H_res = 11ᵀ) reads the stream sum",
         chain(first_read, read, using=[start])),
        base,
        ("induction step: with X = 1 s_gᵀ + P_i, P_i = Σ_{j≤i} e_j t_jᵀ, layer i + 1 "
         "(Eq. 55: h_pre = h_post = e_{i+1}, H_res = I) reads s_g again",
         chain(later_read, sympy.expand(later_read.doit()), orthogonal, using=[unit, earlier])),
        step,
        ("after layer n, P_n = Σ_j e_j t_jᵀ: entry c of the stream sum 1ᵀX is Eq. 53, the "
         "start of group g + 1",
         chain(sympy.Symbol(r"(\mathbf{1}^T X)_c"),
               sympy.Add(n * s_idx[c], stream_sum, evaluate=False), output,
               sympy.Sum(s_idx[c] + t_idx[j, c], (j, 1, n)), using=[by_unit_sum])),
    ]
    return steps


def literal_reading_fails() -> Step:
    """Eq. 55 read literally (e_i for k − 1 ≡ i, with Eq. 54's 1-based e_1) is not Eq. 19 at n = 2,
    and its layer 2 reads stream 1, which layer 1 has written: s + T_1(s), not s.

    Raises:
        ProofFailure: if the literal reading were Eq. 19 or ran in parallel (then the spec's
            e_{i+1} reading would not be needed).
    """
    literal = parallel_matrix(2, 2, literal=True)
    if literal == HC_PARALLEL_EVEN:
        raise ProofFailure("Eq. 55 read with e_i is Eq. 19 at n = 2")
    h0 = symbol_vector("h_0", D)
    branches = [generic_branch(k) for k in (1, 2)]
    trace = network.run_stack(network.replicate(h0, 2),
                              [network.from_paper(parallel_matrix(2, 1)),
                               network.from_paper(literal)], branches)
    s = 2 * h0
    gap = sympy.expand(trace.inputs[1] - s)
    if all(entry == 0 for entry in gap):
        raise ProofFailure("Eq. 55 read with e_i runs the pair in parallel")
    x_in, s_0 = sympy.Symbol("x_{in,2}"), sympy.Symbol("s_0")
    return require_relation("Eq. 55 read with e_i (1-based) instead: at n = 2 it is not Eq. 19, "
                            "and layer 2 reads stream 1, which layer 1 wrote (x_{in,2} = s_0 + "
                            "T_1(s_0))", sympy.Ne(x_in, s_0, evaluate=False),
                        where={x_in: trace.inputs[1], s_0: s})


def run_parallel(n: int, groups: int) -> list[Step]:
    """Run ``groups`` × n layers of :func:`parallel_matrix` with generic branches (d = D) and check
    that every layer of group g reads s_g and s_{g+1} = Σ_i (T_{gn+i}(s_g) + s_g) (Eq. 53).

    Raises:
        ProofFailure: when a layer reads something else or a stream sum differs.
    """
    h0 = symbol_vector("h_0", D)
    L = groups * n
    weights = [network.from_paper(parallel_matrix(n, k)) for k in range(1, L + 1)]
    branches = [generic_branch(k) for k in range(1, L + 1)]
    trace = network.run_stack(network.replicate(h0, n), weights, branches)
    steps: list[Step] = []
    s = n * h0
    for g in range(groups):
        layers = range(g * n + 1, g * n + n + 1)
        for k in layers:
            step = require_equal(f"layer {k} reads s_{g}, n={n}", trace.inputs[k - 1], s,
                                 show=(sympy.Symbol(f"x_{{in,{k}}}"), sympy.Symbol(f"s_{g}")),
                                 where={sympy.Symbol(f"x_{{in,{k}}}"): trace.inputs[k - 1],
                                        sympy.Symbol(f"s_{g}"): s})
            if g == 0:
                steps.append(step)
        s = sum((branches[k - 1](s) + s for k in layers), sympy.zeros(D, 1))
        total = sympy.Symbol(rf"\sum_{{k={layers[0]}}}^{{{layers[-1]}}} (T_k(s_{g}) + s_{g})")
        after = require_equal(
            f"s_{g + 1} = Σ_i (T_i(s_{g}) + s_{g}) (Eq. 53), n={n}",
            trace.states[g * n + n].T * sympy.ones(n, 1), s,
            show=(sympy.Symbol(f"s_{g + 1}"), total),
            where={sympy.Symbol(f"s_{g + 1}"): trace.states[g * n + n].T * sympy.ones(n, 1),
                   total: s})
        if g == 0:
            steps.append(after)
    return steps


@theorem(
    "duality.parallel",
    "In the parallel arrangement of HC App. H (Eq. 54 for the first layer of each group of n, "
    "Eq. 55 for the others; Eq. 18–19 at n = 2) every layer of group g reads the same input "
    "s_g = Xᵀ1 and s_{g+1} = Σ_{i=1}^{n} (T_{gn+i}(s_g) + s_g) (Eq. 53): groups of n layers run "
    "in parallel (PTB-style), the groups in sequence.",
    assumptions=(
        "T_k arbitrary sublayers R^d → R^d; X₀ = 1_n h₀ᵀ, so s_0 = n h₀; layers counted from 1; "
        "group g starts from the state X of the previous group, 1ᵀ X = s_gᵀ.",
    ),
    setting=(
        "Layer k with i = (k−1) mod n uses [[0, e_1ᵀ], [1, 11ᵀ]] for i = 0 (Eq. 54) and "
        "[[0, e_{i+1}ᵀ], [e_{i+1}, I]] otherwise: Eq. 55 with the stream index i + 1, the "
        "reading that gives Eq. 19 at n = 2 (e_i with Eq. 54's 1-based e_1 does not).",
        "Eq. 53–55 were read in a secondary transcription of App. H (the original's typesetting "
        "and index base were not available to check); Eq. 18–19 and Eq. 42 agree with it.",
        "Paper matrices read in row form via layout.paper_rows.",
    ),
    cases="every n, d and number of groups by induction over the layers (unit vectors in index "
          "form); examples: n in {2, 3} with two groups, n in {4, 5} with one, d = 3; n = 2 is "
          "Eq. 18–19",
    generality="induction",
    source="HC arXiv:2409.19606 §3.2 Eq. 18–19, Fig. 4(b); App. H Eq. 53–55",
)
def _duality_parallel() -> list[Step]:
    steps = parallel_induction()
    if parallel_matrix(2, 1) != HC_PARALLEL_ODD or parallel_matrix(2, 2) != HC_PARALLEL_EVEN:
        raise ProofFailure("Eq. 54–55 at n = 2 are not Eq. 18–19")
    steps.append(literal_reading_fails())
    for n, groups in ((2, 2), (3, 2), (4, 1), (5, 1)):
        example = run_parallel(n, groups)
        if n == 3:
            steps += example
    weights = [network.from_paper(parallel_matrix(2, k)) for k in range(1, 7)]
    C = network.connection_weights(weights)
    for g in range(3):
        odd, even = 2 * g + 1, 2 * g + 2
        pair = require_equal(f"n = 2, unrolled: layer {even} does not read layer {odd}",
                             sympy.Matrix([C[even, odd]]), sympy.zeros(1, 1),
                             show=(sympy.Symbol(f"w_{{{odd},{even}}}"), sympy.zeros(1, 1)),
                             where={sympy.Symbol(f"w_{{{odd},{even}}}"):
                                    sympy.Matrix([C[even, odd]])})
        if g == 0:
            steps.append(pair)
    steps.append(prose("n = 2 (Eq. 18–19), L = 6: in the unrolled weights every even layer "
                       "reads the same nodes as the odd layer before it (PTB pairs)"))
    return steps
