"""Compile family (optional): ``torch.compile(fullgraph=True)`` traces ``forward`` as one graph,
and the compiled forward and backward equal eager.

Public bug report #12: shape handling or data-dependent Python control flow (``if
float(x.max()) > …``, ``.item()``, ``.tolist()``) breaks ``torch.compile(fullgraph=True)`` or
makes the compiled output differ from eager.

Cost and backends. Under ``ci`` the kit compiles with the ``aot_eager`` backend: TorchDynamo
traces the Python (where graph breaks and value-dependent branches show) and AOT Autograd
builds the forward and backward graphs, but no code is generated, so no C++ compiler is needed
and one compile takes ~1–3 s on a CPU. Under ``quick`` it uses the ``eager`` backend:
TorchDynamo's trace alone (graph breaks and value-dependent branches still fail
``fullgraph=True``; the captured graph runs eagerly), about a fifth of the cost, without AOT
Autograd's checks of the traced backward. Under ``thorough`` it compiles with
``inductor`` (generated C++ on the CPU, Triton on CUDA), which also checks the generated
kernels: the canonical example with inductor's defaults, the extra examples with scalar kernels
(:data:`SCALAR_KERNELS`). Each example is a new shape, so a new forward and backward graph:
with a cold inductor cache, roughly 30–40 s of CPU per example for the DeepSeek-V4-formula
stand-in; with a warm cache (inductor's FX
graph cache, kept across runs in ``$TORCHINDUCTOR_CACHE_DIR``, by default
``/tmp/torchinductor_$USER``) a few seconds in all. Where that
backend cannot run (no C++ compiler, no Triton) the property is not applicable with the reason.
Where ``torch.compile`` itself is unavailable (TorchDynamo unsupported on this Python) the
property is not applicable with the reason, and so it is for a target that declares
``Conventions.untraceable`` (a forward that calls into another array framework: every target of
:mod:`hcspec.conformance.bridge`), with the reason it declares.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Final

import torch

from hcspec.conformance.author import (
    CHEAP_BACKEND,
    COMPILE,
    FULL_BACKEND,
    TRACE_BACKEND,
    TRACEABLE,
    Case,
    Cases,
    Context,
    PropertyFailure,
    compile_backend,
    declare,
    f64,
    metrics,
    rules,
    salts,
    shift,
    strategies,
)

__all__ = ["CHEAP_BACKEND", "FULL_BACKEND", "SCALAR_KERNELS", "TRACE_BACKEND", "graph_break"]


def _examples(ctx: Context) -> list[Case]:
    cases = [Case(2, 3, 4, 8, layer_index=5, seed=1, perturb=0.3)]
    if ctx.profile.extra_examples:  # thorough
        cases += [Case(3, 2, 2, 5, layer_index=3, seed=2, scale=10.0, perturb=0.1),
                  Case(1, 4, 3, 7, layer_index=2, seed=3, perturb=1.0, branch="linear")]
    return shift(ctx, cases)


@declare(
    "compile.fullgraph",
    statement="torch.compile(fullgraph=True) traces forward; compiled forward/backward equal eager",
    requires=(TRACEABLE, COMPILE), tolerance=rules.SELF_CONSISTENCY, examples=_examples,
    cases=Cases(d_more_than_n=True, extreme_scales=False),
    prerequisites=("shape.output", "shape.branch_once"), explore=False,
    shrink=False)  # each re-run would compile anew: up to 40 × ~20 s (inductor)
def check_fullgraph(ctx: Context, case: Case) -> None:
    """``torch.compile(forward, fullgraph=True)`` succeeds, and its output and the gradient of
    ``⟨G', X'⟩`` w.r.t. x equal eager's within the tolerance of a target compared with itself
    (:func:`hcspec.conformance.machinery.precision.self_consistency`: the law's in
    float64/float32, a few units of roundoff in bfloat16/float16). A failed trace is reported
    with TorchDynamo's own reason and the user's source location (:func:`graph_break`); an
    output with no autograd graph fails cleanly after the forward is compared."""
    backend = compile_backend(ctx.profile)
    import torch._dynamo as dynamo

    impl = ctx.build.make(case)
    fn = strategies.make_branch(case.branch, case.d, ctx.dtype, ctx.device, seed=case.seed)
    x = ctx.inputs.state(case)
    G = strategies.gaussian(x.shape, case.seed, salts.UPSTREAM_GRADIENT.at(), ctx.dtype,
                            ctx.device)

    def step(state: torch.Tensor) -> torch.Tensor:
        return impl.forward(state, fn)

    x_eager = x.clone().requires_grad_(True)
    eager = step(x_eager)
    connected = isinstance(eager, torch.Tensor) and eager.requires_grad
    g_eager = torch.autograd.grad((eager * G).sum(), x_eager)[0] if connected else None
    dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend=backend, dynamic=False)
    x_comp = x.clone().requires_grad_(True)
    try:
        with _compile_settings(backend, ctx.device, canonical=case == _examples(ctx)[0]):
            out = compiled(x_comp)
            g_comp = (torch.autograd.grad((out * G).sum(), x_comp)[0]
                      if connected and out.requires_grad else None)
    except Exception as exc:  # a graph break under fullgraph=True, or a failed trace
        reason, hint = graph_break(exc)
        raise PropertyFailure(
            f"torch.compile(forward, fullgraph=True, backend={backend!r}) failed: "
            f"{type(exc).__name__}: {reason}", hint=hint) from exc
    finally:
        dynamo.reset()
    ctx.record.expect(f"compiled ({backend}) forward vs eager",
                      metrics.scaled_error(f64(out), f64(eager)))
    ctx.record.require(connected,
                       "forward's output is not connected to autograd (requires_grad is False "
                       "although the input requires grad): the compiled backward cannot be "
                       "compared with eager's (the gradients family reports the same)")
    ctx.record.require(g_comp is not None,
                       "the compiled forward's output is not connected to autograd, although "
                       "eager's is")
    assert g_eager is not None and g_comp is not None
    ctx.record.expect(f"compiled ({backend}) ∂L/∂x vs eager",
                      metrics.scaled_error(f64(g_comp), f64(g_eager)))


SCALAR_KERNELS: Final[dict[str, object]] = {"cpp.simdlen": 0}
"""``torch._inductor.config`` while ``inductor`` compiles the extra examples of ``thorough`` on
the CPU: scalar C++ kernels, no SIMD variants. The canonical example (the first) is compiled
with inductor's defaults, vectorised kernels as users get them; the extra examples (other
expansion rates, magnitudes and branch) check that the target traces, lowers and computes
right at those shapes, which scalar kernels show as well, for less compile time (measured on
the DeepSeek-V4-formula stand-in with a cold inductor cache: ``--only compile.fullgraph`` under
``thorough`` took 107 s of CPU instead of 130 s)."""


@contextlib.contextmanager
def _compile_settings(backend: str, device: str, canonical: bool) -> Iterator[None]:
    """:data:`SCALAR_KERNELS` around the compiled forward and backward (inductor compiles the
    backward at its first call) for ``inductor`` on the CPU when the example is not the
    canonical one; nothing otherwise. The previous settings are put back on exit, also after
    an exception."""
    if backend != FULL_BACKEND or device != "cpu" or canonical:
        yield
        return
    from torch._inductor import config as inductor_config

    with inductor_config.patch(SCALAR_KERNELS):
        yield


_KIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_USER_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)')


def _user_frames(exc: BaseException) -> list[str]:
    """``file:line in function`` of the frames TorchDynamo was tracing when it stopped,
    outermost first, without torch's and the kit's own (the user's source)."""
    frames: list[tuple[str, int, str, str]] = []
    stack = getattr(exc, "real_stack", None)
    if stack:
        frames = [(f.filename, f.lineno or 0, f.name, (f.line or "").strip()) for f in stack]
    else:  # the message's "from user code:" section
        frames = [(m["file"], int(m["line"]), m["name"], "")
                  for m in _USER_FRAME.finditer(str(exc))]
    out = []
    for filename, line, name, code in frames:
        path = os.path.abspath(filename)
        if path.startswith((_TORCH_DIR, _KIT_DIR)):
            continue
        out.append(f"{filename}:{line} in {name}" + (f": `{code}`" if code else ""))
    return out


def graph_break(exc: BaseException) -> tuple[str, str | None]:
    """TorchDynamo's own account of why ``torch.compile(fullgraph=True)`` stopped: (its
    reason — the message's first line and its ``Explanation:`` — and the user's source
    location, innermost frame last; its first ``Hint:``, or None). Works on any exception
    (a failed trace that is not a graph break gives its message's first line)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    head = lines[0] if lines else "(no message)"
    explanation = next((line.removeprefix("Explanation:").strip() for line in lines
                        if line.startswith("Explanation:")), "")
    hints = [line.removeprefix("Hint:").strip() for line in lines if line.startswith("Hint:")]
    reason = head[:300] + (f" — {explanation[:400]}" if explanation else "")
    reason = _ADDRESS.sub("", reason)  # the same failure reads the same in every run
    frames = _user_frames(exc)
    if frames:
        reason += "; at " + " → ".join(frames[-3:])
    known = known_dynamo_cause(exc)
    if known is not None:
        return reason, known
    return reason, (f"TorchDynamo: {hints[0][:300]}" if hints else None)


_MISSING_MODULE = re.compile(r"No module named '(?P<name>[^']+)'")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
"""A memory address in an object's repr (``<function f at 0x7f…>``), which differs per run."""


def known_dynamo_cause(exc: BaseException) -> str | None:
    """The cause of two TorchDynamo failures its own hint does not name, else None:
    ``InternalTorchDynamoError: ModuleNotFoundError: No module named 'm'`` (code loaded by
    path, e.g. with ``importlib.util.spec_from_file_location``, but not registered in
    ``sys.modules``: TorchDynamo looks a function's module up there), and a deliberate
    ``torch.compiler.disable`` / ``torch._dynamo.disable`` in ``forward`` (Dynamo's advice is
    to remove the call: when it is deliberate, declare ``untraceable``)."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        text += f"\n{type(cause).__name__}: {cause}"
    missing = _MISSING_MODULE.search(text)
    if missing is not None and ("ModuleNotFoundError" in text or "InternalTorchDynamo" in text):
        name = missing["name"]
        return (f"TorchDynamo looks up the module of every traced function in sys.modules, "
                f"and {name!r} is not there: code loaded by path must be registered "
                f"(sys.modules[{name!r}] = module before spec.loader.exec_module(module)), or "
                f"name the target path/to/file.py:factory, which the kit registers")
    if "compiler.disable" in text or "_dynamo.disable" in text or (
            "disable" in text and "Skip calling" in text):
        return ("forward calls a function under torch.compiler.disable: when that is "
                "deliberate (e.g. a dispatcher to a native kernel), declare conventions "
                "untraceable='why', and compile.fullgraph becomes not applicable with that "
                "reason")
    return None
