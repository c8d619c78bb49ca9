"""Exact family: where the math gives an exact result, the impl gives it to the last bit, in
every precision — a one-hot ``h_pre`` copies a stream, a permutation ``H_res`` permutes the
streams, and a branch output that cancels a stream gives exactly zero.

The kit cannot set an impl's weights exactly through the protocol; it reads them
(capability ``weights``) at states where they *are* exact: HC at its init (``h_pre = e_k``,
``h_post = 1``, ``H_res = I``, HC Eq. 14) and mHC with its parameters scaled ×1e4 (``σ`` and
log-domain Sinkhorn–Knopp saturate to exact 0/1 entries in every float format). Only the
tokens whose reported weights are exactly one-hot / a permutation / a power of two are
checked; a case with none is inconclusive, and a target with no conclusive case is not
applicable ("not demonstrated").

Products with 0 and 1, additions of 0, and negation are exact in IEEE arithmetic, so each
expected value is computed bit for bit; a tolerance of zero ulps applies in float64, float32,
bfloat16 and float16 (each precision the factory accepts). An impl that declares a coarser
``compute_dtype`` (or ``output_dtype``) may give the value rounded along that chain (a copy made
in float32 is the float32 rounding of the stream; a branch may receive it before or after the
rounding to the output dtype): each entry must equal the value itself, its rounding through the
compute dtype, or that rounded again to the output dtype. A stream cancelled by the branch is
zero within one unit of roundoff of the coarser declared compute or output dtype (the branch
may receive its input rounded).

A declared additive ε (DeepSeek-V4: ``H_pre = σ(·) + ε``, ``H_res`` from ``softmax(·) + ε``
with ε in the denominators) makes the saturated weights exact only up to ε: h_pre saturates to
``{ε, 1 + ε}``, never one-hot, and H_res to a permutation plus O(ε) entries. There the kit
takes the tokens whose reported weights lie within the declared ε (a few times it, plus the
rounding of the reported dtype) of the exact 0/1 pattern and checks the closed form of the
declared formula at those saturated logits — the copy, the permutation, the cancellation —
up to that measured deviation times the terms it multiplies plus the rounding of the
precision's chain (the rule :data:`hcspec.conformance.rules.EXACT_UP_TO_EPS`): exactness up to
the declared ε. Where even that pattern is never reached (a declared σ + ε start of
Sinkhorn–Knopp saturates every entry to {ε, 1 + ε}, so no row is one-hot) the case says why,
naming the declared variant.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from hcspec.conformance.author import (
    PROBED_H_PRE,
    WEIGHTS,
    Case,
    Cases,
    CheckedBranch,
    Context,
    FactoryRejected,
    HyperConnectionImpl,
    Inconclusive,
    capability,
    declare,
    rules,
    shift,
    size_rows,
)

BASE = ("shape.output", "shape.branch_once", "shape.weights")
PRECISIONS = (torch.float64, torch.float32, torch.bfloat16, torch.float16)
SATURATED = 1e4
"""The parameter scale at which mHC's weights saturate to exact 0/1 entries."""


def _examples(ctx: Context) -> list[Case]:
    at_init = [Case(2, 3, 4, 8, layer_index=k, seed=k) for k in (0, 1)]
    at_init.append(Case(1, 4, 3, 5, layer_index=5, seed=2))
    saturated = [Case(4, 8, n, 8, seed=10 + n, perturb=1.0, param_scale=SATURATED)
                 for n in (2, 3, 4)]
    if ctx.kind != "mhc":
        return shift(ctx, at_init) + size_rows(ctx, Case(1, 4, 4, 8, layer_index=6, seed=3))
    return shift(ctx, saturated) + size_rows(
        ctx, Case(4, 8, 4, 8, seed=20, perturb=1.0, param_scale=SATURATED))


CASES = Cases(oracle=True)
"""The domain of the explicit examples (no exploration): the profile's sizes
(:func:`size_rows`) at init for HC, saturated for mHC."""


def _precisions(ctx: Context) -> list[torch.dtype]:
    return [ctx.dtype] + [p for p in PRECISIONS if p != ctx.dtype and
                          torch.finfo(p).eps >= torch.finfo(ctx.dtype).eps]


