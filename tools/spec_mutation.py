"""Mutation testing of the spec: does ``hc-spec prove`` catch planted errors in spec/?

Each entry of :data:`CORPUS` is one small patch (a file under spec/, an exact text that occurs
once, its replacement, and the bug it plants). For every patch the tool copies spec/ into a
temporary directory as ``hcspec/spec``, applies the patch there (the source tree is never
touched), and proves the registered theorems in a fresh interpreter that imports the copy; the
mutant is *killed* when a proof fails (the first failing theorem id is reported) and *survives*
when every proof passes. Only ``hc-spec prove``'s own checks count: the committed docs snapshot is
not consulted, so an error that only a docs diff would show is a survivor.

Run from the repository root::

    python -m tools.spec_mutation              # the whole corpus, two mutants at a time
    python -m tools.spec_mutation --only shc_flops mhc_params --jobs 1
    python -m tools.spec_mutation --json out.json
    python -m tools.spec_mutation --kernel     # weaken each rejecting branch of the kernel

Exit code 0 when every mutant is killed, 1 when one survives (or a patch no longer applies).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "spec"


@dataclass(frozen=True)
class Patch:
    """One planted error: replace ``old`` (occurring exactly once in ``path``) by ``new``."""

    name: str
    path: str
    old: str
    new: str
    bug: str


CORPUS: tuple[Patch, ...] = (
    Patch("grad_x_no_transpose", "formulas.py", "s.H_res.T * s.G + s.h_pre * s.g_in.T",
          "s.H_res * s.G + s.h_pre * s.g_in.T", "bypass gradient uses H_res, not H_resᵀ"),
    Patch("g_z_reads_h_pre", "formulas.py", "return s.G.T * s.h_post",
          "return s.G.T * s.h_pre", "branch cotangent through h_pre instead of h_post"),
    Patch("grad_h_post_uses_x", "formulas.py", "return s.G * s.z", "return s.X * s.z",
          "∂L/∂h_post = X z instead of G' z"),
    Patch("forward_mix_transposed", "formulas.py", "return s.H_res * s.X + s.h_post * s.z.T",
          "return s.H_res.T * s.X + s.h_post * s.z.T", "the mix applies H_resᵀ"),
    Patch("aggregate_reads_h_post", "formulas.py", "return s.X.T * s.h_pre",
          "return s.X.T * s.h_post", "branch input read with h_post"),
    Patch("paper_reader_no_transpose", "network.py", "return A_m, B.T, A_r.T",
          "return A_m, B.T, A_r", "paper-matrix reader without its transpose (A_r, not A_rᵀ)"),
    Patch("paper_reader_reads_B", "network.py", "return A_m, B.T, A_r.T",
          "return B.T, B.T, A_r.T", "paper-matrix reader takes h_pre from B"),
    Patch("static_init_shift", "network.py", "1 if i == k % n else 0",
          "1 if i == (k + 1) % n else 0", "static init reads stream k+1 (an equivalent shift)"),
    Patch("replicate_doubled", "network.py", "sympy.ones(require_size(\"n\", n), 1) * h0.T",
          "2 * sympy.ones(require_size(\"n\", n), 1) * h0.T", "embedding replicated twice over"),
    Patch("unroll_writes_h_pre", "network.py",
          "writes = [sympy.ones(n, 1)] + [w.h_post for w in weights]",
          "writes = [sympy.ones(n, 1)] + [w.h_pre for w in weights]",
          "unrolled weights write back with h_pre"),
    Patch("dhc_no_tanh", "theorems/init.py",
          "h_pre=s_alpha * (X_bar * W_m).applyfunc(sympy.tanh) + static.h_pre",
          "h_pre=s_alpha * (X_bar * W_m) + static.h_pre", "dynamic read weights without tanh"),
    Patch("dhc_res_not_transposed", "theorems/init.py",
          "H_res=(s_alpha * (X_bar * W_r).applyfunc(sympy.tanh) + static.H_res.T).T",
          "H_res=(s_alpha * (X_bar * W_r).applyfunc(sympy.tanh) + static.H_res.T)",
          "dynamic A_r used as H_res without the transpose"),
    Patch("mhc_params", "counts.py", "(n**2 + 2 * n) + 3\n", "(n**2 + 2 * n) + 2\n",
          "mHC parameter count misses one gate scalar"),
    Patch("dhc_params", "counts.py", "DHC_PARAMS = theta_norm + d * (n + 2)",
          "DHC_PARAMS = theta_norm + d * (n + 1)", "DHC parameter count misses W_β"),
    Patch("shc_flops", "counts.py", "SHC_FLOPS = 2 * n * d * (n + 2)",
          "SHC_FLOPS = 2 * n * d * (n + 1)", "SHC FLOPs miss the depth connection"),
    Patch("dhc_flops", "counts.py", "+ 5 * n * d + 4 * n + 3 * n * (n + 2)",
          "+ 5 * n * d + 3 * n * (n + 2)", "DHC FLOPs miss the per-stream statistics"),
    Patch("mhc_flops", "counts.py", "4 * t * n**2)", "5 * t * n**2)",
          "mHC FLOPs overcount Sinkhorn–Knopp"),
    Patch("mhc_shapes", "theorems/counts.py", "(n * d, n**2), (n,)", "(n * d, n), (n,)",
          "φ_res shape n·d × n instead of n·d × n²"),
    Patch("sinkhorn_rows_first", "doubly_stochastic.py",
          "M = normalise_rows(normalise_columns(M))", "M = normalise_columns(normalise_rows(M))",
          "Sinkhorn–Knopp round ends with the column step"),
    Patch("row_normalise_squared", "doubly_stochastic.py", "M[i, j] / row[i, 0])",
          "M[i, j] / row[i, 0] ** 2)", "row normalisation divides by the squared sum"),
    Patch("rms_norm_eps", "norms.py", "x / sympy.sqrt(mean_square(x) + eps)",
          "x / sympy.sqrt(mean_square(x) + 2 * eps)", "RMSNorm with 2ε"),
    Patch("layer_norm_jacobian", "norms.py", "- x_hat * x_hat.T / d) / s",
          "- x_hat * x_hat.T) / s", "LayerNorm Jacobian misses 1/d on x̂x̂ᵀ"),
    Patch("numeric_grad_h_pre", "numeric.py",
          "_grad_h_pre = _lambdify([_S.X, _S.g_in], formulas.grad_h_pre(_S))",
          "_grad_h_pre = _lambdify([_S.X, _S.g_in], 2 * formulas.grad_h_pre(_S))",
          "numeric ∂L/∂h_pre doubled"),
    Patch("numeric_layer_norm_rms", "numeric.py",
          "centred = xa - np.mean(xa, axis=-1, keepdims=True)", "centred = xa",
          "numeric LayerNorm does not centre"),
    Patch("sigmoid_doubled", "theorems/mhc.py", "return 1 / (1 + sympy.exp(-x))",
          "return 2 / (1 + sympy.exp(-x))", "σ with range (0, 2)"),
    Patch("opcount_matmul", "opcount.py", "acc = acc + row[k] * b[k][j]",
          "acc = row[k] * b[k][j]", "the independent FLOP count forgets the accumulation"),
    Patch("parallel_even_matrix", "theorems/duality.py",
          "HC_PARALLEL_EVEN = sympy.Matrix([[0, 0, 1], [0, 1, 0], [1, 0, 1]])",
          "HC_PARALLEL_EVEN = sympy.Matrix([[0, 0, 1], [0, 1, 0], [1, 1, 1]])",
          "HC Eq. 19 typed with A_r = 11ᵀ"),
    Patch("parallel_eq55_literal", "theorems/duality.py",
          "e = unit(n, i if literal else i + 1)", "e = unit(n, i)",
          "Eq. 55 read with e_i (1-based): the group's later layers read stream i, not i + 1"),
    Patch("parallel_first_no_reset", "theorems/duality.py",
          "B, A_m, A_r = unit(n, 1).T, sympy.ones(n, 1), sympy.ones(n, n)",
          "B, A_m, A_r = unit(n, 1).T, sympy.ones(n, 1), sympy.eye(n)",
          "Eq. 54 with A_r = I: the group's first layer does not reset the streams"),
    Patch("parallel_induction_reads_sum", "theorems/duality.py",
          "network.read_blocks(e.T, e, sympy.Identity(n))  # Eq. 55",
          "network.read_blocks(e.T, one, sympy.Identity(n))  # Eq. 55",
          "general-n induction: the later layers read the stream sum"),
    Patch("parallel_unit_not_orthogonal", "theorems/lemmas.py",
          "sympy.Sum(sympy.KroneckerDelta(R, J) * sympy.KroneckerDelta(R, M),",
          "sympy.Sum(sympy.KroneckerDelta(R, J) * sympy.KroneckerDelta(R, J),",
          "unit-vector lemma: e_jᵀ e_m computed as e_jᵀ e_j"),
    Patch("parallel_eq53_count", "theorems/duality.py",
          "output = n * s_idx[c] + reduced", "output = (n - 1) * s_idx[c] + reduced",
          "general-n stream sum after a group counts s_g n − 1 times"),
    Patch("index_row_step_by_column", "sinkhorn_index.py",
          "A(i, j) / (total(A(i, index), index) + eps)",
          "A(i, j) / (total(A(index, j), index) + eps)",
          "index-form row step divides by the column sum"),
    Patch("index_column_step_by_row", "sinkhorn_index.py",
          "A(i, j) / (total(A(index, j), index) + eps)",
          "A(i, j) / (total(A(i, index), index) + eps)",
          "index-form column step divides by the row sum"),
    Patch("index_transpose_identity", "sinkhorn_index.py", "return lambda i, j: A(j, i)",
          "return lambda i, j: A(i, j)", "index-form transpose returns the matrix itself"),
    Patch("index_positive_eps_shift", "sinkhorn_index.py",
          "rows, columns = row_step(A, eps)(I, J), column_step(A, eps)(I, J)",
          "rows, columns = row_step(A, eps - 1)(I, J), column_step(A, eps - 1)(I, J)",
          "positivity lemma with ε − 1 in the denominators"),
    Patch("index_dhc_no_tanh", "theorems/init.py",
          "\"h_pre\": s_alpha * sympy.tanh(proj(_I, _W_M[_K])) + _STATIC_PRE[_I]",
          "\"h_pre\": s_alpha * proj(_I, _W_M[_K]) + _STATIC_PRE[_I]",
          "index-form DHC read weights without tanh"),
    Patch("index_dhc_res_untransposed", "theorems/init.py",
          "s_alpha * sympy.tanh(proj(_J, _W_R[_K, _I])) + _STATIC_RES[_I, _J]",
          "s_alpha * sympy.tanh(proj(_I, _W_R[_K, _J])) + _STATIC_RES[_I, _J]",
          "index-form DHC H_res without the transpose of A_r"),
    Patch("index_stream_norm_no_centre", "theorems/init.py",
          "return (_X_IDX[a, k] - mu) / sympy.sqrt(var + eps)",
          "return _X_IDX[a, k] / sympy.sqrt(var + eps)",
          "index-form per-stream LayerNorm does not centre"),
    Patch("index_dhc_static_doubled", "theorems/init.py",
          "s_beta * sympy.tanh(proj(_I, _W_BETA[_K])) + _STATIC_POST[_I]",
          "s_beta * sympy.tanh(proj(_I, _W_BETA[_K])) + 2 * _STATIC_POST[_I]",
          "index-form DHC write weights around 2·h_post"),
    Patch("n1_weight_includes_a_j", "theorems/remarks.py",
          "sympy.Product(_A_N1[_T], (_T, j + 1, k - 1)) * _Q_N1[j]",
          "sympy.Product(_A_N1[_T], (_T, j, k - 1)) * _Q_N1[j]",
          "n = 1 unrolled weight carries a_j as well (product from t = j)"),
    Patch("postnorm_index_weight_no_cross", "theorems/reduction.py",
          "weight = 1 / sympy.sqrt(second[\"x\"] + second[\"F\"] + 2 * second[\"xF\"] + eps)",
          "weight = 1 / sympy.sqrt(second[\"x\"] + second[\"F\"] + eps)",
          "index-form post-norm weight without the cross term 2σ_xF"),
    Patch("eq39_index_covariance_once", "theorems/reduction.py",
          "+ 2 * mean((x[k] - mx) * (f[k] - mf))", "+ mean((x[k] - mx) * (f[k] - mf))",
          "index-form Eq. 39 counts the covariance once"),
    Patch("unreachable_state_transposed", "theorems/reduction.py",
          "symbolic n, d\", state, (c.H_res * one) * x.T)",
          "symbolic n, d\", state, (c.H_res.T * one) * x.T)",
          "F ≡ 0 state claimed as (H_resᵀ 1) xᵀ"),
    Patch("permutation_row_short", "theorems/doubly_stochastic.py",
          "row = sympy.Sum(sympy.KroneckerDelta(sigma, j), (j, 0, n - 1))",
          "row = sympy.Sum(sympy.KroneckerDelta(sigma, j), (j, 0, n - 2))",
          "index-form permutation row sum over n − 1 entries"),
    Patch("permutation_pinned_reads_a_j", "theorems/doubly_stochastic.py",
          "pinned = sympy.Sum(a[i] * sympy.KroneckerDelta(sigma, j), (j, 0, n - 1))",
          "pinned = sympy.Sum(a[j] * sympy.KroneckerDelta(sigma, j), (j, 0, n - 1))",
          "pinned row of the vertex argument weighted by a_j, not a_i"),
    Patch("sums_no_factor", "sums.py",
          "factor_sum(sympy.Sum(term, *total.limits))", "sympy.Sum(term, *total.limits)",
          "finite sums split without pulling out the index-free factors"),
    Patch("swap_sum_identity", "sums.py",
          "return sympy.Sum(total.function, (j, *bounds_j), (i, *bounds_i))", "return total",
          "the order of a double sum is not swapped"),
    Patch("seed_loop_columns_first", "theorems/remarks.py",
          "M = normalise_columns_eps(normalise_rows_eps(M, eps), eps)",
          "M = normalise_rows_eps(normalise_columns_eps(M, eps), eps)",
          "the seed notes' Sinkhorn loop run in the paper's order"),
    Patch("soft_start_diagonal", "theorems/remarks.py",
          "return (sympy.exp(LAMBDA) - 1) * sympy.Identity(n) + one * one.T",
          "return sympy.exp(LAMBDA) * sympy.Identity(n) + one * one.T",
          "exp(λ I) written with e^λ + 1 on the diagonal"),
    Patch("unrolled_gradient_no_transpose", "theorems/duality.py",
          "total = below[-1].T * G_top", "total = below[-1] * G_top",
          "the unrolled bypass gradient uses H_L ⋯ H_1, not its transpose"),
    Patch("layer_norm_unbiased", "norms.py",
          "return sum(((xi - mu) ** 2 for xi in x), sympy.Integer(0)) / _check(x)",
          "return sum(((xi - mu) ** 2 for xi in x), sympy.Integer(0)) / (_check(x) - 1)",
          "LayerNorm with the unbiased variance (÷ (d − 1))"),
    Patch("gradient_sign", "theorems/backprop.py",
          "return variable.applyfunc(lambda entry: sympy.diff(loss, entry))",
          "return variable.applyfunc(lambda entry: -sympy.diff(loss, entry))",
          "entrywise gradient with the wrong sign"),
    Patch("derivative_at_doubled", "theorems/backprop.py",
          "return sympy.diff(phi(t), t).subs(t, point)",
          "return sympy.diff(phi(t), t).subs(t, 2 * point)", "φ' evaluated at 2z"),
    # the checking kernel (each must be caught by kernel.soundness inside prove)
    Patch("kernel_exact_zero_symbolic_true", "checks.py",
          "    if _symbolic_matrix_expr(residual):\n"
          "        evaluated = _doit(residual)",
          "    if _symbolic_matrix_expr(residual):\n        return True",
          "exact_zero answers True for every symbolic-size matrix expression"),
    Patch("kernel_ds_skips_exact_sums", "doubly_stochastic.py",
          "if any(sympy.expand(r) != 0 for r in residual):", "if False:",
          "require_doubly_stochastic skips its exact sum check"),
    Patch("kernel_swap_guard_off", "sums.py",
          "raise ValueError(f\"the limits of {total} depend on each other\")", "pass",
          "swap_sum swaps double sums with dependent limits"),
    Patch("kernel_link_default_true", "checks.py",
          "        return exact_zero(lefts[-1] - rights[-1])\n",
          "        return True\n", "a chain link the kernel cannot decide is accepted"),
    Patch("kernel_decide_ne_true", "checks.py",
          "return any(_provably_nonzero(entry) for entry in _entries(gap))", "return True",
          "decide answers True for every ≠"),
    Patch("kernel_decide_sign_any", "checks.py",
          "return any(getattr(form, attribute) is True",
          "return any(getattr(form, attribute) is not False",
          "decide accepts an inequality whose sign is unknown"),
    Patch("kernel_split_drops_constants", "sums.py",
          "terms = summand.args if summand.is_Add else (summand,)",
          "terms = [t for t in (summand.args if summand.is_Add else (summand,))"
          " if t.has(total.limits[0][0])]",
          "split_sums drops the terms free of the index"),
    Patch("kernel_no_unchecked_guard", "registry.py", "            if bad:\n",
          "            if False:\n",
          "the registry lets a proof display unchecked steps"),
    Patch("kernel_assume_unchecked", "steps.py",
          "    if not _mark_used(text):\n        raise ProofFailure(f\"the proof uses",
          "    if False:\n        raise ProofFailure(f\"the proof uses",
          "a proof may use an assumption it does not declare"),
    Patch("kernel_cite_unchecked", "steps.py",
          "if _key(fact) not in {_key(expr) for _, expr in result.steps if expr != PROSE}:",
          "if False:", "a citation may display a fact the lemma did not prove"),
    Patch("kernel_show_unchecked", "checks.py",
          "    if shown == value or _cheap_zero(shown - value):\n        return\n",
          "    return\n", "a compact display is not compared with the proven identity"),
    # displayed-only steps (each now compared with something)
    Patch("display_soft_start_target", "theorems/remarks.py",
          "target = sympy.Identity(N) + (one * one.T - N * sympy.Identity(N)) / scale",
          "target = sympy.Identity(N) + (one * one.T - (N - 1) * sympy.Identity(N)) / scale",
          "soft-start fixed point shown with n − 1 on the diagonal"),
    Patch("display_soft_start_limit_numerator", "theorems/remarks.py",
          "    off = 1 / scale\n", "    off = 2 / scale\n",
          "the off-diagonal entry whose limit is taken has another numerator (still → 0)"),
    Patch("display_product_entry_indices", "theorems/doubly_stochastic.py",
          "lambda h, k: sympy.Sum(h[_I, _K] * k[_K, _J], (_K, 0, N - 1))",
          "lambda h, k: sympy.Sum(h[_K, _I] * k[_K, _J], (_K, 0, N - 1))",
          "product-closure entry shown with H's indices swapped"),
    Patch("display_nonnegative_term", "theorems/doubly_stochastic.py",
          "    term = H[i, j] * (x[j] - m) ** 2\n", "    term = H[i, j] * (x[j] - m)\n",
          "the Jensen-gap term shown nonnegative without its square"),
    Patch("display_isometry_unsquared", "theorems/mhc.py",
          "    term = delta * (x[j] - value) ** 2\n", "    term = delta * (x[j] - value)\n",
          "the isometry gap term left unsquared"),
    Patch("display_witness_scale", "theorems/reduction.py",
          "a, b = _witness_entry(entry, 1), _witness_entry(entry, 2)",
          "a, b = _witness_entry(entry, 1), _witness_entry(entry, 3)",
          "post-norm contradiction witnessed at 3x₀ while the page says 2x₀"),
    Patch("display_sinkhorn_index_range", "sinkhorn_index.py",
          "    return sympy.Sum(summand, (index, 0, N - 1))",
          "    return sympy.Sum(summand, (index, 0, N - 2))",
          "the Sinkhorn lemmas' sums run over n − 1 indices"),
    Patch("display_sequential_reads_h_post", "theorems/duality.py",
          "read = ds.rewrite(x_in, [one.T, h_pre], sympy.Identity(1))",
          "read = ds.rewrite(x_in, [one.T, one], sympy.Identity(1))",
          "replicated induction reads with 1ᵀ1 = 1"),
    Patch("display_variant_round_eps", "theorems/mhc.py",
          "variant_round.subs(eps, 0), paper_round)),",
          "variant_round, paper_round)),",
          "the variant's round shown equal to the paper's at ε > 0"),
    Patch("display_rms_euler", "theorems/norm.py",
          "euler = sympy.Sum(closed.subs(eps, 0) * x[j], (j, 0, d - 1))",
          "euler = sympy.Sum(closed * x[j], (j, 0, d - 1))", "J x = 0 claimed at ε > 0"),
    # facts used are facts proven, assumptions, labels
    Patch("lemma_unit_sum_range", "theorems/lemmas.py",
          "sympy.Sum(sympy.KroneckerDelta(R, J), (R, 1, N)), 1, evaluate=False)",
          "sympy.Sum(sympy.KroneckerDelta(R, J), (R, 2, N)), 1, evaluate=False)",
          "lemma 1ᵀ e_j = 1 summed from r = 2"),
    Patch("lemma_earlier_streams_inclusive", "theorems/lemmas.py",
          "(J, 1, I)), 0,", "(J, 1, I + 1)), 0,", "P_iᵀ e_{i+1} = 0 with stream i + 1 included"),
    Patch("assumption_d_ge_2_dropped", "theorems/reduction.py",
          "        \"d ≥ 2 (the witness x₀ = e_0 − e_1 needs two entries).\",\n", "",
          "post-norm unreachability without its side condition d ≥ 2"),
    Patch("assumption_column_sums_dropped", "theorems/doubly_stochastic.py",
          "H ≥ 0 with unit column sums, 1ᵀ H = 1ᵀ (a doubly stochastic H has them); ",
          "H ≥ 0 (a doubly stochastic H has unit sums); ",
          "stream-sum theorem without the column-sum assumption it uses"),
    Patch("assumption_eps_real", "theorems/mhc.py",
          "eps = hypothesis(\"ε > 0\", \"epsilon\", weaker={\"real\": True}, positive=True)",
          "eps = sympy.Symbol(\"epsilon\", real=True)",
          "the Sinkhorn variant with ε real instead of ε > 0"),
    Patch("assumption_eps_declaration_dropped", "theorems/mhc.py",
          "        \"ε > 0.\",\n", "",
          "the Sinkhorn variant's hypothesis ε > 0 no longer declared"),
    Patch("assumption_eps_weaker_nonnegative", "theorems/mhc.py",
          "weaker={\"real\": True}, positive=True)",
          "weaker={\"real\": True}, nonnegative=True)",
          "the Sinkhorn variant's ε > 0 weakened to ε ≥ 0"),
    Patch("assumption_c_real", "theorems/norm.py",
          "Σ t = d t).\"\"\"\n    c = hypothesis(\"c > 0\", \"c\", weaker={\"real\": True}, "
          "positive=True)",
          "Σ t = d t).\"\"\"\n    c = sympy.Symbol(\"c\", real=True)",
          "scale invariance of the norms for any real c (c > 0 dropped)"),
    Patch("assumption_lambda_dropped", "theorems/doubly_stochastic.py",
          "\"A, B doubly stochastic.\", \"0 < λ < 1.\",", "\"A, B doubly stochastic.\",",
          "permutation vertices without 0 < λ < 1"),
    Patch("assumption_tau_real", "theorems/remarks.py",
          "tau = hypothesis(\"τ > 0\", \"tau\", weaker={\"real\": True}, positive=True)",
          "tau = sympy.Symbol(\"tau\", real=True)", "the seed loop's temperature τ any real"),
    Patch("assumption_entries_nonzero", "theorems/published.py",
          "assumptions=(\"M ∈ R^{n×n} with positive entries\",),",
          "assumptions=(\"M ∈ R^{n×n} with nonzero entries\",),",
          "DeepSeek-V4's last Sinkhorn–Knopp step on M with nonzero (not positive) entries"),
    Patch("assumption_zero_mean_dropped", "theorems/reduction.py",
          "        \"For LayerNorm, x and F(x) have zero mean (paper §3.1 / App. G: Norm's affine "
          "part is \"\n        \"absorbed into the next layer and its re-centring into the "
          "current one).\",\n", "",
          "post-norm reduction without zero-mean x and F(x)"),
    Patch("assumption_eps_nonnegative_real", "theorems/reduction.py",
          "eps = hypothesis(\"ε ≥ 0\", \"epsilon\", weaker={\"real\": True}, nonnegative=True)",
          "eps = sympy.Symbol(\"epsilon\", real=True)",
          "post-norm unreachability with ε any real"),
    Patch("assumption_iterate_not_positive", "theorems/doubly_stochastic.py",
          "\"M⁰ = exp(logits) > 0 entrywise.\",", "\"M⁰ = exp(logits) entrywise.\",",
          "Sinkhorn rows exact without M⁰ > 0"),
    Patch("assumption_uniqueness_dropped", "theorems/sinkhorn_gradient.py",
          "        \"exp(H̃) > 0 has a unique doubly stochastic scaling (Sinkhorn 1967), the limit "
          "of the \"\n",
          "        \"exp(H̃) > 0 has a doubly stochastic scaling, the limit of the \"\n",
          "implicit Sinkhorn gradient without the uniqueness of the scaling"),
    Patch("label_n1_induction", "theorems/remarks.py",
          "    base, step = induction(\n        (\"base case k = j",
          "    base, step = (\n        (\"base case k = j",
          "n1_expressiveness labelled induction without recording one (same steps displayed)"),
    Patch("published_dynamic_scale_swapped", "theorems/published.py",
          "B_x = [s_b * sympy.tanh(dot(j, W_b, 0)) + B[0, j] for j in range(N)]",
          "B_x = [s_a * sympy.tanh(dot(j, W_b, 0)) + B[0, j] for j in range(N)]",
          "HC's dynamic layout read with s_α where B(H) has s_β"),
    Patch("citation_earlier_streams_as_ones", "theorems/duality.py",
          "earlier = lemma_rewrite(\"lemma.unit_vectors\", lemmas.EARLIER_STREAMS, (P.T, e),",
          "earlier = lemma_rewrite(\"lemma.unit_vectors\", lemmas.ONES, (P.T, e),",
          "P_iᵀ e_{i+1} = 0 justified by citing 1ᵀ1 = n"),
    Patch("label_flops_grid_shrunk", "theorems/counts.py",
          "(tuple(range(1, DEGREE_BOUND[v] + 3)) for v in",
          "(tuple(range(1, DEGREE_BOUND[v] + 1)) for v in",
          "FLOP grid smaller than its degree bound needs"),
)
"""The planted errors (≥ 20), each a one-point patch of spec/."""


def _k(name: str, path: str, old: str, new: str, bug: str) -> Patch:
    return Patch(f"kernel_{name}", path, old, new, bug)


KERNEL_CORPUS: tuple[Patch, ...] = (
    # checks.py: the numeric gate and the exact zero test
    _k("gate_off", "checks.py", "            if not abs(value) <= GATE_TOLERANCE:",
       "            if False:", "numeric_gate never fails"),
    _k("require_zero_no_gate", "checks.py", "    else:\n        numeric_gate(label, residual)\n",
       "    else:\n        pass\n", "require_zero skips the numeric gate (explicit residuals)"),
    _k("require_zero_no_shape_gate", "checks.py", "            numeric_gate(label, instance)",
       "            pass", "require_zero skips the gate at explicit sizes"),
    _k("require_zero_no_exact", "checks.py",
       "    if not exact_zero(residual):\n        shown = str(residual)",
       "    if False:\n        shown = str(residual)",
       "require_zero trusts the numeric gate alone"),
    _k("exact_final_true", "checks.py",
       "    return all(sympy.simplify(entry.rewrite(sympy.exp)) == 0 for entry in entries)",
       "    return True", "exact_zero answers True when no stage shows zero"),
    _k("exact_expand_any", "checks.py",
       "    entries = [sympy.expand(_doit(entry)) for entry in _entries(residual)]\n"
       "    if all(entry == 0 for entry in entries):",
       "    entries = [sympy.expand(_doit(entry)) for entry in _entries(residual)]\n"
       "    if any(entry == 0 for entry in entries):", "expand stage: one zero entry suffices"),
    _k("exact_cancel_any", "checks.py",
       "    entries = [sympy.cancel(entry) for entry in entries]\n    if all(",
       "    entries = [sympy.cancel(entry) for entry in entries]\n    if any(",
       "cancel stage: one zero entry suffices"),
    _k("exact_simplify_any", "checks.py",
       "    entries = [sympy.simplify(entry) for entry in entries]\n    if all(",
       "    entries = [sympy.simplify(entry) for entry in entries]\n    if any(",
       "simplify stage: one zero entry suffices"),
    _k("exact_exp_any", "checks.py",
       "    return all(sympy.simplify(entry.rewrite(sympy.exp)) == 0 for entry in entries)",
       "    return any(sympy.simplify(entry.rewrite(sympy.exp)) == 0 for entry in entries)",
       "exp stage: one zero entry suffices"),
    _k("exact_symbolic_true", "checks.py", "        return _matrix_terms_cancel(residual)",
       "        return True", "a symbolic-size residual that does not simplify counts as zero"),
    _k("terms_no_matrix", "checks.py", "        if not matrix:\n            return False",
       "        if not matrix:\n            continue", "a term without a matrix factor is ignored"),
    _k("terms_any_group", "checks.py",
       "    return all(sympy.simplify(coefficient) == 0 for coefficient in groups.values())",
       "    return any(sympy.simplify(coefficient) == 0 for coefficient in groups.values())",
       "one cancelling product group makes the whole residual zero"),
    # checks.py: displays, the meta-check, relations
    _k("same_shape", "checks.py", "        if shown.shape != value.shape:", "        if False:",
       "a compact display of another shape is not named as such"),
    _k("same_exact", "checks.py",
       "    if not exact_zero(shown - value):\n"
       "        raise ProofFailure(f\"{label}: the displayed",
       "    if False:\n        raise ProofFailure(f\"{label}: the displayed",
       "a compact display is accepted when not cheaply equal"),
    _k("equal_left_display", "checks.py",
       "        for shown, value in ((left, lhs), (right, rhs)):",
       "        for shown, value in ((right, rhs),):",
       "the left side of a compact display unchecked"),
    _k("equal_right_display", "checks.py",
       "        for shown, value in ((left, lhs), (right, rhs)):",
       "        for shown, value in ((left, lhs),):",
       "the right side of a compact display unchecked"),
    _k("equal_shapes", "checks.py",
       "    if both_matrices and sympy.Tuple(*lhs.shape) != sympy.Tuple(*rhs.shape):",
       "    if False:", "require_equal does not compare shapes"),
    _k("independent_off", "checks.py",
       "    if lhs is rhs and bool(getattr(lhs, \"args\", ())):", "    if False:",
       "the meta-check lets one object stand on both sides"),
    _k("named_off", "checks.py", "    if isinstance(shown, sympy.Eq) and any(",
       "    if False and any(", "a relation decided through its own notation is accepted"),
    _k("nonzero_number", "checks.py",
       "        return bool(value != 0 and abs(complex(value.evalf(30))) > 0)",
       "        return True", "every number counts as non-zero"),
    _k("nonzero_poly", "checks.py",
       "        if poly.domain.is_ZZ or poly.domain.is_QQ:",
       "        if True:", "a polynomial with a coefficient that is 0 unsimplified counts as "
       "non-zero"),
    _k("nonzero_witness", "checks.py", "    return abs(number) > 1e-6", "    return True",
       "the numeric witness for ≠ always finds one"),
    _k("decide_eq", "checks.py",
       "            return exact_zero(relation.lhs - relation.rhs)\n        except",
       "            return True\n        except", "decide answers True for every ="),
    _k("decide_boolean", "checks.py",
       "        return bool(sympy.simplify(relation) == sympy.true)",
       "        return bool(sympy.simplify(relation) != sympy.false)",
       "an undecidable And / Or / Equivalent is accepted"),
    _k("decide_default", "checks.py",
       "        return bool(sympy.simplify(relation) == sympy.true)\n    return False\n",
       "        return bool(sympy.simplify(relation) == sympy.true)\n    return True\n",
       "decide accepts what is not a relation"),
    _k("true_condition", "checks.py", "    if condition is not True and condition != sympy.true:",
       "    if False:", "require_true ignores its computed condition"),
    _k("decided_shown", "checks.py",
       "    if not decide(relation):\n"
       "        raise ProofFailure(f\"{label}: the displayed relation",
       "    if False:\n        raise ProofFailure(f\"{label}: the displayed relation",
       "a displayed relation is not decided"),
    _k("nonnegative", "checks.py",
       "        if entry.is_nonnegative is not True and sympy.expand(entry).is_nonnegative is not "
       "True:", "        if False:", "require_nonnegative accepts any entry"),
    # checks.py: the chain and its rewrites
    _k("rename_guard", "checks.py",
       "        if fresh in total.free_symbols:\n            return total",
       "        if False:\n            return total",
       "renaming a bound index may capture a free one"),
    _k("push_guard", "checks.py",
       "        if indices & rest.free_symbols:\n            return total",
       "        if False:\n            return total", "a factor moved into a sum may be captured"),
    _k("cheap_default", "checks.py",
       "    return bool(value == 0 or getattr(value, \"is_ZeroMatrix\", False)",
       "    return bool(True or value == 0 or getattr(value, \"is_ZeroMatrix\", False)",
       "_cheap_zero answers True"),
    _k("block_any", "checks.py", "            return bool(a.blockshape == b.blockshape and all(",
       "            return bool(a.blockshape == b.blockshape and any(",
       "block matrices equal when one block is"),
    _k("block_shape", "checks.py", "            return bool(a.blockshape == b.blockshape and all(",
       "            return bool(all(", "block matrices compared without their block shape"),
    _k("link_default_true", "checks.py", "        return exact_zero(lefts[-1] - rights[-1])\n",
       "        return True\n", "a chain link the kernel cannot decide is accepted"),
    _k("require_link_off", "checks.py",
       "    if not _link_holds(lhs, rhs, facts):\n        raise ProofFailure(f\"{label}: {lhs}",
       "    if False:\n        raise ProofFailure(f\"{label}: {lhs}",
       "require_link checks nothing"),
    _k("chain_link_off", "checks.py",
       "        if not _link_holds(a, b, facts):\n            raise ProofFailure(f\"chain:",
       "        if False:\n            raise ProofFailure(f\"chain:", "chain checks no link"),
    _k("chain_notation", "checks.py", "    if any(is_notation(expr) for expr in exprs[1:]):",
       "    if False:", "notation allowed after the first side"),
    _k("chain_one_value", "checks.py", "    if len(values) < 2:", "    if False:",
       "a chain of notation and one value (nothing checked)"),
    _k("chain_one_side", "checks.py", "    if len(sides) < 2:", "    if False:",
       "a chain that displays A = A"),
    # sums.py
    _k("swap_single", "sums.py", "    if len(total.limits) != 2:", "    if False:",
       "swap_sum takes any sum"),
    _k("swap_dependent", "sums.py",
       "raise ValueError(f\"the limits of {total} depend on each other\")", "pass",
       "swap_sum swaps double sums with dependent limits"),
    _k("split_drops_constants", "sums.py",
       "terms = summand.args if summand.is_Add else (summand,)",
       "terms = [t for t in (summand.args if summand.is_Add else (summand,))"
       " if t.has(total.limits[0][0])]", "split_sums drops the terms free of the index"),
    # steps.py
    _k("unchecked_off", "steps.py", "        if _key(expr) not in checked:", "        if False:",
       "unchecked() reports nothing"),
    _k("assume_off", "steps.py",
       "    if not _mark_used(text):\n        raise ProofFailure(f\"the proof uses",
       "    if False:\n        raise ProofFailure(f\"the proof uses",
       "a proof may use an assumption it does not declare"),
    _k("granted_always", "steps.py",
       "    return dict(assumptions) if declared(text) else dict(weaker or {})",
       "    return dict(assumptions)", "a hypothesis's sympy assumption without its declaration"),
    _k("declared_always", "steps.py", "    return _mark_used(text)",
       "    _mark_used(text)\n    return True", "every assumption counts as declared"),
    _k("cite_failed_lemma", "steps.py",
       "    if not result.ok:\n        raise ProofFailure(f\"{label}: the cited lemma",
       "    if False:\n        raise ProofFailure(f\"{label}: the cited lemma",
       "a fact of a lemma whose proof failed may be cited"),
    _k("cite_display", "steps.py",
       "if _key(fact) not in {_key(expr) for _, expr in result.steps if expr != PROSE}:",
       "if False:", "a citation may display a fact the lemma did not prove"),
    _k("rewrite_cites_nothing", "steps.py",
       "    _, shown = cite(f\"using {lemma_id}\", lemma_id, fact, rename)\n    entry, row",
       "    shown = sympy.sympify(fact).xreplace(dict(rename or {}))\n    entry, row",
       "lemma_rewrite does not check the lemma displays its fact"),
    _k("rewrite_not_instance", "steps.py",
       "    if not (isinstance(shown, sympy.Eq) and "
       "_link_holds(sympy.sympify(rhs[at]), shown.rhs)\n"
       "            and _link_holds(entry, shown.lhs)):",
       "    if False:", "lemma_rewrite's rewrite need not be an instance of the cited fact"),
    # registry.py
    _k("registry_unchecked", "registry.py", "            if bad:\n", "            if False:\n",
       "the registry lets a proof display unchecked steps"),
    _k("unused_assumption", "registry.py", "            if unused:\n", "            if False:\n",
       "a theorem may declare an assumption no step uses"),
    _k("label_claim_exceeds", "registry.py",
       "            if self.generality is not None and RANK[self.generality] > RANK[earned]:",
       "            if False:", "a claimed label may exceed what the proof earns"),
    _k("label_induction", "registry.py", "    if sizes and proven_induction(steps):",
       "    if sizes:", "'induction' earned without a recorded checked induction"),
    _k("label_all_sizes", "registry.py", "    if sizes:\n        return \"all sizes\"",
       "    if True:\n        return \"all sizes\"",
       "'all sizes' earned without a checked step about a symbolic size"),
    _k("induction_unchecked", "steps.py",
       "        if expr == PROSE or (checked is not None and _key(expr) not in checked):",
       "        if expr == PROSE:", "an induction's base case or step need not be checked"),
    _k("induction_same_step", "steps.py", "    if _key(base[1]) == _key(step[1]):",
       "    if False:", "one step may be an induction's base case and its step"),
    _k("induction_no_size", "steps.py",
       "    if sizes is not None and not sizes.get(_key(step[1])):", "    if False:",
       "an induction step checked at one value only"),
    _k("induction_not_displayed", "steps.py",
       "    return any(base in shown and step in shown for base, step in",
       "    return any(True for base, step in",
       "an induction counts though its base case or step is not displayed"),
    _k("sizes_from_words", "steps.py",
       "        if expr != PROSE:\n            found |= sizes.get(_key(expr), frozenset())",
       "        if expr != PROSE:\n            found |= {\"n\"}",
       "any checked display counts as one about a symbolic size"),
    _k("exception_ok", "registry.py",
       "            error = traceback.format_exc()\n            return ProofResult(self.id, False,",
       "            error = traceback.format_exc()\n            return ProofResult(self.id, True,",
       "a proof that raises counts as proven"),
    # doubly_stochastic.py
    _k("ds_square", "doubly_stochastic.py",
       "    if n != cols:\n        raise ValueError(f\"{label}: expected a square",
       "    if False:\n        raise ValueError(f\"{label}: expected a square",
       "require_doubly_stochastic takes a non-square matrix"),
    _k("ds_gate", "doubly_stochastic.py", "    _gate(label, H, on, extra)\n", "    pass\n",
       "require_doubly_stochastic skips its numeric gate"),
    _k("ds_gate_sums", "doubly_stochastic.py",
       "        if any(abs(complex(v)) > 1e-12 for v in sums) or any(",
       "        if False and any(abs(complex(v)) > 1e-12 for v in sums) or any(",
       "the doubly stochastic gate ignores the sums"),
    _k("ds_nonnegative", "doubly_stochastic.py",
       "        if sympy.expand(entry).is_nonnegative is not True:", "        if False:",
       "require_doubly_stochastic skips nonnegativity"),
    _k("ds_exact_sums", "doubly_stochastic.py",
       "if any(sympy.expand(r) != 0 for r in residual):", "if False:",
       "require_doubly_stochastic skips its exact sum check"),
    # sinkhorn_index.py
    _k("index_positive", "sinkhorn_index.py",
       "    if value.is_positive is not True:\n"
       "        raise ProofFailure(f\"{label}: {value} is not",
       "    if False:\n        raise ProofFailure(f\"{label}: {value} is not",
       "index-form positivity accepts a value of unknown sign"),
    _k("index_reduces", "sinkhorn_index.py",
       "    if sympy.simplify(value - expected) != 0:\n        raise ProofFailure(f\"{label}: got",
       "    if False:\n        raise ProofFailure(f\"{label}: got",
       "index-form reductions accept any value"),
)
"""One-point weakenings of the checking kernel (``--kernel``): each makes one rejecting
branch accept; ``kernel.soundness`` plants an input that only that branch rejects, so prove
must fail on every one."""

_PROVE = """
import sys, time
from hcspec.spec.registry import all_theorems
start = time.perf_counter()
only = sys.argv[1:]
# the kernel's self-check first: a weakened kernel is caught in seconds (the verdict is the same)
for theorem in sorted(all_theorems(), key=lambda t: not t.id.startswith("kernel.")):
    if only and theorem.id not in only:
        continue
    result = theorem.prove()
    if not result.ok:
        print(f"KILLED {theorem.id} {time.perf_counter() - start:.1f}")
        sys.exit(1)
