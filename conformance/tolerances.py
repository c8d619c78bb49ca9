"""Every numeric tolerance the kit uses, dtype-aware, each with its justification.

Comparisons use a *scaled error* (:func:`scaled_error`): ``max|got − want| / max(1, scale)``,
where ``scale`` is the magnitude of the quantities that were summed to produce ``want`` (e.g.
``max|X|`` and ``max|h_post zᵀ|``). Floating-point error of a sum is proportional to the sum of
the magnitudes of its terms, not to the result, so dividing by that magnitude makes one
tolerance per dtype valid across input scales.

The unit of every tolerance is the machine epsilon ``eps`` of the *effective* dtype: the coarsest
of the tensor dtype, the precision the impl declares it computes in
(:attr:`hcspec.conformance.protocol.Conventions.compute_dtype`) and the dtype it declares it
returns (:attr:`hcspec.conformance.protocol.Conventions.output_dtype`): every comparison is made
in the precision the impl returns.
"""

from __future__ import annotations

import math
from typing import Final

import torch

from hcspec.conformance import capture

_FLOAT_DTYPES: Final = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def eps(dtype: torch.dtype) -> float:
    """Machine epsilon of a floating dtype (float64 2.2e-16, float32 1.2e-7, float16 9.8e-4,
    bfloat16 7.8e-3).

    Raises:
        ValueError: ``dtype`` is not a floating dtype.
    """
    if dtype not in _FLOAT_DTYPES:
        raise ValueError(f"expected a floating dtype {_FLOAT_DTYPES}, got {dtype}")
    return float(torch.finfo(dtype).eps)


def effective_dtype(dtype: torch.dtype, compute_dtype: torch.dtype | None,
                    output_dtype: torch.dtype | None = None) -> torch.dtype:
    """The coarsest of the tensor dtype, the declared internal compute dtype and the declared
    output dtype (``None``: not declared)."""
    coarsest = dtype
    for declared in (compute_dtype, output_dtype):
        if declared is not None and eps(declared) > eps(coarsest):
            coarsest = declared
    return coarsest


# --- law, probes, reported-vs-probed, closed-form backward -------------------------------------
# One forward is a handful of dot products of length ≤ max(n, d) ≤ 64 in the kit's strategies;
# the standard bound for a k-term dot product is γ_k ≈ k·eps relative to the sum of magnitudes.
# Probing adds one pseudo-inverse of a full-row-rank X (n×d, d > n, Gaussian entries), whose
# error is cond(X)·eps; for the kit's Gaussian states cond(X) stays below ~1e2 (d ≥ n + 1, the
# smallest singular value of a Gaussian n×d matrix is ≈ √d − √n). 64·(64 + 1e2)·eps ≈ 1e4·eps;
# we allow 1e5·eps (float64: 2.2e-11) to stay clear of false alarms on bad draws while still
# being 1e7 times below the size of any real law violation (the mutants' errors are O(1)).
LAW_EPS_FACTOR: Final = 1e5


def law(dtype: torch.dtype) -> float:
    """Scaled-error tolerance for ``X' = H_res X + h_post F(h_preᵀ X)ᵀ`` checks and probes."""
    return LAW_EPS_FACTOR * eps(dtype) if dtype == torch.float64 else 256 * eps(dtype)


# For bfloat16/float16 (the precision the impl returns, declared output_dtype, or the working
# dtype) a fixed 256·eps is 2.0 (bfloat16): a transposed H_res (0.47 scaled error) passes. The
# kit instead evaluates the spec's closed form in the impl's compute dtype from the same state
# and weights, rounded to its output dtype (hcspec.conformance.properties.precision), measures
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


# For float32 (and coarser) the pseudo-inverse dominates less than the forward's own rounding
# (the impl rounds each op); 256·eps (float32: 3e-5) is γ_k for k = 64 with a 4× margin.