def _impls(ctx: Context, case: Case) -> Iterator[tuple[torch.dtype, HyperConnectionImpl]]:
    """An impl for the case in each precision the factory accepts.

    Raises:
        FactoryRejected: the factory rejected the case in every precision (an unsupported
            size, e.g. a declared ``supported_expansion_rates``): the case is skipped, and the
            property is not applicable only when every case is."""
    built = 0
    for dtype in _precisions(ctx):
        try:
            impl = ctx.build.make(case, dtype=dtype)
        except FactoryRejected:
            continue
        built += 1
        yield dtype, impl
    if not built:
        raise FactoryRejected(f"the factory rejected every precision for n={case.n}, "
                              f"d={case.d}")


def _state(ctx: Context, case: Case, dtype: torch.dtype) -> torch.Tensor:
    return ctx.inputs.state(case, dtype=torch.float64).to(dtype)


def _roundings(ctx: Context, want: torch.Tensor) -> list[torch.Tensor]:
    """The exact values ``want`` may legitimately arrive as, as float64 (every float format
    converts to float64 exactly): ``want`` itself, then rounded through the declared compute
    dtype, then through the declared output dtype, each step where that dtype is coarser than
    the value's (a copy computed in float32 and returned in bfloat16 is the bfloat16 rounding of
    the float32 rounding; an impl may hand the branch its aggregate before or after rounding it
    to its output dtype)."""
    chain = [want.double()]
    for declared in (ctx.conventions.compute_dtype, ctx.conventions.output_dtype):
        if declared is not None and torch.finfo(declared).eps > torch.finfo(want.dtype).eps:
            want = want.to(declared)
            chain.append(want.double())
    return chain


def _matches_any(got: torch.Tensor, candidates: list[torch.Tensor]) -> tuple[bool, torch.Tensor]:
    """``(every entry of got equals the same entry of some candidate, the candidate closest to
    got)``: shapes equal, float64."""
    hit = torch.zeros_like(got, dtype=torch.bool)
    for c in candidates:
        hit |= got == c
    closest = min(candidates, key=lambda c: int((got != c).sum()))
    return bool(hit.all()), closest


def _output_ulp(ctx: Context, dtype: torch.dtype) -> float:
    """One unit of roundoff of the coarser of the declared compute and output dtypes where it
    is coarser than ``dtype`` (0 otherwise): an impl that computes or returns bfloat16 may hand
    the branch its input rounded to it (as TileKernels' references do), so a branch that
    cancels what it receives leaves the rounding of the stream, at most one such unit relative
    to the stream."""
    coarsest = torch.finfo(dtype).eps
    for declared in (ctx.conventions.compute_dtype, ctx.conventions.output_dtype):
        if declared is not None:
            coarsest = max(coarsest, torch.finfo(declared).eps)
    return 0.0 if coarsest == torch.finfo(dtype).eps else float(coarsest)


NEAR_SLACK = 4.0
"""How many declared ε a saturated weight may sit from its exact 0/1 value (σ + ε, and the
denominators' ε of up to n terms, move it by ε each)."""


def _declared_eps(ctx: Context) -> tuple[float, float]:
    """``(ε of h_pre, ε of H_res)``: the declared ``h_pre_eps`` and
    ``n``-independent part of Sinkhorn–Knopp's ``additive_eps + denominator_eps`` (0 when the
    declared formulas have none: the bit-exact checks apply)."""
    c = ctx.conventions
    return c.formula.h_pre.eps, c.formula.sinkhorn.additive_eps + c.formula.sinkhorn.denominator_eps


def _near(h: torch.Tensor, eps: float, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pattern, deviation)``: ``h`` rounded to its nearest 0/1 values after removing an
    additive ``eps``, and ``|h − pattern|`` (float64); an entry is accepted when its deviation
    is within ``NEAR_SLACK·n·eps`` plus one unit of roundoff of ``h``'s dtype at its value."""
    v = h.detach().double()
    pattern = (v - eps).round().clamp(0.0, 1.0)
    deviation = (v - pattern).abs()
    slack = NEAR_SLACK * max(1, n) * eps + torch.finfo(h.dtype).eps * v.abs()
    return torch.where(deviation <= slack, pattern, torch.full_like(v, 0.5)), deviation


def _near_one_hot(h: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask [...], pattern [..., n])``: tokens whose h_pre is one-hot up to the declared
    ``eps``, and the one-hot pattern."""
    pattern, _ = _near(h, eps, 1)
    return _one_hot(pattern), pattern


def _near_permutation(H: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask [...], pattern [..., n, n])``: tokens whose H_res is a permutation up to the
    declared ``eps`` (each entry within ``NEAR_SLACK·n·eps`` of 0 or 1), and the
    permutation."""
    pattern, _ = _near(H, eps, H.shape[-1])
    return _permutation(pattern), pattern


