"""Tolerance rules as objects the harness applies (the OpInfo model: tolerances are data).

A property declares its rule, ``@declare(..., tolerance=rules.LAW)``, and may declare
secondary rules (``secondary=(rules.RANGE_SLACK,)``) for comparisons of another nature. A check
never computes an allowance itself: it calls ``ctx.record.expect(label, error, **given)`` with
what the rule needs (``n``, ``probed``, the measured ``oracle`` error, a ``convergence`` term,
a ``factor``...) and the recorder applies the declared rule (``rule=rules.X`` picks a declared
secondary one) to the run's :class:`Precision` — the dtype chain: the working dtype, the
dtype the impl computes in (its weights, its Sinkhorn–Knopp) and the dtype it returns. The
recorder keeps, for every comparison, the rule's name, the *floor* (the error a correct
implementation of that precision makes on that comparison: a measured oracle error where the
check measures one, else the rounding unit the rule's budget is stated in), the *allowance*
and the ratios error ÷ allowance and error ÷ floor; every failure message shows all four.

Below float32 the floor follows FlashAttention's rule: the error the spec's closed form makes
against float64 when evaluated in the target's precision along its declared dtype chain
(``oracle``), or, where no oracle is run, the rounding that chain makes (one rounding of the
output, ``eps(output)``, plus the compute dtype's own budget). The allowance is a small,
documented multiple of that floor (:data:`FLOOR_MULTIPLE`), so a correct bfloat16 impl stays
at or below half of it (``docs/conformance.md``, "Tolerances", is generated from
:data:`ALL`).

Migration from the explicit form: ``ctx.record.expect(label, error, tolerances.law(dtype))``
becomes ``ctx.record.expect(label, error)`` under a property declared ``tolerance=rules.LAW``
(``oracle=...`` where the check measured the closed form in the target's precision,
``factor=...`` for a scaled budget). The explicit float is still accepted during the
transition and recorded as the rule :data:`EXPLICIT`, which the meta-test
(``tests/conformance/test_rules.py``) names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import torch

from hcspec.conformance import tolerances
from hcspec.conformance.tolerances import eps


@dataclass(frozen=True)
class Precision:
    """The dtype chain of one run.

    Attributes:
        dtype: the kit's working dtype (the state it builds and hands over).
        compute: the dtype the impl computes in (its weights, Sinkhorn–Knopp, the mixing):
            the coarsest of ``dtype`` and the declared ``compute_dtype``.
        output: the effective dtype (what every comparison is made in): the coarsest of
            ``dtype`` and the declared ``compute_dtype`` and ``output_dtype``.
        sinkhorn_eps: the declared ``sinkhorn_denominator_eps`` δ (0: none): every
            normalisation ``M / (M.sum(axis) + δ)`` leaves the sums ``s/(s + δ)``, so the
            Sinkhorn–Knopp constraints allow the deviation it implies
            (:func:`sinkhorn_eps_deviation`).
    """

    dtype: torch.dtype
    compute: torch.dtype
    output: torch.dtype
    sinkhorn_eps: float = 0.0

    @classmethod
    def of(cls, dtype: torch.dtype, compute_dtype: torch.dtype | None,
           output_dtype: torch.dtype | None, sinkhorn_eps: float = 0.0) -> Precision:
        """The chain of a run in ``dtype`` under the declared compute and output dtypes (and
        the declared Sinkhorn–Knopp denominator eps)."""
        return cls(dtype, tolerances.effective_dtype(dtype, compute_dtype),
                   tolerances.effective_dtype(dtype, compute_dtype, output_dtype),
                   float(sinkhorn_eps))

    @property
    def low(self) -> bool:
        """Whether the comparisons are made in bfloat16/float16 (the measured-floor rules)."""
        return eps(self.output) > eps(torch.float32)

    @property
    def rounding(self) -> float:
        """Relative rounding of a value computed in ``compute`` and returned in ``output``
        (:func:`hcspec.conformance.tolerances.output_rounding`; 0 when they agree)."""
        return tolerances.output_rounding(self.compute, self.output)


@dataclass(frozen=True)
class Allowance:
    """What a rule allows on one comparison.

    Attributes:
        floor: the error a correct impl of the run's precision makes there (measured oracle
            error, else the rounding unit of the rule); 0 for exact conditions.
        allowance: the largest error accepted (``inf``: the comparison cannot fail, so the
            case is inconclusive).
    """

    floor: float
    allowance: float


RuleFn = Callable[[Precision, Mapping[str, Any]], Allowance]


@dataclass(frozen=True)
class Rule:
    """One tolerance rule.

    Attributes:
        name: the stable name (the catalogue's ``tolerance`` column, ``hc-conformance list``).
        summary: what it allows (the docs' tolerance table).
        why: the justification (the docs' tolerance table).
        needs: the keyword inputs a check gives :meth:`apply` (required ones without ``?``).
        fn: ``fn(precision, given) -> Allowance``.
    """

    name: str
    summary: str
    why: str
    needs: tuple[str, ...]
    fn: RuleFn = field(repr=False, compare=False)

    def apply(self, precision: Precision, **given: Any) -> Allowance:
        """The allowance of one comparison in ``precision`` with the check's inputs.

        Raises:
            TypeError: a required input is missing or an unknown one is given.
        """
        known = {k.rstrip("?") for k in self.needs}
        unknown = sorted(set(given) - known)
        missing = [k for k in self.needs if not k.endswith("?") and k not in given]
        if unknown or missing:
            raise TypeError(f"rule {self.name}: unknown inputs {unknown}, missing {missing} "
                            f"(needs {', '.join(self.needs) or 'nothing'})")
        return self.fn(precision, given)

    def __str__(self) -> str:
        return self.name


FLOOR_MULTIPLE: Final = 4.0
"""Below float32, the allowance of the constraint rules (exact axis, the rounding part of the
other axis and of the stream sum) is this multiple of the chain's floor: the floor is a worst
case (every entry rounded by eps/2 of the output in the same direction), so a correct impl
stays at or below 1/4 of the allowance, and a wrong normalisation whose sums move by more
than a few output ulps fails."""


def _law(p: Precision, g: Mapping[str, Any]) -> Allowance:
    factor = float(g.get("factor", 1.0))
    oracle = g.get("oracle")
    if p.low and oracle is not None:
        roundings = float(g.get("roundings", 1))
        floor = max(float(oracle), roundings * tolerances.LAW_FLOOR_EPS * eps(p.output)
                    / tolerances.LAW_REFERENCE_FACTOR)
        return Allowance(floor, tolerances.LAW_REFERENCE_FACTOR * floor
                         + float(g.get("extra", 0.0)))
    return Allowance(eps(p.output) * factor,
                     tolerances.law(p.output) * factor + float(g.get("extra", 0.0)))


def _self_consistency(p: Precision, g: Mapping[str, Any]) -> Allowance:
    factor = float(g.get("factor", 1.0))
    return Allowance(eps(p.output) * factor,
                     tolerances.self_consistency(p.output, p.compute) * factor)


def _exact(p: Precision, g: Mapping[str, Any]) -> Allowance:
    return Allowance(0.0, 0.0)


def _range_slack(p: Precision, g: Mapping[str, Any]) -> Allowance:
    probed = bool(g.get("probed", False))
    return Allowance(eps(p.output), tolerances.range_slack(p.output, probed))


SUM_FLOOR = 0.5
"""The smallest axis sum a normalisation meets in the regime the constraints compare (the
sums before the last normalisation are the other axis's, just normalised, within the
convergence bound of 1): with denominator eps δ it leaves ``s/(s + δ)``, off 1 by
``δ/(s + δ) ≤ δ / SUM_FLOOR``. Measured on the published DeepSeek-V4 formula (δ = 1e-6,
n ≤ 8, parameters perturbed by 1 and scaled up to ×1e4): the exact axis misses by 1.0–1.1 δ,
i.e. s ≥ 0.9."""


def sinkhorn_eps_deviation(p: Precision, axis: str, convergence: float = 0.0) -> float:
    """How far a declared denominator eps δ (``p.sinkhorn_eps``) moves Sinkhorn–Knopp's sums
    off 1 (docs/conformance.md, "Declared eps"): the exact axis, normalised last, by
    ``δ/(s + δ) ≤ 2δ`` (:data:`SUM_FLOOR`); the other axis by that of the normalisation
    before (``2δ``) plus the last division's ``2δ`` carried through the other sums
    (``× (1 + convergence)``, the convergence capped at 1): ``4δ (1 + min(c, 1))``. 0 without a
    declared δ. An additive eps (``softmax + eps``) moves no sum: every normalisation divides
    it out."""
    delta = p.sinkhorn_eps
    if delta <= 0.0:
        return 0.0
    per_normalisation = delta / SUM_FLOOR
    if axis == "exact":
        return per_normalisation
    return 2.0 * per_normalisation * (1.0 + min(max(convergence, 0.0), 1.0))


def exact_axis_allowance(p: Precision, n: int, probed: bool) -> Allowance:
    """:data:`EXACT_AXIS` for ``n`` streams: float32/float64 (or probed): ``16·(n + 1)·eps``
    (probed: the law's ``n``-fold); below float32, along the chain: the floor
    ``(n + 1)·eps(compute) + eps(output)`` (the last normalisation in the compute dtype, then
    every entry rounded to the output by up to eps/2 of itself: the sum by eps/2, counted
    twice) and :data:`FLOOR_MULTIPLE` times it — at most ``16·(n + 1)·eps(compute)`` from the
    compute dtype's side, so an impl computing in bfloat16 itself keeps its own budget.
    A declared denominator eps adds :func:`sinkhorn_eps_deviation` (to the floor, half
    of it: a correct impl misses by about δ)."""
    deviation = sinkhorn_eps_deviation(p, "exact")
    if probed or not p.low:
        return Allowance((n + 1) * eps(p.output) + deviation / 2,
                         tolerances.exact_axis(p.output, n, probed) + deviation)
    floor = (n + 1) * eps(p.compute) + p.rounding
    return Allowance(floor + deviation / 2, max(FLOOR_MULTIPLE * floor,
                     tolerances.exact_axis(p.compute, n, False) + p.rounding) + deviation)


def _exact_axis(p: Precision, g: Mapping[str, Any]) -> Allowance:
    return exact_axis_allowance(p, int(g["n"]), bool(g.get("probed", False)))


def _other_axis(p: Precision, g: Mapping[str, Any]) -> Allowance:
    exact = exact_axis_allowance(p, int(g["n"]), bool(g.get("probed", False)))
    convergence = float(g["convergence"])
    # the declared eps: the other axis's deviation replaces the exact axis's
    deviation = (sinkhorn_eps_deviation(p, "other", convergence)
                 - sinkhorn_eps_deviation(p, "exact"))
    allowance = convergence + exact.allowance + deviation
    # a correct impl may be off by the truncation itself
    floor = convergence + exact.floor + deviation / 2
    if g.get("norm"):  # ‖H_res‖₂ ≤ √(‖H_res‖₁‖H_res‖_∞): the gain beyond 1
        allowance = math.sqrt((1 + allowance) * (1 + exact.allowance)) - 1
    if g.get("mixing"):  # through the mixing: its own rounding on top
        mixing = mixing_allowance(p, int(g["n"]))
        return Allowance(floor + mixing.floor, allowance + mixing.allowance)
    return Allowance(floor, allowance)


def mixing_allowance(p: Precision, n: int) -> Allowance:
    """The rounding of ``1ᵀ(H_res X)`` relative to ``Σ|X|`` beyond H_res's own sums: the
    law's budget in float32/float64; below float32 along the chain: the state rounded to the
    output (eps/2), ``H_res X`` in the compute dtype (``n·eps(compute)``) and the result
    rounded to the output (eps/2): floor ``eps(output) + n·eps(compute)``, allowance
    :data:`FLOOR_MULTIPLE` times it."""
    if not p.low:
        return Allowance(eps(p.output), tolerances.law(p.output))
    floor = eps(p.output) + n * eps(p.compute)
    return Allowance(floor, FLOOR_MULTIPLE * floor)


def sinkhorn_convergence(H: torch.Tensor, iterations: int) -> torch.Tensor:
    """The convergence part of the Birkhoff–Hopf bound per token (``[...]`` float64, ``inf``
    where Δ is): :func:`hcspec.conformance.tolerances.sinkhorn_other_axis_bound` without its
    rounding term, which :data:`SINKHORN_OTHER_AXIS` adds along the dtype chain."""
    return tolerances.sinkhorn_other_axis_bound(H, iterations, torch.float64, False) - (
        tolerances.exact_axis(torch.float64, H.shape[-1], False))


def other_axis_allowances(p: Precision, convergence: torch.Tensor, n: int, probed: bool,
                          mixing: bool = False, norm: bool = False) -> torch.Tensor:
    """:data:`SINKHORN_OTHER_AXIS` per token (``convergence [...]`` float64, e.g.
    :func:`sinkhorn_convergence`; for choosing the worst token a check then compares)."""
    flat = [_other_axis(p, {"n": n, "probed": probed, "convergence": float(c),
                            "mixing": mixing, "norm": norm}).allowance
            for c in convergence.flatten().tolist()]
    return torch.tensor(flat, dtype=torch.float64).reshape(convergence.shape)


def _fd(p: Precision, g: Mapping[str, Any]) -> Allowance:
    denominator = float(g["denominator"])
    extra = (float(g.get("cancellation", 0.0)) + float(g.get("rounding", 0.0))
             + float(g.get("resolution", 0.0)))
    base = tolerances.fd_directional(p.output)
    return Allowance(base, base + extra / denominator)


def _gradient_float32(p: Precision, g: Mapping[str, Any]) -> Allowance:
    return Allowance(eps(torch.float32), tolerances.gradient_float32(
        float(g.get("sensitivity", 0.0)), float(g.get("branch_error", 0.0))))


def _low_precision(p: Precision, g: Mapping[str, Any]) -> Allowance:
    dtype = g["dtype"]
    return Allowance(eps(dtype), tolerances.low_precision(dtype))


def _device(p: Precision, g: Mapping[str, Any]) -> Allowance:
    return Allowance(eps(p.output), tolerances.device(p.output))


def _trainable(p: Precision, g: Mapping[str, Any]) -> Allowance:
    return Allowance(0.0, 1.0)


def _given_bound(p: Precision, g: Mapping[str, Any]) -> Allowance:
    """A bound the check derived from the declaration (the fixed-point gradient's, the depth
    stack's accumulated one) is the allowance; its floor the law's unit."""
    return Allowance(float(g.get("floor", eps(p.output))), float(g["bound"]))


EXACT: Final = Rule(
    "exact", "no numeric tolerance: a condition that holds or not (shape, dtype, device, "
    "finiteness, bit equality)", "the condition is exact in every format", (), _exact)
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
    ("oracle?", "factor?", "roundings?", "extra?"), _law)
SELF_CONSISTENCY: Final = Rule(
    "self_consistency", "the target against itself (another layout, path, batch or call): "
    "the law's budget in float64/float32; bfloat16/float16 4·eps (computed in float32 or "
    "finer) or 8·eps (× factor)",
    "both sides run the same code on the same values: only a reduction order differs",
    ("factor?",), _self_consistency)
IDENTITY: Final = Rule(
    "identity", "the law's budget for exact algebraic identities (n = 1 pre-norm, init ≡ "
    "pre-norm stack, dynamic at init ≡ static; mHC's n = 1 residual: plus the declared "
    "Sinkhorn–Knopp eps's deviation 2δ)", "the sides differ by the order of a few sums",
    ("oracle?", "factor?", "extra?"), _law)
RANGE_SLACK: Final = Rule(
    "range_slack", "4·eps of the output on a range bound (the law's when probed)",
    "σ, 2σ and exp never leave their range: only the value's rounding", ("probed?",),
    _range_slack)
EXACT_AXIS: Final = Rule(
    "exact_axis", "16·(n + 1)·eps on Sinkhorn–Knopp's last axis (probed: the law's × n); "
    "bfloat16/float16 along the chain: 4 × ((n + 1)·eps(compute) + eps(output)), at least "
    "16·(n + 1)·eps(compute) + eps(output); plus 2δ for a declared denominator eps δ",
    "the last step divides by the sum (by sum + δ: off 1 by δ/(s + δ) ≤ 2δ for sums s ≥ ½): "
    "(n + 1) roundings of the compute dtype, then one rounding of each entry to the output",
    ("n", "probed?"), _exact_axis)
SINKHORN_OTHER_AXIS: Final = Rule(
    "sinkhorn_other_axis", "the Birkhoff–Hopf convergence bound expm1(tanh(Δ/4)^{2(T−1)}·Δ) "
    "for the declared rounds T at the measured projective diameter Δ, plus the exact axis's "
    "rounding allowance along the chain (stream sum: plus the mixing's rounding, the law's "
    "budget in float64/float32, 4 × (eps(output) + n·eps(compute)) below; non-expansiveness: "
    "√((1 + other)(1 + exact)) − 1 plus the mixing's rounding); plus 4δ(1 + min(bound, 1)) "
    "for a declared denominator eps δ",
    "Franklin & Lorenz: each round contracts Hilbert's metric by tanh(Δ/4)²; rounding does not "
    "accumulate in a contraction", ("n", "convergence", "probed?", "mixing?", "norm?"), _other_axis)
FD: Final = Rule(
    "fd_directional", "finite differences vs autograd over max(1, |autograd|[, scale]): "
    "1e-6 (float64) / 1e-2 (coarser) plus the measured cancellation, fit residual and "
    "output resolution over the denominator",
    "truncation O(h²) (Richardson/fit O(h⁴)) and the rounding of the loss at the step",
    ("denominator", "cancellation?", "rounding?", "resolution?"), _fd)
GRADIENT_FLOAT32: Final = Rule(
    "gradient_float32", "max(1024·eps32, 32 × the case's measured conditioning, 4 × the "
    "measured error of the kit's branch in float32), relative 2-norm",
    "backward stability: correct float32 code is exact code on inputs moved by a few eps32",
    ("sensitivity?", "branch_error?"), _gradient_float32)
LOW_PRECISION: Final = Rule(
    "low_precision", "32·eps of bfloat16/float16 on the scaled error against float32",
    "≈ 30 roundings along the longest chain at eps/2 each", ("dtype",), _low_precision)
MEASURED_FLOOR_FACTOR: Final = 2.5
"""The multiple of the measured floor ``dtype.low_precision_at_scale`` allows. The floor is the
larger of the two ways a correct impl of that precision errs (the spec's closed form computed
in it, i.e. its own roundings along the chain; the float32 forward moved by that precision's
rounding of x and θ, i.e. its rounded inputs and parameters), and never below the output's
own rounding, eps/2. A correct impl pays both at most: 2 floors, with a quarter to spare over
the max of ~10⁴ output entries (which concentrates: the measured ratio of the reference and
the correct low-precision stand-ins stays at or below about 1, docs/conformance.md). A
systematic loss of 3 floors (a reduction accumulated in the low precision) exceeds it; 8 (the
law's factor before) let a bfloat16 running sum 7.9 floors off pass."""


def _measured_floor(p: Precision, g: Mapping[str, Any]) -> Allowance:
    dtype, floor = g["dtype"], float(g["floor"])
    if eps(dtype) <= eps(torch.float32):
        return Allowance(floor, tolerances.law(dtype))
    floor = max(floor, eps(dtype) / 2)
    return Allowance(floor, MEASURED_FLOOR_FACTOR * floor)


MEASURED_FLOOR: Final = Rule(
    "measured_floor", "another precision of the same impl (bfloat16/float16 vs float32): "
    "2.5 × the measured floor in that precision (at least eps/2, the output's rounding) — the "
    "floor is the error the spec's closed form makes in it against float64 on the same case, "
    "or the float32 forward's move under that precision's rounding of x and θ, whichever is "
    "larger",
    "a correct impl pays at most both (its own roundings and its rounded inputs): 2 floors, "
    "a quarter to spare; a systematic loss of 3 floors fails", ("dtype", "floor"),
    _measured_floor)
DEVICE: Final = Rule("device", "twice the law's budget, CUDA vs CPU",
                     "another summation order and FMA on each side", (), _device)
TRAINABLE: Final = Rule(
    "trainable", "relative gradient through the mixing ≥ 1e-6 (the ratio 1e-6 / relative ≤ 1)",
    "a mixing that ignores its parameters gives 0, a saturated Sinkhorn–Knopp < 1e-100", (),
    _trainable)
def _fixed_point(p: Precision, g: Mapping[str, Any]) -> Allowance:
    conditioning = float(g.get("conditioning", 0.0))
    if p.low and g.get("oracle") is not None:
        law = _law(p, {"oracle": g["oracle"], "roundings": g.get("roundings", 1)})
        return Allowance(law.floor, law.allowance + conditioning)
    return Allowance(eps(p.output), tolerances.law(p.output) + conditioning)


SINKHORN_FIXED_POINT: Final = Rule(
    "sinkhorn_fixed_point", "law(dtype) against the truncated forward's gradient; declared "
    "implicit: law + 10·n·(column error)/(1 − σ₂(H_res)²) (the `conditioning` input) against "
    "the fixed-point gradient; bfloat16/float16 with a measured `oracle` (the kit's gradient "
    "along the chain: the upstream gradient rounded to the output, Sinkhorn–Knopp and its "
    "backward in the compute dtype), the law's 8 × max(oracle, eps/2·roundings) in place of "
    "law(dtype)",
    "the implicit gradient is exact only at the fixed point; below float32 FlashAttention's "
    "rule, as the law's", ("conditioning?", "oracle?", "roundings?"), _fixed_point)
DEPTH_BOUND: Final = Rule(
    "depth_bound", "the per-sublayer allowances of the constraints (exact axis, Birkhoff–Hopf, "
    "law or measured law per layer) accumulated over the stack",
    "each sublayer adds its own column error and rounding", ("bound", "floor?"), _given_bound)
def _exact_up_to_eps(p: Precision, g: Mapping[str, Any]) -> Allowance:
    chain = Precision.of(g["dtype"], g.get("compute_dtype"), g.get("output_dtype"))
    rounding = (int(g["n"]) + 1) * eps(chain.compute) + chain.rounding
    deviation = float(g["deviation"])
    return Allowance(deviation + rounding, deviation + FLOOR_MULTIPLE * rounding)


EXACT_UP_TO_EPS: Final = Rule(
    "exact_up_to_eps", "where the declared formula has an additive ε (DeepSeek-V4's σ + ε, "
    "softmax + ε, ε in the denominators) the saturated weights are exact only up to it: the "
    "measured deviation of the reported weights from the exact 0/1 pattern, times the terms it "
    "multiplies, plus 4 × the chain's rounding ((n + 1)·eps(compute) + eps(output)) of the "
    "precision run, relative to max|X|",
    "ε is declared, so it is no error; what remains is the rounding of an n-term sum",
    ("n", "deviation", "dtype", "compute_dtype?", "output_dtype?"), _exact_up_to_eps)
REPORTED: Final = Rule(
    "reported", "a figure reported, not bounded (HC's growth over a stack): the allowance is "
    "the largest float64, so the report keeps the largest seen", "no theorem bounds it",
    ("bound",), _given_bound)
EXPLICIT: Final = Rule(
    "explicit", "an allowance the check computed itself (the transition form "
    "expect(label, error, tolerance)); the meta-test names every property still using it",
    "transition only", ("bound",), _given_bound)

ALL: Final[tuple[Rule, ...]] = (
    EXACT, LAW, SELF_CONSISTENCY, IDENTITY, RANGE_SLACK, EXACT_AXIS, SINKHORN_OTHER_AXIS, FD,
    GRADIENT_FLOAT32, LOW_PRECISION, MEASURED_FLOOR, DEVICE, TRAINABLE, SINKHORN_FIXED_POINT,
    DEPTH_BOUND, EXACT_UP_TO_EPS, REPORTED, EXPLICIT)
"""Every rule, in the docs table's order."""

BY_NAME: Final[dict[str, Rule]] = {r.name: r for r in ALL}


_TRANSITIONAL: dict[str, Rule] = {}


def named(rule: Rule | str) -> Rule:
    """``rule`` itself, or the rule of that name (the string form of a declaration). During
    the transition a name found only in :data:`hcspec.conformance.tolerances.RULES` (a rule
    described there, not yet an object here) gives a transitional rule of that name whose
    allowance is the check's explicit one (``bound``); the meta-test names it.

    Raises:
        KeyError: a name in neither.
    """
    if isinstance(rule, Rule):
        return rule
    if rule in BY_NAME:
        return BY_NAME[rule]
    if rule in tolerances.RULES:
        if rule not in _TRANSITIONAL:
            _TRANSITIONAL[rule] = Rule(rule, tolerances.RULES[rule],
                                       "declared by name only (transition)", ("bound",),
                                       _given_bound)
        return _TRANSITIONAL[rule]
    raise KeyError(f"unknown tolerance rule {rule!r}; known: {', '.join(BY_NAME)}")


def transitional(rule: Rule) -> bool:
    """Whether ``rule`` is a transitional rule known by name only (:func:`named`)."""
    return rule.name in _TRANSITIONAL and _TRANSITIONAL[rule.name] is rule


def ratio(error: float, bound: float) -> float:
    """``error / bound`` (0 for a zero error, inf for a zero bound, NaN for a NaN error)."""
    if math.isnan(error):
        return math.nan
    if error == 0.0:
        return 0.0
    return math.inf if bound == 0.0 else error / bound


TABLE_START: Final = ("<!-- rules-table:start (generated from conformance/rules.py: "
                      "python -m hcspec.conformance.rules --write) -->")
TABLE_END: Final = "<!-- rules-table:end -->"


def with_table(doc: str) -> str:
    """``doc`` with the text between :data:`TABLE_START` and :data:`TABLE_END` replaced by
    :func:`markdown_table`.

    Raises:
        ValueError: the markers are missing or out of order.
    """
    start, end = doc.find(TABLE_START), doc.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"the document has no {TABLE_START!r} … {TABLE_END!r} block")
    return doc[:start + len(TABLE_START)] + "\n" + markdown_table() + doc[end:]


def markdown_table() -> str:
    """The docs' table of rules (``docs/conformance.md``, between the ``rules-table`` markers),
    generated from :data:`ALL`."""
    lines = ["| rule | inputs | allows | why |", "| --- | --- | --- | --- |"]
    for r in ALL:
        inputs = ", ".join(f"`{k}`" for k in r.needs) or "—"
        cells = (r.summary.replace("|", "\\|"), r.why.replace("|", "\\|"))
        lines.append(f"| `{r.name}` | {inputs} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m hcspec.conformance.rules [--write|--check]``: print the rules table, write
    it into docs/conformance.md, or exit 1 when the table there is not current."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--doc", default=str(Path(__file__).resolve().parents[1] / "docs"
                                             / "conformance.md"))
    args = parser.parse_args(argv)
    if not (args.write or args.check):
        print(markdown_table(), end="")
        return 0
    path = Path(args.doc)
    doc = path.read_text(encoding="utf-8")
    current = with_table(doc)
    if args.check:
        if current != doc:
            print(f"{path}: the rules table is not current; run python -m "
                  "hcspec.conformance.rules --write")
            return 1
        return 0
    path.write_text(current, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