# --- doubly stochastic: the exactly normalised axis ---------------------------------------------
# Sinkhorn–Knopp's last step divides each row (or column) by its sum, so that sum is 1 up to the
# rounding of an n-term sum and a division: (n + 1)·eps. We allow 16·(n + 1)·eps for the
# log-domain variants (logsumexp and exp each add a few eps). When H_res is only available by
# probing (pseudo-inverse), the probe's error dominates and :func:`law` applies instead.
def exact_axis(dtype: torch.dtype, n: int, probed: bool) -> float:
    """Tolerance on ``|sum − 1|`` along the axis that Sinkhorn–Knopp normalised last."""
    if probed:
        return law(dtype) * max(1, n)
    return 16.0 * (n + 1) * eps(dtype)


def output_rounding(compute_dtype: torch.dtype, output_dtype: torch.dtype) -> float:
    """Relative rounding of a value computed in ``compute_dtype`` and returned in a coarser
    ``output_dtype``: ``eps(output)`` (twice the eps/2 of one rounding, so that a sum of rounded
    non-negative entries stays within it relative to the exact sum); 0 when the output is not
    coarser. A Sinkhorn–Knopp computed in float32 and returned in bfloat16 has its exact axis
    within :func:`exact_axis` of float32 plus this, far below :func:`exact_axis` of bfloat16
    (16·(n + 1)·eps = 0.625 at n = 4, which would hide a matrix that is not normalised)."""
    if eps(output_dtype) <= eps(compute_dtype):
        return 0.0
    return eps(output_dtype)


# --- doubly stochastic: the other axis (Birkhoff–Hopf bound) -------------------------------------
def projective_diameter(H: torch.Tensor) -> torch.Tensor:
    """Hilbert projective diameter Δ of each positive ``n×n`` matrix in ``H [..., n, n]``.

    ``Δ(H) = max_{i,j,k,l} log(H_ik H_jl / (H_il H_jk))``. It is invariant under scaling rows and
    columns by positive factors, so Δ of Sinkhorn–Knopp's *output* equals Δ of ``exp(logits)``:
    the kit measures the logit spread from the result alone, without seeing the logits.
    Returns ``[...]`` float64; ``inf`` where an entry is ≤ 0 or non-finite.
    """
    A = H.detach().to(torch.float64)
    bad = ~(A > 0).all(dim=-1).all(dim=-1) | ~torch.isfinite(A).all(dim=-1).all(dim=-1)
    logs = torch.log(A.clamp_min(torch.finfo(torch.float64).tiny))
    diff = logs.unsqueeze(-2) - logs.unsqueeze(-3)  # [..., i, j, k] = log H_ik − log H_jk
    spread = diff.amax(dim=-1) - diff.amin(dim=-1)
    delta = spread.amax(dim=-1).amax(dim=-1)
    return torch.where(bad, torch.full_like(delta, math.inf), delta)


def sinkhorn_other_axis_bound(
    H: torch.Tensor, iterations: int, dtype: torch.dtype, probed: bool
) -> torch.Tensor:
    """Upper bound on ``|sum − 1|`` along the axis Sinkhorn–Knopp did *not* normalise last.

    Justification (Birkhoff–Hopf; Franklin & Lorenz 1989). Write ``K = exp(logits)`` and the
    iterate after column-then-row round t as ``diag(r_t) K diag(c_t)``. Each round maps
    ``c ↦ 1/(Kᵀ (1/(K c)))``: two positive linear maps, each a contraction of Hilbert's projective
    metric ``d_H`` by ``κ = tanh(Δ/4)``, and two inversions, which are isometries. The first
    round's ``c_1 = 1/(Kᵀ 1)`` lies within ``Δ`` of the fixed point, so after T rounds
    ``d_H(c_T, c*) ≤ κ^{2(T−1)} Δ``, and every column sum of the row-normalised result lies in
    ``[e^{−δ}, e^{δ}]`` with ``δ = d_H(c_T, c*)`` (column j's sum is ``(c_T/c*)_j`` times
    ``(Kᵀr_T)_j/(Kᵀr*)_j``; both factors lie in ``[m, M]`` resp. ``[1/M, 1/m]`` with
    ``log(M/m) = δ``). Hence ``|colsum − 1| ≤ expm1(κ^{2(T−1)} Δ)``. (Row-then-column order:
    the same with ``K`` and ``Kᵀ`` exchanged.) Rounding adds the :func:`exact_axis` tolerance:
    the iteration is a contraction, so rounding errors do not accumulate over rounds — the
    rounded iterate stays within ~(n + 1)·eps/(1 − κ²) of the exact one, inside
    16·(n + 1)·eps while κ² ≤ 15/16 (Δ ≤ ~8); beyond that, at the paper's T = 20, the
    convergence term κ^{38}·Δ ≥ 0.2 dominates anyway.

    Measured against a correct float64 log-domain Sinkhorn (2000 random logit matrices for each
    n ∈ {2, 4, 8}, logit std ∈ {0.01, 0.3, 1, 2, 3, 10}, T ∈ {1, 2, 5, 10, 20}): never violated.
    The bound is tight where it matters (n = 4, std 1, T = 20: bound ≈ 4e-4, measured ≈ 3e-4) and
    becomes vacuous for large logit spreads (std 3: ~1e5), where the kit checks robustness
    instead (finite, non-negative, no all-zero row or column).

    Shapes: ``H [..., n, n]`` -> ``[...]`` float64 (``inf`` where Δ is infinite).

    Raises:
        ValueError: ``iterations < 1``.
    """
    if iterations < 1:
        raise ValueError(f"iterations: expected >= 1, got {iterations}")
    delta = projective_diameter(H)
    kappa = torch.tanh(delta / 4)
    drift = torch.where(
        torch.isfinite(delta), kappa.pow(2 * (iterations - 1)) * delta, delta
    )
    return torch.expm1(drift) + exact_axis(dtype, H.shape[-1], probed)