print(f"SURVIVED - {time.perf_counter() - start:.1f}")
"""


@dataclass(frozen=True)
class Outcome:
    """What ``hc-spec prove`` did with one mutant."""

    name: str
    bug: str
    status: str  # killed, survived, not applied, error
    theorem: str
    seconds: float
    detail: str = ""


def apply(patch: Patch, spec_copy: Path) -> None:
    """Apply ``patch`` to the copy of spec/ at ``spec_copy``.

    Raises:
        ValueError: when the text to replace does not occur exactly once.
    """
    target = spec_copy / patch.path
    text = target.read_text(encoding="utf-8")
    if text.count(patch.old) != 1:
        raise ValueError(f"{patch.name}: {patch.path} contains the text to replace "
                         f"{text.count(patch.old)} times, expected once")
    target.write_text(text.replace(patch.old, patch.new), encoding="utf-8")


def run_patch(patch: Patch, timeout: float, source: Path = SPEC,
              only: Sequence[str] = ()) -> Outcome:
    """Prove every theorem (or the ids ``only``) against ``source`` (spec/ or a snapshot of it)
    with ``patch`` applied, in a temporary copy."""
    with tempfile.TemporaryDirectory(prefix="spec-mutant-") as tmp:
        copy = Path(tmp) / "hcspec" / "spec"
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
        # a regular package first on PYTHONPATH: it, not the installed hcspec, holds hcspec.spec
        (copy.parent / "__init__.py").write_text("", encoding="utf-8")
        try:
            apply(patch, copy)
        except ValueError as error:
            return Outcome(patch.name, patch.bug, "not applied", "-", 0.0, str(error))
        env = dict(os.environ, PYTHONPATH=tmp, OMP_NUM_THREADS="1")
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-c", _PROVE, *only], cwd=tmp, env=env,
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return Outcome(patch.name, patch.bug, "error", "-", timeout, "timed out")
        seconds = time.perf_counter() - start
        words = (done.stdout.strip().splitlines() or [""])[-1].split()
        if words[:1] == ["KILLED"]:
            return Outcome(patch.name, patch.bug, "killed", words[1], seconds)
        if words[:1] == ["SURVIVED"]:
            return Outcome(patch.name, patch.bug, "survived", "-", seconds)
        return Outcome(patch.name, patch.bug, "error", "-", seconds, done.stderr[-500:])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the corpus (or ``--only`` some of it), print the table and the kill rate."""
    parser = argparse.ArgumentParser(prog="python -m tools.spec_mutation",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    parser.add_argument("--jobs", type=int, default=2, help="mutants proven at once (default 2)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds per mutant before it counts as an error (default 900)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the outcomes here")
    parser.add_argument("--kernel", action="store_true",
                        help="weaken the checking kernel instead: each rejecting branch in turn")
    args = parser.parse_args(argv)
    corpus = KERNEL_CORPUS if args.kernel else CORPUS
    known = {patch.name: patch for patch in corpus}
    unknown = [name for name in args.only or () if name not in known]
    if unknown:
        parser.error(f"unknown mutant(s) {unknown}; known: {sorted(known)}")
    patches = [known[name] for name in args.only] if args.only else list(corpus)
    with tempfile.TemporaryDirectory(prefix="spec-snapshot-") as snapshot:
        source = Path(snapshot) / "spec"  # one snapshot: edits made during the run do not leak in
        shutil.copytree(SPEC, source, ignore=shutil.ignore_patterns("__pycache__"))
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            outcomes = list(pool.map(lambda p: run_patch(p, args.timeout, source), patches))
    table = Table(title="spec mutants under `hc-spec prove`")
    for column in ("mutant", "planted error", "status", "first failing theorem", "seconds"):
        table.add_column(column, overflow="fold")
    for o in outcomes:
        table.add_row(o.name, o.bug, o.status if not o.detail else f"{o.status}: {o.detail}",
                      o.theorem, f"{o.seconds:.1f}")
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(table)
    killed = sum(o.status == "killed" for o in outcomes)
    console.print(f"killed {killed}/{len(outcomes)} by `hc-spec prove` alone "
                  f"({100 * killed / max(1, len(outcomes)):.0f} %)", markup=False)
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n",
                             encoding="utf-8")
    return 0 if killed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
