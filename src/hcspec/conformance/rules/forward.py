"""The rules of forward comparisons, each with the budget it is written in: exact
conditions, the law (and the algebraic identities), the target against itself, range
bounds, another precision of the same impl and another device."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import torch

from hcspec.conformance.rules.base import Allowance, Precision, Rule, eps


def _exact(p: Precision, g: Mapping[str, Any]) -> Allowance:
    return Allowance(0.0, 0.0)


EXACT: Final = Rule(
    "exact", "no numeric tolerance: a condition that holds or not (shape, dtype, device, "
    "finiteness, bit equality)", "the condition is exact in every format", (), _exact)


# --- law, probes, reported-vs-probed, closed-form backward -------------------------------------
# One forward is a handful of dot products of length ≤ max(n, d) ≤ 64 in the kit's strategies;
# the standard bound for a k-term dot product is γ_k ≈ k·eps relative to the sum of magnitudes.
# Probing adds one pseudo-inverse of a full-row-rank X (n×d, d > n, Gaussian entries), whose
# error is cond(X)·eps; for the kit's Gaussian states cond(X) stays below ~1e2 (d ≥ n + 1, the
# smallest singular value of a Gaussian n×d matrix is ≈ √d − √n). 64·(64 + 1e2)·eps ≈ 1e4·eps;
# we allow 1e5·eps (float64: 2.2e-11) to stay clear of false alarms on bad draws while still
# being 1e7 times below the size of any real law violation (the mutants' errors are O(1)).
# For float32 (and coarser) the pseudo-inverse dominates less than the forward's own rounding
# (the impl rounds each op); 256·eps (float32: 3e-5) is γ_k for k = 64 with a 4× margin.
LAW_EPS_FACTOR: Final = 1e5


def law(dtype: torch.dtype) -> float:
    """Scaled-error tolerance for ``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` checks and probes."""
    return LAW_EPS_FACTOR * eps(dtype) if dtype == torch.float64 else 256 * eps(dtype)


# For bfloat16/float16 (the precision the impl returns, declared output_dtype, or the working
# dtype) a fixed 256·eps is 2.0 (bfloat16): a transposed H_res (0.47 scaled error) passes. The
# kit instead evaluates the spec's closed form in the impl's compute dtype from the same state
# and weights, rounded to its output dtype (hcspec.conformance.machinery.precision), measures
# *that* error against float64 on the same comparison (the law, the branch input, the probes)
# and allows LAW_REFERENCE_FACTOR times it (FlashAttention's tests allow 2× the error of the
# reference run in the same precision; the impl here also rounds its reported weights, which
# the reference takes as exact, so 8×). Floor: 4·eps of the dtype — on a case with few entries
# (n = 1, d = 2, three tokens) the reference's rounding can be small by luck while the impl's
# reported weights still carry their own rounding (eps/2 each; seen 1.15·eps on a correct
# bfloat16 output, where the reference measured less than eps/8).
LAW_REFERENCE_FACTOR: Final = 8.0
LAW_FLOOR_EPS: Final = 4.0


def law_measured(dtype: torch.dtype, reference_error: float) -> float:
    """Scaled-error tolerance of a law comparison in bfloat16/float16, given the error
    ``reference_error`` of the spec's closed form computed in that precision on the same
    comparison: ``max(4·eps, 8 × reference_error)``; :func:`law` for float32/float64."""
    if eps(dtype) <= eps(torch.float32):
        return law(dtype)
    return max(LAW_FLOOR_EPS * eps(dtype), LAW_REFERENCE_FACTOR * reference_error)


def law_allowance(p: Precision, g: Mapping[str, Any]) -> Allowance:
    """:data:`LAW` applied: ``g`` holds the check's inputs (``oracle``, ``factor``,
    ``roundings``, ``extra``; see the rule's summary)."""
    factor = float(g.get("factor", 1.0))
    oracle = g.get("oracle")
    if p.low and oracle is not None:
        roundings = float(g.get("roundings", 1))
        floor = max(float(oracle), roundings * LAW_FLOOR_EPS * eps(p.output)
                    / LAW_REFERENCE_FACTOR)
        return Allowance(floor, LAW_REFERENCE_FACTOR * floor + float(g.get("extra", 0.0)))
    return Allowance(eps(p.output) * factor,
                     law(p.output) * factor + float(g.get("extra", 0.0)))


LAW: Final = Rule(
    "law", "float64 1e5·eps, float32 256·eps (× factor) on the scaled error; bfloat16/float16 "
    "with a measured oracle: 8 × max(the oracle error, eps/2) — the spec's closed form "
    "evaluated from the same state and weights in the compute dtype, rounded to the output, "
    "against float64 on the same comparison; without one 256·eps",
    "γ_k of the kit's dot products (k ≤ 64) and the probes' pseudo-inverse (cond ≤ 1e2) with "
    "margin; FlashAttention's rule below float32 (the impl also rounds the weights it "
    "reports: 8×); a backward rounds twice at the output precision (the incoming gradient and "
    "the result), so its floor is at least eps (`roundings=2`), not eps/2; `extra` adds a term "
    "the check derived from the declaration (conventions.weights_scale_invariant: the norm "
    "epsilon's move of the state times the weights' measured sensitivity)",
    ("oracle?", "factor?", "roundings?", "extra?"), law_allowance)
IDENTITY: Final = Rule(
    "identity", "the law's budget for exact algebraic identities (n = 1 pre-norm, init ≡ "
    "pre-norm stack, dynamic at init ≡ static; mHC's n = 1 residual: plus the declared "
    "Sinkhorn–Knopp eps's deviation 2δ)", "the sides differ by the order of a few sums",
    ("oracle?", "factor?", "extra?"), law_allowance)


# --- self-consistency: the target against itself ---------------------------------------------
# Where the kit compares a target with ITSELF — a strided view vs its contiguous copy, the
# inference paths (no_grad, inference_mode, eval) vs the training path, a token alone vs the same
# token in a batch, a second call vs a fresh one — both sides run the same code in the same
# precision on the same values: the only legitimate difference is another reduction order
# (another kernel tile, another blocking of a matmul). In float64/float32 the law's budget
# (:func:`law`) is kept. In bfloat16/float16 that budget is 256·eps = 2.0 (bfloat16), more than
# any output of scale ~1 can differ, so the kit allows a few units of roundoff of the effective
# dtype relative to the output's magnitude:
# * computed in float32 (or finer; declared compute_dtype) and rounded to the output: the
#   reordered float32 sums differ by ~1e-7, which can flip the final rounding of an entry
#   (≤ eps·|X'|) and that of an intermediate the impl rounds to the output dtype (the branch
#   input, as TileKernels: ≤ eps·|x_in|, carried through h_post ≤ 2), 3·eps in all; we allow
#   SELF_CONSISTENCY_ROUNDED = 4·eps (bfloat16 0.031, float16 0.0039);
# * computed in bfloat16/float16 itself: a reordered sum of k ≤ 64 terms, whose rounding errors
#   add like a random walk, √64·eps/2 = 4·eps, on top of the above; we allow
#   SELF_CONSISTENCY_LOW = 8·eps (bfloat16 0.0625, float16 0.0078).
# Both stay far below the O(1) differences of the bugs these checks are written for (a result
# cached by shape, a kernel reading the wrong strides); a path taken above a token count whose
# statistic differs by little (the token_count_path mutant at perturbation 0.3: 3.6·eps in a
# bfloat16 output) is below them, which is what a bfloat16 output can resolve.
SELF_CONSISTENCY_ROUNDED: Final = 4.0
SELF_CONSISTENCY_LOW: Final = 8.0


def self_consistency(dtype: torch.dtype, compute_dtype: torch.dtype | None = None) -> float:
    """Scaled-error tolerance of a target compared with itself (another path, layout, batch or
    call on the same values) whose effective dtype is ``dtype`` and which computes in
    ``compute_dtype`` (the coarsest of the working and the declared compute dtype; ``None``:
    ``dtype``): :func:`law` for float64 and float32; for bfloat16/float16 ``4·eps`` when the
    computation is float32 or finer, else ``8·eps`` (see the comment above)."""
    if eps(dtype) <= eps(torch.float32):
        return law(dtype)
    if compute_dtype is not None and eps(compute_dtype) <= eps(torch.float32):
        return SELF_CONSISTENCY_ROUNDED * eps(dtype)
    return SELF_CONSISTENCY_LOW * eps(dtype)


def _self_consistency(p: Precision, g: Mapping[str, Any]) -> Allowance:
    factor = float(g.get("factor", 1.0))
    return Allowance(eps(p.output) * factor, self_consistency(p.output, p.compute) * factor)


SELF_CONSISTENCY: Final = Rule(
    "self_consistency", "the target against itself (another layout, path, batch or call): "
    "the law's budget in float64/float32; bfloat16/float16 4·eps (computed in float32 or "
    "finer) or 8·eps (× factor)",
    "both sides run the same code on the same values: only a reduction order differs",
    ("factor?",), _self_consistency)


# --- ranges ------------------------------------------------------------------------------------
def range_slack(dtype: torch.dtype, probed: bool) -> float:
    """Slack on the bounds of ``H_pre ∈ [0, 1]``, ``H_post ∈ [0, 2]``, ``H_res ≥ 0``: a correct
    σ/2σ/exp never leaves its range, so only the rounding of the value (probed: the probe's
    error) is allowed."""
    return law(dtype) if probed else 4 * eps(dtype)


def _range_slack(p: Precision, g: Mapping[str, Any]) -> Allowance:
    probed = bool(g.get("probed", False))
    return Allowance(eps(p.output), range_slack(p.output, probed))


RANGE_SLACK: Final = Rule(
    "range_slack", "4·eps of the output on a range bound (the law's when probed)",
    "σ, 2σ and exp never leave their range: only the value's rounding", ("probed?",),
    _range_slack)

# --- low precision vs float32 --------------------------------------------------------------------
# A forward in bfloat16/float16 rounds the inputs and parameters (eps/2 each), then every
# intermediate result: the RMS/Layer norm over n·d entries, the weight matmul, σ or tanh, up to
# 2·20 Sinkhorn normalisations, the aggregate, the kit's branch (a d×d matmul and tanh) and the
# n-term mix. The errors of successive elementwise roundings add, so ~30 roundings along the
# longest chain at eps/2 each gives ≈ 16·eps relative to the scale of the result. We allow
# 32·eps: bfloat16 0.25, float16 0.031. Measured on the reference (30 seeds × 4 shapes ×
# perturbations 0–1, parameters aligned across dtypes): worst 6.9·eps (float16, dynamic HC,
# perturbation 1), 2.3·eps for mHC. These catch structurally wrong low-precision paths (a
# dropped cast, a saturating float16 exp, a wrong branch) and nothing finer, which is all a
# 3-significant-digit dtype can promise.
LOW_PRECISION_EPS_FACTOR: Final = 32.0


def low_precision(dtype: torch.dtype) -> float:
    """Scaled-error tolerance of a bfloat16/float16 forward against the float32 forward."""
    return LOW_PRECISION_EPS_FACTOR * eps(dtype)


def _low_precision(p: Precision, g: Mapping[str, Any]) -> Allowance:
    dtype = g["dtype"]
    return Allowance(eps(dtype), low_precision(dtype))


LOW_PRECISION: Final = Rule(
    "low_precision", "32·eps of bfloat16/float16 on the scaled error against float32",
    "≈ 30 roundings along the longest chain at eps/2 each", ("dtype",), _low_precision)


MEASURED_FLOOR_FACTOR: Final = 4.0
"""The multiple of the measured floor ``dtype.low_precision_at_scale`` allows. The floor is the
largest of three ways a correct impl of that precision errs, each measured alone: the spec's
closed form computed in it (its own roundings of the weights and the mix); the float32 forward
moved by that precision's rounding of x and θ (its rounded inputs and parameters, random
signs); and, where the target offers ``logits``, the float32 weights moved by its logits held
in the compute dtype (an intermediate a correct impl must round). A correct impl pays all three
at most: 3 floors, with a third to spare over the max of ~10⁴ output entries. Measured (30-seed
``ci`` soak, docs/conformance.md): the reference mHC in bfloat16 at n = 8, d = 257, state scale
10 reaches 2.59 floors (its logits near 150 lose ~0.3 each to bfloat16, which the random-sign
jitter averages away); 2.5, the factor before, failed it. A systematic loss above 4 floors (a
reduction accumulated in the low precision; a bfloat16 running sum 7.9 floors off) fails."""


def _measured_floor(p: Precision, g: Mapping[str, Any]) -> Allowance:
    dtype, floor = g["dtype"], float(g["floor"])
    if eps(dtype) <= eps(torch.float32):
        return Allowance(floor, law(dtype))
    floor = max(floor, eps(dtype) / 2)
    return Allowance(floor, MEASURED_FLOOR_FACTOR * floor)


MEASURED_FLOOR: Final = Rule(
    "measured_floor", "another precision of the same impl (bfloat16/float16 vs float32): "
    "4 × the measured floor in that precision (at least eps/2, the output's rounding) — the "
    "floor is the largest of the error the spec's closed form makes in it against float64 on "
    "the same case, the float32 forward's move under that precision's rounding of x and θ, "
    "and the move of its weights under its logits held in the compute dtype",
    "a correct impl pays at most all three (its own roundings, its rounded inputs, its rounded "
    "logits): 3 floors, a third to spare; a systematic loss above 4 floors fails",
    ("dtype", "floor"),
    _measured_floor)


# --- device ------------------------------------------------------------------------------------
# CUDA and CPU kernels differ in summation order and in fused operations (FMA): each dot product
# may differ by γ_k on both sides, so twice the law tolerance of the dtype.
def device(dtype: torch.dtype) -> float:
    """Scaled-error tolerance between the CUDA and the CPU forward of the same impl."""
    return 2 * law(dtype)


def _device(p: Precision, g: Mapping[str, Any]) -> Allowance:
    return Allowance(eps(p.output), device(p.output))


DEVICE: Final = Rule("device", "twice the law's budget, CUDA vs CPU",
                     "another summation order and FMA on each side", (), _device)