# --- ranges and non-expansiveness ---------------------------------------------------------------
def range_slack(dtype: torch.dtype, probed: bool) -> float:
    """Slack on the bounds of ``H_pre ∈ [0, 1]``, ``H_post ∈ [0, 2]``, ``H_res ≥ 0``: a correct
    σ/2σ/exp never leaves its range, so only the rounding of the value (probed: the probe's
    error) is allowed."""
    return law(dtype) if probed else 4 * eps(dtype)


# --- gradients -----------------------------------------------------------------------------------
# Finite differences in float64 with step h = 1e-6: truncation error O(h²·f⁽³⁾) ≈ 1e-12 relative
# to the derivative. Cancellation: each L = ⟨G', X'⟩ = Σ G'_i X'_i is computed with a rounding
# error of about √k·eps·M (k ≤ 768 terms adding like a random walk, M = Σ|G'_i X'_i|), so the
# difference quotient carries ~√k·eps·M/h — with M ≈ 2000 (scale-10 states) that is 4e-7,
# measured 1.3e-6 absolute on the reference (soak, 30 seeds; 0.43 of a fixed 1e-6 allowance).
# The check divides by max(1, |autograd|), so the allowance is FD_DIRECTIONAL plus
# :func:`fd_cancellation` over that divisor. torch.autograd.gradcheck uses the same step with
# atol 1e-5 / rtol 1e-3 by default.
FD_STEP: Final = 1e-6
GRADCHECK_ATOL: Final = 1e-5
GRADCHECK_RTOL: Final = 1e-3
FD_DIRECTIONAL: Final = 1e-6
"""Scaled error allowed between a central-difference directional derivative (step
:data:`FD_STEP`) and autograd's before cancellation: ~5000× the truncation error, and 1e5
below an O(1) wrong gradient."""
FD_CANCELLATION: Final = 32.0
"""√k for the kit's largest k = 768 terms of ⟨G', X'⟩ (see above)."""


def fd_cancellation(dtype: torch.dtype, loss_magnitude: float) -> float:
    """Absolute cancellation allowance of a float64 central difference (step :data:`FD_STEP`)
    of ``L = ⟨G', X'⟩`` whose terms have magnitude ``loss_magnitude = Σ|G'_i X'_i|``; 0 for an
    impl computing in float32 or coarser inside, whose measured budget
    (:data:`FD_DIRECTIONAL_COARSE`, below) already includes it."""
    if dtype != torch.float64:
        return 0.0
    return FD_CANCELLATION * eps(torch.float64) * loss_magnitude / FD_STEP


