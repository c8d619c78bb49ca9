"""Device family: the CUDA forward equals the CPU forward of the same impl (same seed, same
state) within :func:`hcspec.conformance.rules.device`, and stays on CUDA. Not applicable,
with the
reason, where CUDA is absent or the factory rejects it.
"""

from __future__ import annotations

from hcspec.conformance.author import (
    CUDA,
    Case,
    Context,
    FactoryRejected,
    NotApplicable,
    declare,
    f64,
    metrics,
    rules,
)


@declare(
    "device.cuda_matches_cpu",
    statement="the CUDA forward equals the CPU forward (skipped without CUDA)",
    requires=(CUDA,), tolerance=rules.DEVICE, prerequisites=("shape.output",))
def check_cuda(ctx: Context, case: Case) -> None:
    """CUDA forward vs CPU forward."""
    cpu = ctx.build.make(case, device="cpu")  # rejected here: the configuration, skip the case
    try:
        gpu = ctx.build.make(case, device="cuda")
    except FactoryRejected as exc:
        raise NotApplicable(f"the factory rejects device='cuda': {exc}") from exc
    ctx.build.align(cpu, gpu)
    out_cpu = ctx.observe.forward(cpu, ctx.inputs.state(case, device="cpu"),
                          ctx.inputs.branch(case, device="cpu", record=False))
    out_gpu = ctx.observe.forward(gpu, ctx.inputs.state(case, device="cuda"),
                          ctx.inputs.branch(case, device="cuda", record=False))
    ctx.record.require(out_gpu.device.type == "cuda",
                       f"forward on CUDA input returned a tensor on {out_gpu.device} (a hard-coded "
                       ".cpu()?)")
    ctx.record.require(out_cpu.device.type == "cpu",
                       f"forward on CPU input returned a tensor on {out_cpu.device} (a hard-coded "
                       ".cuda()?)")
    ctx.record.expect("CUDA forward vs CPU forward", metrics.scaled_error(f64(out_gpu), out_cpu))
