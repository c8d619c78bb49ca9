"""The checkable claims of the project's seed write-ups, each with the theorem that settles it
(``proven``, ``in part``), the spec's correction (``contradicted``), or the reason it is only
``stated``. Rendered as ``docs/derivations/seed-claims.md`` by ``hc-spec docs``
(:func:`hcspec.spec.docs.render_seed_claims`); every theorem id named here must be registered
(tests/spec/test_cli_docs.py).

The seed documents themselves are not part of the repository: the list follows the claims the
spec's issues enumerate (issue #38: 37 checkable claims; 26 proven, 5 in part, 3 contradicted,
3 absent), named here by what they state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

STATUSES: Final = ("proven", "in part", "contradicted", "stated")
"""What the spec does with a claim: proves it as stated; proves part of it (the page says
which); contradicts it (the page gives the spec's value and the computation); states it without
a proof (the page says why)."""


@dataclass(frozen=True)
class SeedClaim:
    """One claim of the seed write-ups.

    Attributes:
        claim: what the seed states, in the project's row convention.
        status: one of :data:`STATUSES`.
        theorems: the registered theorem ids that settle it (may be empty for ``stated``).
        note: what is proven when only part is, the spec's correction with its computation, or
            why a claim is only stated.
    """

    claim: str
    status: str
    theorems: tuple[str, ...]
    note: str = ""


CLAIMS: Final[tuple[SeedClaim, ...]] = (
    SeedClaim("An HC sublayer computes X' = H_res X + h_post F(Xᵀ h_pre)ᵀ (HC Eq. 1–5 in row "
              "form; the paper's matrix [[0, B], [A_m, A_r]] reads h_pre = A_m, h_post = Bᵀ, "
              "H_res = A_rᵀ).", "proven",
              ("layout.paper_rows", "forward.shapes", "published.hc_static_step")),
    SeedClaim("Dynamic HC: B, A_m, A_r plus s·tanh(H̄ W) terms (HC Eq. 10–13).", "proven",
              ("published.hc_dynamic_step",)),
    SeedClaim("The mHC step x_{l+1} = H_res x_l + H_postᵀ F(H_pre x_l) with H_pre = σ(·), "
              "H_post = 2σ(·), H_res from Sinkhorn–Knopp (mHC Eq. 3, 7–9).", "proven",
              ("published.mhc_paper_step", "published.deepseek_v4_step")),
    SeedClaim("Backward: ∂L/∂X = H_resᵀ G + h_pre g_inᵀ, ∂L/∂H_res = G Xᵀ, ∂L/∂h_pre = X g_in, "
              "∂L/∂h_post = G z with g_z = Gᵀ h_post, g_in = Jᵀ g_z.", "proven",
              ("backward.closed_form",)),
    SeedClaim("Doubly stochastic matrices are closed under transpose, product and convex "
              "combination.", "proven",
              ("ds.transpose_closure", "ds.product_closure", "ds.convex_closure")),
    SeedClaim("A doubly stochastic H_res preserves the stream sum (1ᵀ H X = 1ᵀ X), forward and "
              "backward.", "proven",
              ("ds.stream_sum_preserved", "ds.gradient_stream_sum_preserved")),
    SeedClaim("A doubly stochastic matrix is non-expansive: ‖H x‖₂ ≤ ‖x‖₂.", "proven",
              ("ds.nonexpansive",)),
    SeedClaim("Permutation matrices are doubly stochastic isometries.", "proven",
              ("ds.permutation_isometry",)),
    SeedClaim("Permutation matrices are vertices of the Birkhoff polytope.", "proven",
              ("ds.permutation_vertices",)),
    SeedClaim("Birkhoff–von Neumann: every doubly stochastic matrix is a convex combination of "
              "permutation matrices (the vertices are exactly the permutations).", "in part",
              ("ds.permutation_vertices", "ds.two_by_two_family", "ds.birkhoff_decompositions"),
              "Proven: every permutation matrix is a vertex, for every n; the converse for "
              "n = 2 (every 2×2 doubly stochastic matrix is a I + (1 − a) P) and for four "
              "rational 3×3 and 4×4 matrices, decomposed exactly. Not proven for every n: the "
              "general argument rests on Hall's marriage theorem, which sympy does not check."),
    SeedClaim("A convex combination of permutation matrices is doubly stochastic.", "in part",
              ("ds.convex_closure", "ds.permutation_vertices"),
              "Follows from two proven facts (permutation matrices are doubly stochastic; "
              "convex combinations of two doubly stochastic matrices are), for every n; the "
              "induction over the number of terms is not a registered theorem."),
    SeedClaim("At n = 1 the only doubly stochastic matrix is [1], and mHC is a residual update.",
              "proven", ("ds.n1_unique", "mhc.n1_residual")),
    SeedClaim("At n = 1, H_pre = [1].", "in part", ("mhc.n1_residual", "mhc.h_pre_range"),
              "Contradicted as stated for mHC: H_pre = σ(H̃_pre) lies in (0, 1) and is never 1; "
              "H_res = [1] and, at b_post = 0, H_post = 2σ(0) = 1 are proven."),
    SeedClaim("Every 2×2 doubly stochastic matrix is a I + (1 − a) P, 0 ≤ a ≤ 1.", "proven",
              ("ds.two_by_two_family",)),
    SeedClaim("H_pre = σ(·) ∈ (0, 1) and H_post = 2σ(·) ∈ (0, 2) entrywise.", "proven",
              ("mhc.h_pre_range", "mhc.h_post_range")),
    SeedClaim("One Sinkhorn–Knopp round (columns, then rows) leaves exact unit row sums.",
              "proven", ("mhc.sinkhorn_rows_exact",)),
    SeedClaim("The ε-regularised Sinkhorn variants keep positivity and approach unit sums.",
              "proven", ("mhc.sinkhorn_variants",)),
    SeedClaim("The seed's own Sinkhorn loop (exp(H̃/τ), rows first, +ε) gives a doubly "
              "stochastic matrix.", "contradicted", ("mhc.sinkhorn_seed_loop",),
              "Its columns end each round at c/(c + ε), never exactly 1, and its rows are "
              "inexact; the paper's order (columns, then rows, no ε) ends with exact rows."),
    SeedClaim("Sinkhorn–Knopp converges to a doubly stochastic matrix for every matrix with "
              "positive entries (Sinkhorn 1964).", "in part",
              ("mhc.sinkhorn_converges", "mhc.sinkhorn_rows_exact", "mhc.sinkhorn_variants"),
              "Hypotheses: M ∈ R^{n×n} with every entry > 0 (exp of the logits), exact "
              "arithmetic, alternating column and row normalisation. Proven for every n: each "
              "finite round keeps M > 0 and ends with exact row sums. The limit itself is "
              "followed numerically on one 3×3 instance (column-sum error below 1e-6 by round "
              "20); the convergence proof (contraction in Hilbert's projective metric) is not "
              "checked by sympy."),
    SeedClaim("The limit of Sinkhorn–Knopp is unique (Sinkhorn 1967) and its gradient follows "
              "from the implicit function theorem.", "in part", ("sinkhorn.implicit_gradient",),
              "Uniqueness is a declared assumption (cited); the implicit gradient is checked "
              "at n = 2, where the limit has a closed form."),
    SeedClaim("The soft start: with b_res = λ I Sinkhorn–Knopp returns I + (11ᵀ − n I)/(e^λ + "
              "n − 1), which tends to I as λ → ∞, so the sublayer starts as a residual update.",
              "proven", ("mhc.soft_start",)),
    SeedClaim("Sharding the feature axis d commutes with the stream mixing (tensor "
              "parallelism); only the dynamic weights need a cross-shard sum.", "proven",
              ("mhc.tensor_parallel_locality",)),
    SeedClaim("At n = 1, HC reduces to pre-norm (forward and backward).", "proven",
              ("reduction.prenorm_forward", "reduction.prenorm_backward")),
    SeedClaim("Post-norm needs input-dependent weights: dynamic HC reaches it, static HC does "
              "not (d ≥ 2).", "proven",
              ("reduction.postnorm_dynamic", "reduction.postnorm_unreachable_static")),
    SeedClaim("n = 1 cannot express the parallel pattern: its unrolled weights factor, n = 2 "
              "breaks this.", "proven",
              ("reduction.n1_expressiveness",),
              "The factorisation is proven for every L (a checked induction on the product of "
              "the H_res, symbolic indices); n = 2 breaking it needs one non-zero minor, shown "
              "for the parallel pattern at L = 4 (its first four layers at any L ≥ 4)."),
    SeedClaim("The static init (Eq. 14) reproduces the pre-norm network; dynamic HC at W = 0 "
              "is the static one, and its weights stay within |s| of the static ones.", "proven",
              ("init.static_prenorm", "dynamic.init_equals_static", "dynamic.weights_bounded")),
    SeedClaim("Sequential and parallel arrangements are HC weight patterns (HC App. H).",
              "proven", ("duality.sequential", "duality.parallel")),
    SeedClaim("Unrolled, a stack feeds sublayer k Σ_j w_{j,k} z_j + w_{0,k} h₀, and its input "
              "gradient is a bypass through the H_res product plus one term per sublayer.",
              "proven", ("unroll.connection_weights", "unroll.gradient")),
    SeedClaim("A residual connection gives the gradient a direct term; pre-norm keeps it, "
              "post-norm does not; the gradient norm is not preserved.", "proven",
              ("residual.direct_term", "prenorm.direct_term", "postnorm.no_bare_direct_term",
               "residual.gradient_norm_not_preserved")),
    SeedClaim("Parameter counts per module: SHC n(n + 2), DHC |θ_norm| + d(n + 2) + n(n + 2) + 2, "
              "mHC nd(n² + 2n) + n² + 2n + 3; the network adds 2L times that.", "proven",
              ("counts.params",)),
    SeedClaim("SHC parameter counts ≈ 2600 (×2) and ≈ 7700 (×4) at OLMo-1B size.",
              "contradicted", ("counts.params",),
              "The spec gives 2L·n(n + 2) with L = 16: 256 at n = 2 and 768 at n = 4 (the "
              "paper's App. B prints 768); the seed's own relative increases fit 256 and 768, "
              "not its absolute figures."),
    SeedClaim("The 7B DHC×4 parameter count.", "contradicted", ("counts.params",),
              "The spec's per-module count reproduces the paper's relative increase 0.0229 for "
              "OLMo-7B (Table 7), not the seed's absolute figure."),
    SeedClaim("DHC FLOPs per token at OLMo sizes.", "contradicted", ("counts.flops",),
              "The spec's closed form, equal to an operation-by-operation count, differs from "
              "the seed's figure by a factor of about 1.55; the paper's Table 8 is reproduced "
              "for SHC, not for DHC."),
    SeedClaim("FLOP counts of SHC, DHC and mHC as closed forms.", "proven", ("counts.flops",)),
    SeedClaim("The sublayer's cost does not grow with n (relative to the branch).", "in part",
              ("counts.flops",),
              "The closed forms are proven on a grid (n ≤ 5, d ≤ 3, t ≤ 3) and read as "
              "polynomials: the connection adds O(n d (n + 2)) per token, which grows with n; "
              "what does not grow is the branch's own cost (it runs once on x_in)."),
    SeedClaim("Products of unconstrained H_res can make the signal explode (eigenvalues above "
              "1 compound with depth); doubly stochastic ones cannot.", "stated",
              ("ds.product_closure", "ds.nonexpansive"),
              "The bounded half is proven (a product of doubly stochastic matrices is doubly "
              "stochastic, hence non-expansive); the explosion is an example (H = 2I gives "
              "‖H^L x‖ = 2^L ‖x‖), not a registered theorem."),
    SeedClaim("KV-cache size and the 1/n initialisation remarks.", "stated", (),
              "Engineering remarks without a formula the spec models (the KV cache holds the "
              "branch's keys and values, which HC does not change; the 1/n init is not a "
              "published initialisation of either paper)."),
    SeedClaim("The two worked exercises (X' = [7, −1]; X' = (8.5, 6.5) with G_X = (3.25, "
              "3.75)).", "stated", ("backward.closed_form",),
              "Correct by hand; their inputs are not in the repository, so they are not "
              "recomputed; the index page's worked example is computed by the spec."),
)
"""Every checkable claim of the seed write-ups, in the order they are made."""