# An impl that declares it computes in float32 inside (Conventions.compute_dtype) rounds every
# loss evaluation to float32 even for float64 input: with step 1e-6 the cancellation error is
# eps32/1e-6 ≈ 0.1, so finite differences measure noise (hyper-connections' mHC: 0.22–0.79).
# A step that rises above float32 rounding must be relative to the state's magnitude, and its
# O(h²) truncation error is then removed by Richardson extrapolation over h and h/2
# (O(h⁴) remains). Measured on hyper-connections 0.4.11 ManifoldConstrainedHyperConnections
# (float32 inside, float64 input; 6 seeds × n ∈ {2, 4, 8} × d ∈ {5, 12, 24} × state scale
# {0.1, 1, 10} × parameter noise {0, 0.3, 1}, 3 directions each): plain central differences
# worst 7.4e-3 (step 1e-3) and 6.7e-2 (step 3e-3); Richardson with step 3e-3 worst 2.7e-3.
# The rounding noise of each float32 loss evaluation is proportional to the magnitude of the
# loss's terms, which grows with the state's magnitude, so the difference is compared relative to
# max(1, |autograd|, state scale) (:func:`fd_denominator`); w.r.t. the parameters the same step
# (the perturbed parameters are O(0.01–1)) gave worst 5.9e-3 relative to max(1, |autograd|)
# over the grid above, and 1.2e-2 on one ci case at state scale 10 with |autograd| = 0.48
# (1.2e-3 relative to the scale). We allow 1e-2 (≈ 4× the worst measured), still 10–100×
# below a wrong gradient (a detached residual or a transposed mix changes the directional
# derivative by O(0.1–1)).
FD_STEP_COARSE: Final = 3e-3
FD_DIRECTIONAL_COARSE: Final = 1e-2


# An impl that *returns* bfloat16 or float16 (declared output_dtype, as DeepSeek's TileKernels
# references) rounds every output entry by up to eps/2 of its magnitude: with the float32 step
# (3e-3 × the state's magnitude) X' moves by less than one ulp, and the difference quotient is
# an ulp over 2h (fd 0.535 vs autograd 0.327 seen). For such an output the kit evaluates the
# loss at FD_FIT_POINTS evenly spaced points of [−h, h] with h = FD_STEP_LOW × the magnitude of
# what is varied (X' then moves by ~8 ulps over the interval) and takes the slope at 0 of the
# least-squares polynomial of degree FD_FIT_DEGREE (truncation O(h⁴), as Richardson's). The
# slope is a fixed linear combination Σ w_j L(t_j), so the rounding in the L(t_j) changes it by
# at most max_j|δ_j| · Σ|w_j|. The rounding is a staircase in t (neighbouring points share
# ulps), so it is not averaged away, but the fit's residuals L(t_j) − p(t_j) measure it on the
# output the impl returned: the kit allows max_j|residual_j| · Σ|w_j| on top of
# :data:`FD_DIRECTIONAL_COARSE`. Where the loss moves by less than its rounding over the whole
# interval (a weak direction: n = 1, d = 2, one token, seen fd 0 vs autograd −0.044) the
# staircase may not step at all and the residuals are 0, so the kit adds the resolution of the
# returned output, eps/2 · ‖G' ⊙ X'‖₂ / h: the slope that one rounding unit of the loss over
# the half-interval makes (:func:`fd_resolution`). A smaller step would be buried in the
# staircase, a larger one leaves the range where a saturating branch (tanh at state scale 10)
# is a polynomial of degree 4.
FD_STEP_LOW: Final = 0.03
FD_STEP_LOW_LADDER: Final = (1.0, 1 / 3)
"""Fractions of :data:`FD_STEP_LOW` tried in turn: a strongly perturbed impl (parameters
N(0, 1) on an N(0, 0.02) init: logits ~10 at d = 20, state scale 10) is not a quartic over
[−h, h] (TileKernels' references: fd 6.3 vs autograd 39 at h = 0.3), and a smaller step has
more rounding; the property passes when one step of the ladder agrees within its own
allowance, and every step is evaluated so that the closest one is recorded (its ratio is the
verdict's margin). A wrong gradient disagrees at every step, but the allowance of bfloat16 finite
differences is wide: a detached residual in a bfloat16-output stand-in fails 24 of 180 cases
(n = 1–8, d = 2–12, state scale 0.1–10), against every case in float64."""
FD_FIT_POINTS: Final = 32
FD_FIT_DEGREE: Final = 4


