"""The vocabulary of the tolerance rules: the rounding unit of a dtype (:func:`eps`), the
dtype chain of a run (:class:`Precision`), what a rule allows on one comparison
(:class:`Allowance`) and the rule itself (:class:`Rule`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import torch

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
    output dtype (``None``: not declared).

    Raises:
        ValueError: a dtype that is given is not a floating dtype (:func:`eps`).
    """
    coarsest = dtype
    for declared in (compute_dtype, output_dtype):
        if declared is not None and eps(declared) > eps(coarsest):
            coarsest = declared
    return coarsest


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


@dataclass(frozen=True)
class Precision:
    """The dtype chain of one run (a check reads it as ``ctx.precision``).

    Attributes:
        dtype: the kit's working dtype (the state it builds and hands over).
        compute: the dtype the impl computes in (its weights, Sinkhorn–Knopp, the mixing):
            the coarsest of ``dtype`` and the declared ``compute_dtype``.
        output: the effective dtype (what every comparison is made in): the coarsest of
            ``dtype`` and the declared ``compute_dtype`` and ``output_dtype``.
        sinkhorn_eps: the declared Sinkhorn–Knopp denominator eps δ (0: none): every
            normalisation ``M / (M.sum(axis) + δ)`` leaves the sums ``s/(s + δ)``, so the
            Sinkhorn–Knopp constraints allow the deviation it implies
            (:func:`hcspec.conformance.rules.constraints.sinkhorn_eps_deviation`).
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
        return cls(dtype, effective_dtype(dtype, compute_dtype),
                   effective_dtype(dtype, compute_dtype, output_dtype), float(sinkhorn_eps))

    @property
    def low(self) -> bool:
        """Whether the comparisons are made in bfloat16/float16 (the measured-floor rules)."""
        return eps(self.output) > eps(torch.float32)

    @property
    def rounding(self) -> float:
        """Relative rounding of a value computed in ``compute`` and returned in ``output``
        (:func:`output_rounding`; 0 when they agree)."""
        return output_rounding(self.compute, self.output)


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
