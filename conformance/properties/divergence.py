"""Naming how an output departs from DeepSeek-V4's published step: a search over the published
variants (:class:`hcspec.conformance.published_formulas.DeepSeekV4Formula`) for the one whose
step the output matches.

Each field of the formula is one divergence class an implementation of DeepSeek-V4 has been
seen to (or could) get wrong: the orientation of ``comb`` in the mix (``comb X`` for
``combᵀ X``), the post multiplier (σ for 2σ) and where ``hc_eps`` goes, the positive start of
Sinkhorn–Knopp (sigmoid or exp for softmax), what the iteration count counts and the number of
rounds, the axis normalised last, a ``hc_scale`` entry applied to the wrong block, and the RMS
norm applied after the projection instead of to ``vec(X)``. The search is greedy: from the
published formula, it applies the single change that brings the variant's step closest to the
output, and repeats while the error drops by more than 10% (several divergences compound, as
in transformers 5.8.0).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from hcspec.conformance.published_formulas import PUBLISHED_DEEPSEEK_V4, DeepSeekV4Formula

MAX_CHANGES = 6
"""The most changes the search composes."""

IMPROVEMENT = 0.9
"""A change is kept when it brings the error below this fraction of the best so far (several
divergences compound: fixing one of them may lower the worst entry only a little)."""

_PERMUTATIONS = tuple(p for p in itertools.permutations((0, 1, 2)) if p != (0, 1, 2))

AXES: tuple[tuple[str, tuple[object, ...]], ...] = (
    ("mix", ("comb",)),
    ("post_multiplier", (1.0,)),
    ("post_eps", (True,)),
    ("pre_eps", (False,)),
    ("start", ("sigmoid", "exp")),
    ("count", ("rounds", "normalisations")),
    ("rounds_delta", (-1, 1)),
    ("exact_axis", ("rows",)),
    ("additive_eps", (False,)),
    ("denominator_eps", (False,)),
    ("scales", _PERMUTATIONS),
    ("norm", ("projection",)),
)
"""Each field of :class:`DeepSeekV4Formula` the search changes, and the values it tries."""


def describe(formula: DeepSeekV4Formula) -> list[str]:
    """How ``formula`` departs from the published DeepSeek-V4 formula, one phrase per field."""
    out: list[str] = []
    f = formula
    if f.mix == "comb":
        out.append("orientation: X' = comb X where DeepSeek-V4 mixes combᵀ X")
    if f.post_multiplier != 2.0 or f.post_eps:
        eps = " + hc_eps" if f.post_eps else ""
        c = "" if f.post_multiplier == 1.0 else f"{f.post_multiplier:g}"
        out.append(f"post = {c}σ(·){eps} where DeepSeek-V4 has 2σ(·)")
    if not f.pre_eps:
        out.append("pre = σ(·) without the published + hc_eps")
    if f.start != "softmax":
        out.append(f"Sinkhorn–Knopp starts from {f.start}(·) + eps where DeepSeek-V4 starts "
                   "from softmax(·, -1) + eps")
    if f.count != "rounds_from_softmax" and f.start == "softmax":
        out.append(f"the rounds: the iteration count counts {f.count} (DeepSeek-V4: the "
                   "softmax, a normalisation of axis -2, then iters - 1 (axis -1, axis -2) "
                   "rounds)")
    elif f.count == "normalisations":
        out.append("the rounds: the iteration count counts single normalisations")
    if f.rounds_delta:
        out.append(f"the rounds: sinkhorn_iters {f.rounds_delta:+d}")
    if f.exact_axis != "columns":
        out.append("the rounds end with axis -1 of comb where DeepSeek-V4 ends with axis -2")
    if not f.additive_eps:
        out.append("eps placement: no hc_eps added after the positive start")
    if not f.denominator_eps:
        out.append("eps placement: no hc_eps in the Sinkhorn–Knopp denominators")
    if f.scales != (0, 1, 2):
        blocks = ("pre", "post", "comb")
        wrong = ", ".join(f"the {blocks[b]} block uses hc_scale[{s}]"
                          for b, s in enumerate(f.scales) if s != b)
        out.append(f"scale on the wrong block: {wrong}")
    if f.norm != "input":
        out.append("the RMS norm is applied after the projection (to hc_fn · vec(X)) "
                   "instead of to vec(X) before it")
    return out


@dataclass(frozen=True)
class Match:
    """The result of the search.

    Attributes:
        formula: the variant found.
        error: its step's scaled error against the output.
        exact: whether that error is within the tolerance.
    """

    formula: DeepSeekV4Formula
    error: float
    exact: bool

    def message(self) -> str:
        """One sentence for the failure's detail."""
        changes = "; ".join(describe(self.formula)) or "no single published variant"
        if self.exact:
            return (f"diverges from DeepSeek-V4 by: {changes} (the output matches that "
                    f"variant's step, scaled error {self.error:.3g})")
        return (f"closest published variant: {changes} (scaled error {self.error:.3g}, "
                "beyond the tolerance: the divergence is not one of the named classes alone)")