def fd_fit(dtype: torch.dtype) -> bool:
    """Whether finite differences are a least-squares polynomial fit over
    :data:`FD_FIT_POINTS` points (a bfloat16/float16 effective dtype) instead of a central
    difference."""
    return eps(dtype) > eps(torch.float32)


def fd_fit_matrix() -> torch.Tensor:
    """``pinv(V) [FD_FIT_DEGREE + 1, FD_FIT_POINTS]`` float64 for the Vandermonde matrix ``V``
    of ``u = linspace(−1, 1, FD_FIT_POINTS)``: row k gives the coefficient of ``u^k`` of the
    least-squares polynomial (row 1 over the step: the slope at 0)."""
    u = torch.linspace(-1.0, 1.0, FD_FIT_POINTS, dtype=torch.float64)
    vandermonde = torch.stack([u ** k for k in range(FD_FIT_DEGREE + 1)], dim=1)
    pinv: torch.Tensor = torch.linalg.pinv(vandermonde)
    return pinv


def fd_fit_slope(values: torch.Tensor, step: float) -> tuple[float, float]:
    """``(slope at 0, rounding allowance)`` of the loss ``values [FD_FIT_POINTS]`` float64 taken
    at ``t = step · linspace(−1, 1)``: the least-squares polynomial's slope, and
    ``max|residual| · Σ|w|`` where ``w`` (row 1 of :func:`fd_fit_matrix` over ``step``) are the
    weights of the slope and the residuals those of the fit (see the comment above)."""
    pinv = fd_fit_matrix()
    u = torch.linspace(-1.0, 1.0, FD_FIT_POINTS, dtype=torch.float64)
    coefficients = pinv @ values
    vandermonde = torch.stack([u ** k for k in range(FD_FIT_DEGREE + 1)], dim=1)
    residual = values - vandermonde @ coefficients
    weights = pinv[1] / step
    return float(coefficients[1]) / step, float(residual.abs().max() * weights.abs().sum())


def fd_resolution(dtype: torch.dtype, weighted_norm: float, step: float) -> float:
    """``eps/2 · weighted_norm / step`` for a bfloat16/float16 effective dtype, where
    ``weighted_norm = ‖G' ⊙ X'‖₂`` is measured on the returned output: the smallest slope the
    rounded loss can show over ``[−step, step]``; 0 for float32 and float64."""
    if not fd_fit(dtype):
        return 0.0
    return eps(dtype) / 2 * weighted_norm / step


def fd_step(dtype: torch.dtype, scale: float = 1.0) -> float:
    """Finite-difference step for an impl whose effective dtype is ``dtype`` (the coarsest of
    the working, compute and output dtypes): :data:`FD_STEP` for float64;
    :data:`FD_STEP_COARSE` × ``scale`` (the magnitude of what is varied) for float32;
    :data:`FD_STEP_LOW` × ``scale`` for bfloat16/float16."""
    if dtype == torch.float64:
        return FD_STEP
    return (FD_STEP_COARSE if dtype == torch.float32 else FD_STEP_LOW) * scale


def fd_richardson(dtype: torch.dtype) -> bool:
    """Whether finite differences are Richardson-extrapolated (float32 and coarser inside)."""
    return dtype != torch.float64


def fd_denominator(dtype: torch.dtype, autograd: float, scale: float) -> float:
    """What ``|fd − autograd|`` is divided by: ``max(1, |autograd|)`` for float64;
    ``max(1, |autograd|, scale)`` for float32 and coarser inside, whose rounding noise grows
    with the state's magnitude ``scale``."""
    if dtype == torch.float64:
        return max(1.0, abs(autograd))
    return max(1.0, abs(autograd), scale)


def fd_directional(dtype: torch.dtype) -> float:
    """Scaled error allowed between finite differences and autograd's directional derivative
    for an impl whose effective dtype is ``dtype`` (see the comment above)."""
    return FD_DIRECTIONAL if dtype == torch.float64 else FD_DIRECTIONAL_COARSE


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