def _never_reached(ctx: Context, what: str) -> str:
    """Why no token reached the exact pattern, per declared variant."""
    c = ctx.conventions
    if what == "H_res" and c.formula.sinkhorn.start == "sigmoid":
        return ("declared sinkhorn_variant='sigmoid': σ(·) + ε saturates every entry of the "
                "start to {ε, 1 + ε}, so its rows are not one-hot and no normalisation makes a "
                "permutation: this target's H_res is never exact, whatever its logits")
    eps_pre, eps_res = _declared_eps(ctx)
    eps = eps_pre if what == "h_pre" else eps_res
    if eps:
        return (f"no token's reported {what} is within the declared ε = {eps:g} of the exact "
                "0/1 pattern (saturated logits of the declared formula)")
    return f"no token's reported {what} is exactly 0/1 at these states"


def _one_hot(h: torch.Tensor) -> torch.Tensor:
    """``[..., n]`` -> bool ``[...]``: exactly one entry is 1 and the others 0."""
    return ((h == 1).sum(-1) == 1) & (((h == 0) | (h == 1)).all(-1))


def _permutation(H: torch.Tensor) -> torch.Tensor:
    """``[..., n, n]`` -> bool ``[...]``: a permutation matrix, exactly."""
    ones = H == 1
    return (((H == 0) | ones).all(-1).all(-1) & (ones.sum(-1) == 1).all(-1)
            & (ones.sum(-2) == 1).all(-1))


def _branch(case: Case, fn: object) -> CheckedBranch:
    return CheckedBranch(fn, case.d)  # type: ignore[arg-type]


def _expect_near(ctx: Context, label: str, got: torch.Tensor, want: torch.Tensor,
                 x: torch.Tensor, n: int, deviation: float, dtype: torch.dtype) -> None:
    """Record ``max|got − want| / max(1, max|x|)`` (float64) under
    :data:`hcspec.conformance.rules.EXACT_UP_TO_EPS` for the precision ``dtype`` along the
    declared chain, with ``deviation`` the declared-ε part relative to ``max|x|``."""
    scale = max(1.0, float(x.double().abs().max())) if x.numel() else 1.0
    err = float((got.double() - want.double()).abs().max()) / scale if got.numel() else 0.0
    c = ctx.conventions
    ctx.record.expect(label, err, rule=rules.EXACT_UP_TO_EPS, n=n, deviation=deviation,
                      dtype=dtype, compute_dtype=c.compute_dtype, output_dtype=c.output_dtype,
                      detail=_differ(got, want))


def _res_deviation(H: torch.Tensor, P: torch.Tensor, mask: torch.Tensor, eps: float) -> float:
    """How far the mixing of the masked tokens may be from ``P X`` relative to ``max|X|``: n
    times the larger of the reported H_res's measured distance from ``P`` and the declared
    formula's ``n·ε`` (a reported dtype may round the ε away)."""
    n = H.shape[-1]
    measured = float((H.double() - P)[mask].abs().max()) if bool(mask.any()) else 0.0
    return n * max(measured, n * eps)


def _differ(got: torch.Tensor, want: torch.Tensor) -> str:
    bad = got != want
    worst = float((got.double() - want.double()).abs().max()) if got.numel() else 0.0
    return f"{int(bad.sum())} of {bad.numel()} entries differ, max |diff| {worst:.3g}"


@declare(
    "exact.one_hot_copy",
    statement="a one-hot h_pre = e_k makes the branch input exactly stream k, in every precision",
    theorems=("init.static_prenorm",), requires=(capability(WEIGHTS), PROBED_H_PRE),
    secondary=(rules.EXACT_UP_TO_EPS,), examples=_examples, cases=CASES, prerequisites=BASE,
    explore=False)
