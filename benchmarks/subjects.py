"""What the connection benchmark measures, built for one configuration.

Every subject is one connection around the same cheap branch ``F(h) = h ⊙ w`` (``w ∈ R^d``, a
parameter), so that "connection minus branch" is the connection's own cost:

* ``branch only`` — ``F(h)`` on ``h [B, T, d]``: the common part, subtracted from the others;
* ``residual`` — ``h + F(h)``;
* every built-in target of the conformance kit (``reference:hc-static``, ``reference:mhc``,
  ``reference:mhc-fast``, and the third-party adapters the kit registers, such as
  ``hyper_connections:mhc``), resolved through :mod:`hcspec.conformance.subjects.targets` — a
  target whose package is not importable is skipped with the reason;
* the reference mHC with ``recompute=True`` (readable and fast), for the memory option;
* any extra ``package.module:factory`` TARGET given on the command line;
* where mhc-pytorch is installed, also its own module called as its users call it,
  ``ManifoldHyperConnections(d, n, F)(h)`` on ``h [B, T, d]`` (replicate, one mHC step,
  collapse): the package's cost without the adapter, which records the package's per-stream
  state with a ``TorchFunctionMode`` and checks that its input is replicated.

A target built by its factory is driven through the kit's adapter protocol:
``impl.forward(x, branch)``, ``impl.parameters()``. An implementation that accepts only
replicated states (``X = 1_n hᵀ``; e.g. one that keeps no multi-stream state between calls)
is given one, and the row says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from benchmarks.measure import Step
from hcspec.conformance.subjects import targets as kit_targets
from hcspec.reference import targets as reference_targets

BRANCH_ONLY = "branch only"
RESIDUAL = "residual"
MHC_PYTORCH_RAW = "mhc_pytorch (package call on h)"


@dataclass(frozen=True)
class Config:
    """One size: ``x [batch, tokens, n, d]`` of ``dtype`` on ``device``; ``variants``: also
    measure the option variants of third-party targets (not only their defaults)."""

    name: str
    batch: int
    tokens: int
    n: int
    d: int
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    variants: bool = True

    def describe(self) -> str:
        """``B=4 T=512 n=4 d=1024 float32 cpu``."""
        dtype = str(self.dtype).removeprefix("torch.")
        return (f"B={self.batch} T={self.tokens} n={self.n} d={self.d} {dtype} "
                f"{self.device}")

    @property
    def state_bytes(self) -> int:
        """Bytes of one multi-stream state ``[B, T, n, d]``."""
        return self.batch * self.tokens * self.n * self.d * _itemsize(self.dtype)


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


class ScaleBranch(nn.Module):
    """The benchmark's branch: ``F(h) = h ⊙ w``, ``[B, T, d] -> [B, T, d]``, ``w`` = 1 at init."""

    def __init__(self, d: int, dtype: torch.dtype, device: str) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d, dtype=dtype, device=device))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h * self.weight


@dataclass(frozen=True)
class Subject:
    """A named thing to measure.

    Attributes:
        name: shown in the tables (the TARGET string for kit targets).
        kind: ``residual``, ``branch`` or the implementation's ``kind`` (``hc-static``,
            ``hc-dynamic``, ``mhc``); for targets, read from the built implementation.
        origin: ``hcspec`` or ``third-party``.
        build: ``(config, inputs) -> (Step, kind)``.
        variant: a built-in target with package options bound (``hyper_connections:mhc-log``
            …): measured where :attr:`Config.variants` is set.
    """

    name: str
    origin: str
    build: Callable[[Config, Inputs], tuple[Step, str]]
    variant: bool = False


@dataclass
class Inputs:
    """Tensors shared by every subject of a configuration (same values for all)."""

    x: torch.Tensor  # [B, T, n, d], requires grad
    h: torch.Tensor  # [B, T, d], requires grad (one stream)
    upstream: torch.Tensor  # [B, T, n, d]
    upstream_h: torch.Tensor  # [B, T, d]

    @staticmethod
    def make(config: Config, seed: int = 0) -> Inputs:
        """Random inputs from ``seed`` (CPU generator, then moved)."""
        generator = torch.Generator().manual_seed(seed)
        shape = (config.batch, config.tokens, config.n, config.d)

        def randn(*size: int) -> torch.Tensor:
            t = torch.randn(size, generator=generator, dtype=torch.float32)
            return t.to(dtype=config.dtype, device=config.device)

        return Inputs(randn(*shape).requires_grad_(), randn(*shape[:2], shape[3]).requires_grad_(),
                      randn(*shape), randn(*shape[:2], shape[3]))


def _branch_only(config: Config, inputs: Inputs) -> tuple[Step, str]:
    branch = ScaleBranch(config.d, config.dtype, config.device)
    h = inputs.h
    return Step(lambda: branch(h), inputs.upstream_h, [h, branch.weight]), "branch"


def _residual(config: Config, inputs: Inputs) -> tuple[Step, str]:
    branch = ScaleBranch(config.d, config.dtype, config.device)
    h = inputs.h
    return Step(lambda: h + branch(h), inputs.upstream_h, [h, branch.weight]), "residual"


def _replicated(x: torch.Tensor) -> torch.Tensor:
    """``X = 1_n hᵀ`` from stream 0 of ``x``, as a fresh leaf."""
    return x.detach()[:, :, :1, :].expand_as(x).contiguous().requires_grad_()


