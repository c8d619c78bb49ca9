"""Device family: the CUDA forward equals the CPU forward of the same impl (same seed, same
state) within :func:`hcspec.conformance.tolerances.device`, and stays on CUDA. Not applicable,
with the
reason, where CUDA is absent or the factory rejects it.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from hcspec.conformance import tolerances
from hcspec.conformance.properties.base import (
    Context,
    FactoryRejected,
    NotApplicable,
    Property,
    f64,
)
from hcspec.conformance.properties.common import standard_examples, standard_strategy
from hcspec.conformance.protocol import KINDS
from hcspec.conformance.strategies import Case


def cuda_reason() -> str | None:
    """Why CUDA cannot be used, or None when it can."""
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    return None


def check_cuda(ctx: Context, case: Case) -> None:
    """CUDA forward vs CPU forward."""
    reason = cuda_reason()
    if reason is not None:
        raise NotApplicable(reason)
    cpu = ctx.make(case, device="cpu")  # rejected here: the configuration, skip the case
    try:
        gpu = ctx.make(case, device="cuda")
    except FactoryRejected as exc:
        raise NotApplicable(f"the factory rejects device='cuda': {exc}") from exc
    ctx.align_parameters(cpu, gpu)
    out_cpu = ctx.forward(cpu, ctx.state(case, device="cpu"),
                          ctx.branch(case, device="cpu", record=False))
    out_gpu = ctx.forward(gpu, ctx.state(case, device="cuda"),
                          ctx.branch(case, device="cuda", record=False))
    ctx.require(out_gpu.device.type == "cuda",
                f"forward on CUDA input returned a tensor on {out_gpu.device} (a hard-coded "
                ".cpu()?)")
    ctx.require(out_cpu.device.type == "cpu",
                f"forward on CPU input returned a tensor on {out_cpu.device} (a hard-coded "
                ".cuda()?)")
    ctx.expect("CUDA forward vs CPU forward", tolerances.scaled_error(f64(out_gpu), out_cpu),
               tolerances.device(ctx.tol_dtype))


def _examples(ctx: Context) -> list[Case]:
    return standard_examples(ctx, d_more_than_n=False)


def _strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, d_more_than_n=False)


PROPERTIES = [
    Property("device.cuda_matches_cpu", "device",
             "the CUDA forward equals the CPU forward (skipped without CUDA)",
             None, frozenset(), frozenset(KINDS), check_cuda, _examples, _strategy,
             prerequisites=("shape.output",)),
]