def check_one_hot_copy(ctx: Context, case: Case) -> None:
    """At every token whose reported h_pre is exactly ``e_k``, the branch receives ``X_k``
    bit for bit (0 ulps; or its rounding along the declared compute and output dtypes,
    :func:`_roundings`), in each precision the factory accepts. With a declared ``h_pre_eps``
    (σ + ε): at every token whose h_pre is ``e_k`` up to ε, the branch receives the declared
    closed form ``(1 + ε)·X_k + ε·Σ_{j≠k} X_j`` up to the chain's rounding
    (:data:`hcspec.conformance.rules.EXACT_UP_TO_EPS`)."""
    seen = 0
    eps_pre, _ = _declared_eps(ctx)
    for dtype, impl in _impls(ctx, case):
        x = _state(ctx, case, dtype)
        h_pre = ctx.observe.weights(impl, x)[0].detach()
        mask, pattern = _near_one_hot(h_pre, eps_pre) if eps_pre else (_one_hot(h_pre), h_pre)
        if not bool(mask.any()):
            continue
        seen += int(mask.sum())
        branch = ctx.inputs.branch(case, "zero", dtype=dtype)
        ctx.observe.forward(impl, x, branch)
        if eps_pre:
            declared = pattern + eps_pre  # σ saturated to 0/1 exactly, plus the declared ε
            want64 = (declared.unsqueeze(-2) @ x.double()).squeeze(-2)
            measured = float((h_pre.double() - declared)[mask].abs().max())
            _expect_near(ctx, f"{dtype}: branch input vs (1 + ε)·X_k + ε·Σ_(j≠k) X_j at the "
                         f"{int(mask.sum())} tokens with h_pre = e_k + ε (declared ε = "
                         f"{eps_pre:g})", branch.inputs[0].double()[mask], want64[mask],
                         x[mask], case.n, case.n * measured, dtype)
            continue
        k = h_pre.argmax(-1)  # [B, T]
        want = torch.gather(x, -2, k[..., None, None].expand(*k.shape, 1, case.d)).squeeze(-2)
        got = branch.inputs[0].double()[mask]
        same, closest = _matches_any(got, [w[mask] for w in _roundings(ctx, want)])
        ctx.record.require(same,
                           f"{dtype}: branch input vs stream k at the {int(mask.sum())} tokens "
                           f"with h_pre exactly e_k (or its rounding through the declared "
                           f"compute, then output dtype): {_differ(got, closest)}")
    if not seen:
        raise Inconclusive(_never_reached(ctx, "h_pre").replace("exactly 0/1", "exactly "
                                                                 "one-hot"))


@declare(
    "exact.permutation_mixing",
    statement="a permutation H_res with F ≡ 0 permutes the streams exactly, in every precision",
    theorems=("ds.permutation_vertices",), requires=(capability(WEIGHTS),),
    secondary=(rules.EXACT_UP_TO_EPS,), examples=_examples, cases=CASES, prerequisites=BASE,
    explore=False)
def check_permutation_mixing(ctx: Context, case: Case) -> None:
    """At every token whose reported H_res is exactly a permutation matrix P, with F ≡ 0 the
    output is ``P X`` bit for bit (0 ulps; or its rounding along the declared compute and
    output dtypes, :func:`_roundings`), in each precision the factory accepts. With a
    declared Sinkhorn–Knopp ε (softmax + ε, ε in the denominators): at every token whose H_res
    is P up to ε, the output is ``P X`` up to that ε times the streams plus the chain's
    rounding (:data:`hcspec.conformance.rules.EXACT_UP_TO_EPS`)."""
    seen = 0
    _, eps_res = _declared_eps(ctx)
    for dtype, impl in _impls(ctx, case):
        x = _state(ctx, case, dtype)
        H = ctx.observe.weights(impl, x)[2].detach()
        mask, P = _near_permutation(H, eps_res) if eps_res else (_permutation(H), H)
        if not bool(mask.any()):
            continue
        seen += int(mask.sum())
        out = ctx.observe.forward(impl, x, ctx.inputs.branch(case, "zero", dtype=dtype,
                                                             record=False)).detach()
        if eps_res:
            want64 = P @ x.double()
            _expect_near(ctx, f"{dtype}: X' vs P X at the {int(mask.sum())} tokens with H_res "
                         f"= P up to the declared ε = {eps_res:g} (F ≡ 0)",
                         out.double()[mask], want64[mask], x[mask], case.n,
                         _res_deviation(H, P, mask, eps_res), dtype)
            continue
        source = H.argmax(-1)  # stream i of the output is input stream source[i]
        want = _roundings(
            ctx, torch.gather(x, -2, source[..., None].expand(*source.shape, case.d)))
        got = out.double()[mask]
        same, closest = _matches_any(got, [w[mask] for w in want])
        ctx.record.require(same,
                           f"{dtype}: X' vs P X at the {int(mask.sum())} tokens with H_res "
                           f"exactly a permutation P (F ≡ 0; or its rounding through the "
                           f"declared compute, then output dtype): {_differ(got, closest)}",
                           hint="mixing computed as X + (H_res − I) X, or through another "
                                "precision?")
    if not seen:
        raise Inconclusive(_never_reached(ctx, "H_res").replace("exactly 0/1",
                                                                 "exactly a permutation matrix"))


