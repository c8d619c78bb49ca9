"""Dtype family: a bfloat16/float16 forward is close to the float32 forward of the same impl
(same seed, same perturbation, the same state and branch rounded to the low dtype), within
:func:`conformance.tolerances.low_precision`, and returns the low dtype. A dtype the factory
rejects is skipped, with the factory's message; both rejected makes the property not
applicable.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from conformance import tolerances
from conformance.properties.base import (
    Context,
    FactoryRejected,
    NotApplicable,
    Property,
)
from conformance.properties.common import standard_examples, standard_strategy
from conformance.protocol import KINDS
from conformance.strategies import Case

LOW = (torch.bfloat16, torch.float16)


def check_low_precision(ctx: Context, case: Case) -> None:
    """bfloat16/float16 forward vs float32 forward (scaled error ≤ 32·eps of the low dtype)."""
    try:
        impl32 = ctx.make(case, dtype=torch.float32)
    except FactoryRejected as exc:
        raise NotApplicable(f"the factory rejects float32: {exc}") from exc
    x32 = ctx.state(case, dtype=torch.float32)
    with torch.no_grad():
        out32 = ctx.forward(impl32, x32, ctx.branch(case, dtype=torch.float32, record=False))
    ran = []
    for dtype in LOW:
        try:
            impl = ctx.make(case, dtype=dtype)
        except FactoryRejected:
            continue
        ran.append(dtype)
        ctx.align_parameters(impl32, impl)
        x = ctx.state(case, dtype=dtype)
        with torch.no_grad():
            out = impl.forward(x, ctx.branch(case, dtype=dtype, record=False))
        ctx.require(isinstance(out, torch.Tensor) and out.dtype == dtype,
                    f"{dtype} forward returned {getattr(out, 'dtype', type(out).__name__)}, "
                    f"expected {dtype}")
        scale = max(float(x32.abs().max()), float(out32.abs().max()))
        ctx.expect(f"{dtype} forward vs float32 forward",
                   tolerances.scaled_error(out, out32, scale), tolerances.low_precision(dtype))
    if not ran:
        raise NotApplicable("the factory rejects bfloat16 and float16: "
                            + " | ".join(ctx.rejected[-2:]))


def _examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx, d_more_than_n=False)


def _strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, d_more_than_n=False, extreme_scales=False)


PROPERTIES = [
    Property("dtype.low_precision", "dtype",
             "bfloat16/float16 forward is close to float32 (dtype-aware) and keeps its dtype",
             None, frozenset(), frozenset(KINDS), check_low_precision, _examples, _strategy,
             prerequisites=("shape.output", "shape.branch_once")),
]
