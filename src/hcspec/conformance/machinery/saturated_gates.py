"""``published.step``'s comparison of the gates at saturated logits: both gate logits set to
exactly :data:`SATURATED_LOGIT` through the target's ``load_published``, where an additive gate
eps (DeepSeek-V4's ``pre = σ(·) + hc_eps``) is nearly all of the gate, so a dropped or
misplaced eps moves it by ~100 % of its value (issue: the serving engines' kernels)."""

from __future__ import annotations

import torch

from hcspec.conformance import metrics
from hcspec.conformance.machinery.base import Context, f64
from hcspec.conformance.machinery.published_step import Params, cast_params, read
from hcspec.conformance.protocol import LOAD_PUBLISHED, WEIGHTS
from hcspec.conformance.strategies import Case
from hcspec.formulas import published as pub
from hcspec.spec.published import DEEPSEEK_V4, MHC_PAPER

SATURATED_LOGIT = -20.0
"""The gate logit of :func:`saturated`: ``σ(−20) = 2.1e-9``, three decades below DeepSeek-V4's
``hc_eps = 1e-6``, so at this logit ``pre = σ + eps`` is ~99.8 % eps and a dropped (or
misplaced) eps moves the gate by ~100 % of its value; ``exp(20) = 4.9e8`` is a normal number
in float32 and bfloat16 (no underflow), so a correct gate keeps its full relative precision."""

_GATED_LAYOUTS: frozenset[str] = frozenset({DEEPSEEK_V4, MHC_PAPER})
"""The layouts with gates ``c·σ(α·mixes + b) + eps`` (their records' ``h_pre``, ``h_post``
declare ``c`` and eps): their gate scales and biases are DeepSeek-V4's entries 0, 1 of
``hc_scale`` and first 2n of ``hc_base``, the mHC paper's ``alpha_pre``, ``alpha_post``,
``b_pre``, ``b_post``."""


def saturated(name: str, params: Params, n: int) -> Params | None:
    """``params`` with both gates' logits set to exactly :data:`SATURATED_LOGIT` at every token:
    the gates' scale 0 and their bias ``SATURATED_LOGIT`` (``H_res``'s tensors unchanged); None
    for a layout without such gates (:data:`_GATED_LAYOUTS`). Tensors are cloned, in
    their own dtype and device; settings kept.

    Why a zero scale: the logit is then the bias itself, exactly, in any dtype (−20 is
    representable in bfloat16), so a correct target's only error is that of ``σ`` and the
    ``+ eps`` in its own precision — no input rounding (a bfloat16 state moves the logits by
    ``|mixes|·2^-8``, a relative move of ``σ`` of the same size) enters the comparison.
    """
    if name not in _GATED_LAYOUTS:
        return None
    out: Params = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v)
                   for k, v in params.items()}
    with torch.no_grad():
        if name == DEEPSEEK_V4:
            for key, index in (("hc_scale", slice(0, 2)), ("hc_base", slice(0, 2 * n))):
                value = out[key]
                assert isinstance(value, torch.Tensor)
                value[index] = 0.0 if key == "hc_scale" else SATURATED_LOGIT
        else:
            for key, fill in (("alpha_pre", 0.0), ("alpha_post", 0.0),
                              ("b_pre", SATURATED_LOGIT), ("b_post", SATURATED_LOGIT)):
                value = out[key]
                assert isinstance(value, torch.Tensor)
                value.fill_(fill)
    return out