def _power_of_two(h: torch.Tensor) -> torch.Tensor:
    mantissa, _ = torch.frexp(h.double())
    return (h > 0) & (mantissa == 0.5)


@declare(
    "exact.cancelling_streams",
    statement="a branch output that cancels a stream exactly gives exactly zero on that stream",
    theorems=("init.static_prenorm",), requires=(capability(WEIGHTS), PROBED_H_PRE),
    secondary=(rules.EXACT_UP_TO_EPS,), examples=_examples, cases=CASES, prerequisites=BASE,
    explore=False)
def check_cancelling_streams(ctx: Context, case: Case) -> None:
    """At every token with h_pre exactly ``e_k``, H_res exactly a permutation that sends
    input stream k to output stream i, and ``h_post_i`` an exact power of two, the branch
    ``F(u) = −u / h_post_i`` (exact) makes output stream i exactly zero:
    ``X_k − h_post_i · X_k / h_post_i = 0`` (0 ulps; within one unit of roundoff of a declared
    coarser compute or output dtype relative to the stream, :func:`_output_ulp`), in each
    precision."""
    seen = 0
    eps_pre, eps_res = _declared_eps(ctx)
    near = bool(eps_pre or eps_res)
    for dtype, impl in _impls(ctx, case):
        x = _state(ctx, case, dtype)
        h_pre, h_post, H = (w.detach() for w in ctx.observe.weights(impl, x))
        one_hot, pre_pattern = _near_one_hot(h_pre, eps_pre) if near else (_one_hot(h_pre),
                                                                           h_pre)
        permutation, P = _near_permutation(H, eps_res) if near else (_permutation(H), H)
        hit = one_hot & permutation
        k = pre_pattern.argmax(-1)  # [B, T]
        i = torch.gather(P.argmax(-2), -1, k[..., None]).squeeze(-1)  # P[i, k] = 1
        post = torch.gather(h_post, -1, i[..., None]).squeeze(-1)
        hit &= _power_of_two(post)
        if not bool(hit.any()):
            continue
        seen += int(hit.sum())
        scale = torch.where(hit, -1.0 / post.double(), torch.zeros_like(post.double()))
        scale = scale.to(dtype)[..., None]
        out = ctx.observe.forward(impl, x, _branch(case, lambda u, s=scale: u * s)).detach()
        got = torch.gather(out, -2, i[..., None, None].expand(*i.shape, 1, case.d)).squeeze(-2)
        stream = torch.gather(x, -2, k[..., None, None].expand(*k.shape, 1, case.d)).squeeze(-2)
        if near:  # X_k + O(ε)·X − (1 + ε)·X_k − ε·Σ X_j: zero up to the declared ε
            deviation = (_res_deviation(H, P, hit, eps_res) + (case.n + 1) * eps_pre)
            _expect_near(ctx, f"{dtype}: output stream i = π(k) at the {int(hit.sum())} tokens "
                         "where F(u) = −u / h_post_i cancels it, up to the declared ε",
                         got[hit], torch.zeros_like(got[hit]), x[hit], case.n, deviation,
                         dtype)
            continue
        allowed = _output_ulp(ctx, dtype) * stream[hit].double().abs()
        expected = ("0" if not bool(allowed.any()) else
                    "0 within one ulp of the declared coarser precision")
        ctx.record.require(bool((got[hit].double().abs() <= allowed).all()),
                           f"{dtype}: output stream i = π(k) at the {int(hit.sum())} tokens "
                           f"where F(u) = −u / h_post_i cancels it: "
                           f"{_differ(got[hit], torch.zeros_like(got[hit]))} (expected "
                           f"{expected})")
    if not seen:
        variant = (f" ({_never_reached(ctx, 'H_res')})"
                   if ctx.conventions.formula.sinkhorn.start == "sigmoid" else "")
        raise Inconclusive("no token's reported weights have h_pre exactly one-hot, H_res "
                           "exactly a permutation and the matching h_post a power of two"
                           + (" (up to the declared ε)" if near else "") + variant)