# --- float32 gradients vs float64 --------------------------------------------------------------
# Compared as one vector (∂L/∂x and every ∂L/∂θ), in relative 2-norm: rounding errors of correct
# float32 code concentrate in a few ill-conditioned entries, while a wrong float32 backward (a
# bfloat16 cast of the incoming gradient: ~2^-9 relative on every entry) moves the whole vector.
# Budget, two parts:
# * a floor for well-conditioned cases: a gradient entry sums ≤ k = B·T·max(n, d) ≤ 768 terms
#   in the kit's strategies, whose rounding errors add like a random walk, √k·eps32 ≈ 3e-6; we
#   allow 1024·eps32 ≈ 1.2e-4, ~10× below the ~1e-3 that one bfloat16 rounding of the incoming
#   gradient gives;
# * the case's own conditioning: correct float32 code behaves like exact code run on inputs
#   moved by a few unit roundoffs (backward stability), so the kit measures the sensitivity s —
#   how far the float64 gradients move when x and θ move by one eps32, relative, with random
#   signs (the max over GRADIENT_SENSITIVITY_SAMPLES draws) — and allows
#   GRADIENT_SENSITIVITY_FACTOR·s. A per-stream LayerNorm over d = 2 (dynamic HC) at state
#   scale 10 returns ±1 after a cancellation: measured error 3.2e-4 with s = 8.4e-5 (ratio 3.8,
#   the worst seen on the reference, found by the soak); on well-conditioned cases the ratio is
#   ≈ 0.5, and the bfloat16-cast mutant's is 5.7e3 (error 1.2e-3, s = 2e-7).
# * the kit's own branch: its float32 run computes tanh(x W₁) W₂ in float32, and near
#   saturation (d = 1, state scale 10) 1 − tanh² cancels, so the branch's float32 gradient alone
#   can be wrong by O(1) relative; where the residual path carries no gradient nothing dilutes
#   it (seen: error 3.9e-4 > 1.2e-4 on a static HC with a detached residual, n = 2, d = 1). The
#   kit measures it — the float64 gradients recomputed with only the branch in float32 — and
#   allows GRADIENT_BRANCH_FACTOR times that relative error; the target's own float32 rounding
#   stays under the two budgets above.
GRADIENT_FLOAT32_EPS_FACTOR: Final = 1024.0
GRADIENT_SENSITIVITY_FACTOR: Final = 32.0
GRADIENT_SENSITIVITY_SAMPLES: Final = 3
GRADIENT_BRANCH_FACTOR: Final = 4.0


def gradient_float32(sensitivity: float = 0.0, branch_error: float = 0.0) -> float:
    """Relative 2-norm tolerance of float32 gradients against float64 gradients, given the
    case's measured ``sensitivity`` (relative change of the float64 gradients under a one-eps32
    relative move of the inputs and parameters; 0 gives the well-conditioned floor) and
    ``branch_error`` (relative change of the float64 gradients when only the kit's branch
    computes in float32)."""
    return max(GRADIENT_FLOAT32_EPS_FACTOR * eps(torch.float32),
               GRADIENT_SENSITIVITY_FACTOR * sensitivity,
               GRADIENT_BRANCH_FACTOR * branch_error)


# --- device ------------------------------------------------------------------------------------
# CUDA and CPU kernels differ in summation order and in fused operations (FMA): each dot product
# may differ by γ_k on both sides, so twice the law tolerance of the dtype.
def device(dtype: torch.dtype) -> float:
    """Scaled-error tolerance between the CUDA and the CPU forward of the same impl."""
    return 2 * law(dtype)


# --- reductions and init identities --------------------------------------------------------------
def identity(dtype: torch.dtype) -> float:
    """Scaled-error tolerance of exact algebraic identities (n = 1 pre-norm, init ≡ pre-norm
    stack, dynamic at init ≡ static): the same rounding budget as :func:`law` — the sides
    differ only by the order of a few sums."""
    return law(dtype)