CORE: tuple[tuple[str, tuple[object, ...]], ...] = (
    ("mix", ("comb_t", "comb")),
    ("post_multiplier", (2.0, 1.0)),
    ("post_eps", (False, True)),
    ("start", ("softmax", "sigmoid", "exp")),
    ("count", ("rounds_from_softmax", "rounds")),
)
"""The divergences seen together in practice (transformers 5.8.0 and nano-deepseek-v4 have
four at once, none of which alone brings the output closer): the search tries every
combination of these first."""


def _greedy(error_of: Callable[[DeepSeekV4Formula], float], tolerance: float,
            best: DeepSeekV4Formula, best_error: float) -> tuple[DeepSeekV4Formula, float]:
    """Single changes of :data:`AXES` from ``best`` while each lowers the error enough."""
    for _ in range(MAX_CHANGES):
        if best_error <= tolerance:
            break
        candidates = [dataclasses.replace(best, **{field: value})  # type: ignore[arg-type]
                      for field, values in AXES for value in values
                      if getattr(best, field) != value]
        scored = [(error_of(c), c) for c in candidates]
        error, formula = min(scored, key=lambda t: t[0] if t[0] == t[0] else float("inf"))
        if not error < IMPROVEMENT * best_error:
            break
        best, best_error = formula, error
    return best, best_error


def search(error_of: Callable[[DeepSeekV4Formula], float], tolerance: float,
           start: DeepSeekV4Formula = PUBLISHED_DEEPSEEK_V4) -> Match:
    """The variant whose step is closest to the output: every combination of :data:`CORE`
    from ``start``; if none matches, greedy single changes of :data:`AXES` from ``start`` and
    from the closest combination, the better of the two (``error_of(formula)``: the scaled
    error of that variant's step against the output, float64). Among matching variants, the
    one with the fewest divergences."""
    start_error = error_of(start)
    if start_error <= tolerance:
        return Match(start, start_error, True)
    scored = []
    for values in itertools.product(*(v for _, v in CORE)):
        changes = dict(zip((f for f, _ in CORE), values, strict=True))
        formula = dataclasses.replace(start, **changes)  # type: ignore[arg-type]
        scored.append((error_of(formula), formula))
    matching = [(len(describe(f)), e, f) for e, f in scored if e <= tolerance]
    if matching:  # the fewest changes that explain the output
        _, error, formula = min(matching, key=lambda t: (t[0], t[1]))
        return Match(formula, error, True)
    core_error, core = min(scored, key=lambda t: t[0] if t[0] == t[0] else float("inf"))
    results = [_greedy(error_of, tolerance, start, start_error),
               _greedy(error_of, tolerance, core, core_error)]
    best, best_error = min(results, key=lambda t: (t[1] > tolerance, len(describe(t[0])), t[1]))
    return Match(best, best_error, best_error <= tolerance)
def output_error(got: torch.Tensor, want: torch.Tensor, scale: float) -> float:
    """``max|got − want| / max(1, scale)`` in float64 (the kit's scaled error)."""
    return float((got.double() - want.double()).abs().max()) / max(1.0, scale)
