"""Naming how a target departs from DeepSeek-V4's published step: the single changes an
implementation has been seen to (or could) get wrong (:func:`neighbours`), the combinations seen
together in practice (:func:`core`), one phrase per change (:func:`describe`), the search over
them (:func:`search`, :func:`hcspec.conformance.machinery.divergence.nearest` over step
records) and the failure's sentence (:func:`message`). Used by ``published.step`` and the
published-checkpoint tests."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator

from hcspec.conformance.machinery import divergence
from hcspec.spec.published import DEEPSEEK_V4_FORMULA
from hcspec.spec.record import Count, Formula, Gate, Start


def neighbours(published: Formula) -> Callable[[Formula], Iterator[Formula]]:
    """The single changes of the search, each a place an implementation of DeepSeek-V4 has been
    seen to (or could) get wrong: the orientation of ``comb`` in the mix, the post multiplier
    (σ for 2σ) and where ``hc_eps`` goes, the positive start (sigmoid or exp for softmax),
    what the iteration count counts and one round more or fewer, the axis normalised last, a
    ``hc_scale`` entry on the wrong block, the RMS norm after the projection."""
    eps = published.h_pre.eps
    t = published.sinkhorn.effective_iterations

    def moves(f: Formula) -> Iterator[Formula]:
        sk = f.sinkhorn
        yield dataclasses.replace(f, transposed=not published.transposed)
        yield dataclasses.replace(f, h_post=dataclasses.replace(f.h_post, multiplier=1.0))
        yield dataclasses.replace(f, h_post=dataclasses.replace(f.h_post, eps=eps))
        yield dataclasses.replace(f, h_pre=dataclasses.replace(f.h_pre, eps=0.0))
        for start in ("sigmoid", "exp"):
            yield _with_start(f, start, sk.count)
        for count in ("rounds", "normalisations"):
            if sk.start == "softmax" or count != "rounds":
                yield _with_start(f, sk.start, count)
        for iterations in (t - 1, t + 1):
            if iterations >= 1:
                yield dataclasses.replace(f, sinkhorn=dataclasses.replace(
                    sk, iterations=iterations))
        yield dataclasses.replace(f, sinkhorn=dataclasses.replace(sk, exact_axis="rows"))
        yield dataclasses.replace(f, sinkhorn=dataclasses.replace(sk, additive_eps=0.0))
        yield dataclasses.replace(f, sinkhorn=dataclasses.replace(sk, denominator_eps=0.0))
        for scales in itertools.permutations((0, 1, 2)):
            if scales != (0, 1, 2):
                yield dataclasses.replace(f, scales=(scales[0], scales[1], scales[2]))
        yield dataclasses.replace(f, norm="projection")

    return moves


def _with_start(f: Formula, start: Start, count: Count) -> Formula:
    """``f`` with the positive start and the count changed; a count from the softmax without a
    softmax start is the count of rounds (what it computes)."""
    if count == "rounds_from_softmax" and start != "softmax":
        count = "rounds"
    return dataclasses.replace(f, sinkhorn=dataclasses.replace(f.sinkhorn, start=start,
                                                               count=count))


def core(published: Formula) -> Iterator[Formula]:
    """The divergences seen together in practice (transformers 5.8.0 and nano-deepseek-v4
    have four at once, none of which alone brings the output closer): every combination of
    the orientation, the post multiplier, ``hc_eps`` on post, the start and the count, tried
    first."""
    eps = published.h_pre.eps
    starts: tuple[Start, ...] = ("softmax", "sigmoid", "exp")
    counts: tuple[Count, ...] = ("rounds_from_softmax", "rounds")
    for transposed, multiplier, post_eps, start, count in itertools.product(
            (published.transposed, not published.transposed), (2.0, 1.0), (0.0, eps), starts,
            counts):
        yield _with_start(dataclasses.replace(
            published, transposed=transposed, h_post=Gate(multiplier, post_eps)), start, count)


def describe(formula: Formula, published: Formula) -> list[str]:
    """How ``formula`` departs from DeepSeek-V4's ``published`` record, one phrase per place."""
    out: list[str] = []
    f, p = formula, published
    sk, psk = f.sinkhorn, p.sinkhorn
    if f.transposed != p.transposed:
        out.append("orientation: X' = comb X where DeepSeek-V4 mixes combᵀ X")
    if f.h_post != p.h_post:
        eps = " + hc_eps" if f.h_post.eps else ""
        c = "" if f.h_post.multiplier == 1.0 else f"{f.h_post.multiplier:g}"
        out.append(f"post = {c}σ(·){eps} where DeepSeek-V4 has 2σ(·)")
    if f.h_pre.eps != p.h_pre.eps:
        out.append("pre = σ(·) without the published + hc_eps")
    if sk.start != psk.start:
        out.append(f"Sinkhorn–Knopp starts from {sk.start}(·) + eps where DeepSeek-V4 starts "
                   "from softmax(·, -1) + eps")
    if sk.count != psk.count and sk.start == "softmax":
        out.append(f"the rounds: the iteration count counts {sk.count} (DeepSeek-V4: the "
                   "softmax, a normalisation of axis -2, then iters - 1 (axis -1, axis -2) "
                   "rounds)")
    elif sk.count == "normalisations":
        out.append("the rounds: the iteration count counts single normalisations")
    delta = sk.effective_iterations - psk.effective_iterations
    if delta:
        out.append(f"the rounds: sinkhorn_iters {delta:+d}")
    if sk.exact_axis != psk.exact_axis:
        out.append("the rounds end with axis -1 of comb where DeepSeek-V4 ends with axis -2")
    if sk.additive_eps != psk.additive_eps:
        out.append("eps placement: no hc_eps added after the positive start")
    if sk.denominator_eps != psk.denominator_eps:
        out.append("eps placement: no hc_eps in the Sinkhorn–Knopp denominators")
    if f.scales != p.scales:
        blocks = ("pre", "post", "comb")
        wrong = ", ".join(f"the {blocks[b]} block uses hc_scale[{s}]"
                          for b, s in enumerate(f.scales) if s != b)
        out.append(f"scale on the wrong block: {wrong}")
    if f.norm != p.norm:
        out.append("the RMS norm is applied after the projection (to hc_fn · vec(X)) "
                   "instead of to vec(X) before it")
    return out


def search(error_of: Callable[[Formula], float], tolerance: float,
           published: Formula = DEEPSEEK_V4_FORMULA) -> divergence.Match[Formula]:
    """The DeepSeek-V4 variant whose step is closest to the output
    (:func:`hcspec.conformance.machinery.divergence.nearest` from ``published``: every
    combination of :func:`core` first, then greedy single changes); ``error_of(formula)``:
    the scaled error of that variant's step against the output, float64."""
    return divergence.nearest(error_of, published, tolerance,
                              distance=lambda f: len(describe(f, published)),
                              candidates=core(published), moves=neighbours(published))


def message(match: divergence.Match[Formula], published: Formula) -> str:
    """One sentence for the failure's detail."""
    changes = "; ".join(describe(match.formula, published)) or "no single published variant"
    if match.exact:
        return (f"diverges from DeepSeek-V4 by: {changes} (the output matches that "
                f"variant's step, scaled error {match.error:.3g})")
    return (f"closest published variant: {changes} (scaled error {match.error:.3g}, "
            "beyond the tolerance: the divergence is not one of the named classes alone)")