def _drive(impl: object, kind: str, config: Config, inputs: Inputs) -> tuple[Step, str]:
    forward = getattr(impl, "forward", None)
    if forward is None or not callable(forward):
        raise TypeError(f"{type(impl).__name__} has no forward(x, branch)")
    branch = ScaleBranch(config.d, config.dtype, config.device)
    parameters = getattr(impl, "parameters", None)
    params = [p for p in parameters() if p.requires_grad] if callable(parameters) else []
    x, note = inputs.x, ""
    probe = x.detach()[:1, :1]
    try:
        with torch.no_grad():
            forward(probe, branch)
    except ValueError:  # e.g. accepts only replicated states: retry with one
        x, note = _replicated(inputs.x), "replicated input X = 1ₙhᵀ (accepts no other)"
        with torch.no_grad():
            forward(x.detach()[:1, :1], branch)
    step = Step(lambda: forward(x, branch), inputs.upstream, [x, branch.weight, *params], note)
    return step, kind


def _target(name: str) -> Callable[[Config, Inputs], tuple[Step, str]]:
    def build(config: Config, inputs: Inputs) -> tuple[Step, str]:
        target = kit_targets.resolve(name)
        impl = target.factory(config.n, config.d, dtype=config.dtype, device=config.device,
                              seed=0)
        return _drive(impl, str(getattr(impl, "kind", "?")), config, inputs)

    return build


def _reference_mhc(implementation: str, recompute: bool
                   ) -> Callable[[Config, Inputs], tuple[Step, str]]:
    def build(config: Config, inputs: Inputs) -> tuple[Step, str]:
        impl = reference_targets.mhc(config.n, config.d, dtype=config.dtype,
                                     device=config.device, seed=0,
                                     implementation=implementation,  # type: ignore[arg-type]
                                     recompute=recompute)
        return _drive(impl, "mhc", config, inputs)

    return build


def _mhc_pytorch_raw(config: Config, inputs: Inputs) -> tuple[Step, str]:
    problem = kit_targets.package_problem(kit_targets.BUILTIN["mhc_pytorch:mhc"])
    if problem is not None:
        raise ImportError(problem)
    from mhc import ManifoldHyperConnections

    branch = ScaleBranch(config.d, config.dtype, config.device)
    module = ManifoldHyperConnections(config.d, config.n, branch).to(dtype=config.dtype,
                                                                     device=config.device)
    h = inputs.h
    note = "the package's own call on h [B,T,d]: replicate, one mHC step, collapse (mean)"
    return Step(lambda: module(h), inputs.upstream_h, [h, *module.parameters()], note), "mhc"


FORWARD_ONLY_PREFIXES = ("llama_cpp:",)
"""Targets without a backward (native inference ops): measured by the forward-only section
(:func:`benchmarks.ggml_forward.measure_ggml_forward`), not in the forward + backward tables."""


def builtin_target_names() -> list[str]:
    """The kit's built-in targets with a backward: the reference's first, then the
    third-party adapters (not :data:`FORWARD_ONLY_PREFIXES`)."""
    names = sorted(n for n in kit_targets.BUILTIN if not n.startswith(FORWARD_ONLY_PREFIXES))
    return ([n for n in names if n.startswith("reference:")]
            + [n for n in names if not n.startswith("reference:")])


# hcspec's import names and target prefixes
HCSPEC_PACKAGES = frozenset({"hcspec", "reference", "benchmarks"})


def is_third_party(name: str) -> bool:
    """Whether a subject is not hcspec's (``reference:mhc`` and ``hcspec.reference.targets:mhc`` are
    hcspec's; ``hyper_connections:mhc`` and the raw mhc-pytorch call are not)."""
    if name == MHC_PYTORCH_RAW:
        return True
    prefix = name.partition(":")[0].split(".")[0]
    return ":" in name and prefix not in HCSPEC_PACKAGES


def subjects(extra_targets: Iterable[str] = (), only: Iterable[str] | None = None
             ) -> list[Subject]:
    """Every subject, in table order (see the module docstring); ``only``: keep these names
    (the branch-only baseline is always kept).

    Raises:
        ValueError: ``only`` names a subject that does not exist.
    """
    every = _all_subjects(extra_targets)
    if only is None:
        return every
    wanted = set(only) | {BRANCH_ONLY}
    unknown = sorted(wanted - {s.name for s in every})
    if unknown:
        raise ValueError(f"unknown subject(s) {', '.join(unknown)}; known: "
                         f"{', '.join(s.name for s in every)}")
    return [s for s in every if s.name in wanted]


def _all_subjects(extra_targets: Iterable[str]) -> list[Subject]:
    out = [Subject(BRANCH_ONLY, "hcspec", _branch_only), Subject(RESIDUAL, "hcspec", _residual)]
    for name in builtin_target_names():
        out.append(Subject(name, "third-party" if is_third_party(name) else "hcspec",
                           _target(name), variant=bool(kit_targets.BUILTIN[name].options)))
        if name == "reference:mhc":
            out.append(Subject("reference:mhc recompute", "hcspec",
                               _reference_mhc("readable", True)))
        if name == "reference:mhc-fast":
            out.append(Subject("reference:mhc-fast recompute", "hcspec",
                               _reference_mhc("fast", True)))
    if "mhc_pytorch:mhc" in kit_targets.BUILTIN:
        out.append(Subject(MHC_PYTORCH_RAW, "third-party", _mhc_pytorch_raw))
    for name in extra_targets:
        out.append(Subject(name, "third-party" if is_third_party(name) else "hcspec",
                           _target(name)))
    return out
