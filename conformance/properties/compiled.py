"""Compile family (optional): ``torch.compile(fullgraph=True)`` traces ``forward`` as one graph,
and the compiled forward and backward equal eager.

Public bug report #12: shape handling or data-dependent Python control flow (``if
float(x.max()) > …``, ``.item()``, ``.tolist()``) breaks ``torch.compile(fullgraph=True)`` or
makes the compiled output differ from eager.

Cost and backends. Under ``quick`` and ``ci`` the kit compiles with the ``aot_eager`` backend:
TorchDynamo traces the Python (where graph breaks and value-dependent branches show) and AOT
Autograd builds the forward and backward graphs, but no code is generated, so no C++ compiler
is needed and one compile takes ~1–2 s on a CPU. Under ``thorough`` it compiles with
``inductor`` (generated C++ on the CPU, Triton on CUDA; ~40 s for the first graph on a
2-core CPU, a few seconds after that), which also checks the generated kernels; where that
backend cannot run (no C++ compiler, no Triton) the property is not applicable with the reason.
Where ``torch.compile`` itself is unavailable (TorchDynamo unsupported on this Python) the
property is not applicable with the reason.
"""

from __future__ import annotations

import shutil

import torch
from hypothesis import strategies as st

from hcspec.conformance import strategies, tolerances
from hcspec.conformance.properties.base import (
    Context,
    NotApplicable,
    Property,
    PropertyFailure,
    f64,
)
from hcspec.conformance.properties.common import shift, standard_strategy
from hcspec.conformance.protocol import KINDS
from hcspec.conformance.strategies import Case

CHEAP_BACKEND = "aot_eager"
FULL_BACKEND = "inductor"


def backend_for(ctx: Context) -> str:
    """``inductor`` under the ``thorough`` profile, else ``aot_eager`` (see the module doc)."""
    return FULL_BACKEND if ctx.profile.name == "thorough" else CHEAP_BACKEND


def unavailable_reason(backend: str, device: str) -> str | None:
    """Why ``torch.compile`` with ``backend`` cannot run here, or None."""
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    try:
        from torch._dynamo.eval_frame import is_dynamo_supported

        if not is_dynamo_supported():
            return "TorchDynamo is not supported on this Python/platform"
    except Exception as exc:  # an import failure is the environment's, not the impl's
        return f"torch._dynamo does not import: {type(exc).__name__}: {exc}"
    if backend == FULL_BACKEND:
        if device == "cpu" and not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
            return "the inductor backend needs a C++ compiler on the CPU (none on PATH)"
        if device == "cuda":
            try:
                from torch.utils._triton import has_triton

                if not has_triton():
                    return "the inductor backend needs Triton on CUDA (not installed)"
            except Exception as exc:
                return f"cannot tell whether Triton is available: {exc}"
    return None


def check_fullgraph(ctx: Context, case: Case) -> None:
    """``torch.compile(forward, fullgraph=True)`` succeeds, and its output and the gradient of
    ``⟨G', X'⟩`` w.r.t. x equal eager's within the law tolerance."""
    backend = backend_for(ctx)
    reason = unavailable_reason(backend, ctx.device)
    if reason is not None:
        raise NotApplicable(reason)
    import torch._dynamo as dynamo

    impl = ctx.make(case)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    x = ctx.state(case)
    G = strategies.gaussian(x.shape, case.seed, 31, ctx.dtype, ctx.device)

    def step(state: torch.Tensor) -> torch.Tensor:
        return impl.forward(state, fn)

    x_eager = x.clone().requires_grad_(True)
    eager = step(x_eager)
    (g_eager,) = torch.autograd.grad((eager * G).sum(), x_eager)
    dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend=backend, dynamic=False)
    x_comp = x.clone().requires_grad_(True)
    try:
        out = compiled(x_comp)
        (g_comp,) = torch.autograd.grad((out * G).sum(), x_comp)
    except Exception as exc:  # a graph break under fullgraph=True, or a failed trace
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        hint = (" (a graph break: data-dependent Python control flow such as "
                "`if float(x.max()) > …`, .item() or .tolist())"
                if isinstance(exc, (dynamo.exc.Unsupported, dynamo.exc.UserError)) else "")
        raise PropertyFailure(
            f"torch.compile(forward, fullgraph=True, backend={backend!r}) failed: "
            f"{type(exc).__name__}: {first[:300]}{hint}") from exc
    finally:
        dynamo.reset()
    tol = tolerances.law(ctx.tol_dtype)
    ctx.expect(f"compiled ({backend}) forward vs eager",
               tolerances.scaled_error(f64(out), f64(eager)), tol)
    ctx.expect(f"compiled ({backend}) ∂L/∂x vs eager",
               tolerances.scaled_error(f64(g_comp), f64(g_eager)), tol)


def _examples(ctx: Context) -> list[Case]:
    cases = [Case(2, 3, 4, 8, layer_index=5, seed=1, perturb=0.3)]
    if ctx.profile.name == "thorough":
        cases += [Case(3, 2, 2, 5, layer_index=3, seed=2, scale=10.0, perturb=0.1),
                  Case(1, 4, 3, 7, layer_index=2, seed=3, perturb=1.0, branch="linear")]
    return shift(ctx, cases)


def _strategy(ctx: Context) -> st.SearchStrategy[Case]:
    return standard_strategy(ctx, extreme_scales=False)


PROPERTIES = [
    Property("compile.fullgraph", "compile",
             "torch.compile(fullgraph=True) traces forward; compiled forward/backward equal eager",
             None, frozenset(), frozenset(KINDS), check_fullgraph, _examples, _strategy,
             prerequisites=("shape.output", "shape.branch_once"), explore=False,
             shrink=False),  # each re-run would compile anew: up to 40 × ~20 s (inductor)
]