def scaled_error(got: torch.Tensor, want: torch.Tensor, scale: float | None = None) -> float:
    """``max|got − want| / max(1, scale)`` in float64 (``scale`` defaults to ``max|want|``);
    ``inf`` when either side is non-finite where the other is finite, or shapes differ. While
    a failing case is replayed (:mod:`hcspec.conformance.capture`) the two tensors are kept.

    Shapes: any, equal.
    """
    if got.shape != want.shape:
        return math.inf
    a = got.detach().to("cpu", torch.float64)
    b = want.detach().to("cpu", torch.float64)
    if a.numel() == 0:
        return 0.0
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return math.inf
    if scale is None:
        scale = float(b.abs().max())
    error = float((a - b).abs().max()) / max(1.0, scale)
    capture.note_comparison(a, b, scale, error)  # kept only while a failure is replayed
    return error


# --- trainability of the mixing -------------------------------------------------------------------
TRAINABLE_RELATIVE: Final = 1e-6
"""Smallest ‖∂L/∂θ‖ / (‖G'‖·‖X‖) accepted for ``L = ⟨G', H_res X⟩``. The reference gives
≥ 1e-3 at init (mHC: α = 0.01 scales the φ part, b_res still moves H_res at O(0.1)); a mixing
that ignores its parameters gives exactly 0, a saturated Sinkhorn–Knopp exp(−Δ) with Δ in the
hundreds — both below 1e-100."""


RULES: Final[dict[str, str]] = {
    "exact": "no numeric tolerance: a condition that holds or not (shape, dtype, device, "
             "finiteness, bit equality)",
    "law": "law(dtype): 1e5·eps in float64, 256·eps in float32, on the scaled error; in "
           "bfloat16/float16 law_measured: max(4·eps, 8 × the error of the spec's closed form "
           "computed in that precision on the same comparison) — law.reported, law.probed "
           "(its probe residuals: 8 × those of probing that closed form), "
           "law.reported_matches_probed (8 × what probing it reads back), scale.law; "
           "law.permutation_mixing (H_res steered to P within 4·eps, then 8 × the closed "
           "form's error with the steered weights); "
           "variant.h_res / variant.gates: 8 × the error of the declared variant or gates "
           "computed in that precision; depth.mhc_bounded's per-layer rounding; the 'H_res "
           "looks transposed' hint; the other 'law' properties keep 256·eps there",
    "self_consistency": "self_consistency(dtype): the target against itself (strides, "
                        "inference paths and repeated calls, batch composition, compiled vs "
                        "eager forward and backward): law(dtype) "
                        "in float64/float32; in bfloat16/float16 4·eps when computed in "
                        "float32 or finer, else 8·eps; on the scaled error",
    "identity": "identity(dtype): the law's budget for exact algebraic identities",
    "range_slack": "range_slack(dtype, probed): 4·eps on a range bound (the law's when probed)",
    "exact_axis": "exact_axis(dtype, n, probed): 16·(n + 1)·eps on Sinkhorn–Knopp's last axis "
                  "(depth.mhc_bounded in bfloat16/float16: that of the compute dtype plus "
                  "output_rounding, eps of the output)",
    "sinkhorn_other_axis": "sinkhorn_other_axis_bound: the Birkhoff–Hopf bound for the declared "
                           "rounds at the measured projective diameter",
    "fd_directional": "fd_directional(dtype) plus fd_cancellation: finite differences vs "
                      "autograd, relative to max(1, |autograd|)",
    "gradient_float32": "gradient_float32(sensitivity, branch_error): max(1024·eps32, 32 × the "
                        "case's measured conditioning, 4 × the measured error of the kit's "
                        "branch in float32), relative 2-norm",
    "low_precision": "low_precision(dtype): 32·eps of bfloat16/float16 on the scaled error",
    "device": "device(dtype): twice the law's, CUDA vs CPU",
    "trainable": "TRAINABLE_RELATIVE: relative gradient through the mixing ≥ 1e-6",
    "sinkhorn_fixed_point": "law(dtype) against the truncated forward's gradient; declared "
                            "implicit: law + 10·n·(column error)/(1 − σ₂(H_res)²) against the "
                            "fixed-point gradient",
}
"""The tolerance rules by name: name -> what it allows (the descriptions of
:mod:`hcspec.conformance.rules`, whose rule objects the harness applies; a property declares
the object, ``tolerance=rules.LAW``). A name listed here without an object there is accepted
for the transition (:func:`hcspec.conformance.rules.named`)."""