def expect_saturated_gates(ctx: Context, case: Case, params: Params,
                            x: torch.Tensor) -> None:
    """The target's reported ``h_pre``, ``h_post`` against the float64 published gates at
    saturated logits (:func:`saturated`, set through ``load_published`` into a fresh impl and
    read back), each compared relative to its own magnitude (:func:`metrics.relative_error`).

    Why: an additive gate eps (DeepSeek-V4's ``pre = σ(·) + hc_eps``, 1e-6) moves a gate of
    magnitude ~0.5 by 1e-6, under the law's budget for entries of scale 1 (float32: 256·eps =
    3.1e-5), so no comparison at unsaturated logits sees it dropped or misplaced. At the logit
    −20 the gate is ``σ(−20) + eps ≈ 1.002e-6`` and eps is all of it: dropped, the relative
    error is 0.998; added where none is published (post, 2σ(−20) = 4.1e-9), 240.

    Why the law's allowance holds for a correct target there, relative to the gate: the
    logit is exactly −20 (:func:`saturated`), ``σ(−20) = 1/(1 + exp(20))`` is a quotient of an
    exponential, each operation correct to its dtype's relative eps u (float32: ``exp(20)`` =
    4.9e8 is normal), so ``σ`` carries ≤ ~3u relative error and ``σ + eps`` (two positive
    terms, no cancellation) one more rounding: ≤ ~4u = 2.4e-7 in float32, under 256u = 3.1e-5
    with a factor 128 to spare. Below float32 the allowance is the law's same-precision floor,
    8 × the relative error of the published gates computed in the declared compute dtype and
    rounded to the weights' dtype (bfloat16: u = 2^-8 = 3.9e-3, the rounding alone up to u
    relative; the law's floor eps/2 = u gives 8u = 0.031), far under the 0.998 of a dropped
    eps. Measured: float32 weights 1.4e-8 (h_pre), 3.6e-8 (h_post); SGLang 0.5.23 and vLLM
    0.33.0 judged in bfloat16, 3.7e-3 and 2.5e-3. The tolerance is the law's, unchanged: only
    the scale the error is divided by is the gate's own.

    Assumed: a σ accurate to relative precision near 0 (``torch.sigmoid``, Triton's
    ``tl.sigmoid``); one written ``1 − σ(−z)`` or ``½(1 + tanh(z/2))`` cancels to 0 at −20
    in float32 and fails here (h_pre by 2e-3, h_post by 1.0) though the step moves by 2e-9.

    Runs where the layout has additive-eps gates and the target offers ``weights`` (reported,
    not probed: a probe's error is absolute) and ``load_published``; otherwise nothing is
    compared here (published.step's output comparison stands alone)."""
    name = str(ctx.conventions.published)
    if LOAD_PUBLISHED not in ctx.capabilities:
        return
    sat = saturated(name, params, case.n)
    if sat is None or WEIGHTS not in ctx.capabilities:
        return
    impl = ctx.build.make(case)
    getattr(impl, LOAD_PUBLISHED)(sat)
    held = read(ctx, impl)
    with torch.no_grad():
        got = getattr(impl, WEIGHTS)(x)
        want = pub.weights(name, cast_params(held, torch.float64), f64(x))
        at = ctx.weights_precision
        measured: list[float | None] = [None, None]
        if at.low:
            compute = ctx.conventions.compute_dtype or ctx.dtype
            rounded = pub.weights(name, cast_params(held, compute), f64(x).to(compute))
            measured = [metrics.relative_error(r.to(at.output), w)
                        for r, w in zip(rounded[:2], want[:2], strict=True)]
    formula = pub.mhc_layout(name).formula(held)
    with ctx.record.judged_in(at):
        for i, (gate, label) in enumerate(((formula.h_pre, "h_pre"),
                                           (formula.h_post, "h_post"))):
            words = (f"{gate.multiplier:g}·σ({SATURATED_LOGIT:g}) + {gate.eps:g}")
            ctx.record.expect(
                f"{label} at saturated gate logits ({SATURATED_LOGIT:g}, published "
                f"{words}) relative to its own magnitude", metrics.relative_error(
                    got[i], want[i]), oracle=measured[i],
                detail=_gate_eps_detail(got[i], want[i], gate.eps))


def _gate_eps_detail(got: torch.Tensor, want: torch.Tensor, eps: float) -> str:
    """Names an additive eps the saturated gate ``got`` matches instead of the published one
    (``want``, whose eps is ``eps``): none, or the published eps where none is declared."""
    g, w = f64(got), f64(want)
    for other, words in ((0.0, "without its additive eps"), (1e-6, "with an added 1e-6")):
        if other != eps and float((g - (w - eps + other)).abs().max()) <= 1e-2 * float(
                w.abs().max()):
            return f"the gate matches the published one {words} (published eps {eps:g})"
    return ""
