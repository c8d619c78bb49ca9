"""The building blocks of the property catalogue: :class:`Property`, the per-run
:class:`Context` a check works in, and the exceptions a check raises.

A check is a function ``check(ctx, case) -> None`` that builds what it needs through ``ctx``
(a fresh impl per case, the state, the branch), compares with :meth:`Context.expect` (which
records the achieved error and raises :class:`PropertyFailure` beyond the tolerance) and
:meth:`Context.require`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from hcspec.conformance import probes, strategies, tolerances
from hcspec.conformance.profiles import Profile
from hcspec.conformance.protocol import (
    PARAMETERS,
    Conventions,
    HyperConnectionImpl,
    Weights,
    check_required,
)
from hcspec.conformance.strategies import Case, CountingBranch


class PropertyFailure(AssertionError):
    """A property does not hold for a case; the message says what was expected and got."""


class NotApplicable(Exception):
    """The property cannot run on this target (message: why), e.g. a dtype it rejects."""


class FactoryRejected(Exception):
    """The factory raised for a case's configuration; the case is skipped and recorded."""


class Inconclusive(Exception):
    """The case could not show what the property checks, either way (message: what was
    observed). It is recorded and not counted as evidence: a property none of whose cases was
    conclusive is reported not applicable ("not demonstrated"), never passed."""


class BranchMisuse(PropertyFailure):
    """The impl called the kit's branch with something other than a ``[B, T, d]`` tensor."""


class CheckedBranch(CountingBranch):
    """A :class:`CountingBranch` that refuses an input other than a 3-D ``[B, T, d]`` tensor:
    a branch fed the n·d concatenation of the streams, or tokens folded into the batch
    (``[B·T, d]``), fails with a message naming the shape instead of an error deep inside
    the sublayer (DESIGN.md §1: the sublayer runs once per token on a d-vector).

    Raises (when called):
        BranchMisuse: the input is not a tensor, not 3-D, or its last axis is not ``d``.
    """

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], d: int,
                 record: bool = True) -> None:
        super().__init__(fn, record=record)
        self.d = d

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.d:
            got = (f"tensor {list(x.shape)}" if isinstance(x, torch.Tensor)
                   else type(x).__name__)
            raise BranchMisuse(
                f"the branch received {got}, expected a [B, T, d] tensor with d={self.d} "
                "(the aggregate h_preᵀX: not the n·d concatenation of the streams, not the "
                "tokens folded into the batch)")
        return super().__call__(x)


@dataclass
class Worst:
    """The largest error/tolerance ratio seen so far in one property's run."""

    label: str = ""
    error: float = 0.0
    tolerance: float = 0.0

    @property
    def ratio(self) -> float:
        if self.error == 0.0:
            return 0.0
        return math.inf if self.tolerance == 0.0 else self.error / self.tolerance


@dataclass
class Context:
    """Everything a check needs about the run (one per property run; cheap to create).

    Attributes:
        factory: the target's factory.
        target_name: the TARGET string (for messages).
        kind: the impl's kind.
        conventions: the declared conventions.
        capabilities: the optional capabilities found on a sample impl.
        dtype: the working dtype (float64 unless the factory rejects it).
        device: ``"cpu"`` or ``"cuda"``.
        profile: the run profile.
        seed: the run seed (added to every case's seed by the strategies).
    """

    factory: Callable[..., Any]
    target_name: str
    kind: str
    conventions: Conventions
    capabilities: frozenset[str]
    dtype: torch.dtype
    device: str
    profile: Profile
    seed: int = 0
    worst: Worst = field(default_factory=Worst)
    rejected: list[str] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)

    # --- tolerances --------------------------------------------------------------------------
    @property
    def tol_dtype(self) -> torch.dtype:
        """The dtype tolerances are computed for (working dtype, or the coarser declared
        compute dtype)."""
        return tolerances.effective_dtype(self.dtype, self.conventions.compute_dtype)

    # --- recording comparisons ---------------------------------------------------------------
    def expect(self, label: str, error: float, tolerance: float, detail: str = "") -> None:
        """Record ``error`` for ``label`` and fail when it exceeds ``tolerance`` (or is NaN).

        Raises:
            PropertyFailure: ``error > tolerance``; the message gives both and ``detail``.
        """
        candidate = Worst(label, error, tolerance)
        if math.isnan(error) or candidate.ratio > self.worst.ratio or not self.worst.label:
            self.worst = candidate
        if math.isnan(error) or error > tolerance:
            extra = f"; {detail}" if detail else ""
            raise PropertyFailure(f"{label}: error {error:.3g} > tolerance {tolerance:.3g}{extra}")

    def require(self, condition: bool, message: str) -> None:
        """Fail with ``message`` unless ``condition``.

        Raises:
            PropertyFailure: ``condition`` is false.
        """
        if not condition:
            raise PropertyFailure(message)

    # --- building things ---------------------------------------------------------------------
    def make(
        self, case: Case, *, n: int | None = None, layer_index: int | None = None,
        dtype: torch.dtype | None = None, device: str | None = None, perturb: bool = True,
    ) -> HyperConnectionImpl:
        """A fresh impl for ``case`` (perturbed and scaled as the case says, when the impl
        exposes ``parameters``).

        Raises:
            FactoryRejected: the factory raised (the configuration is unsupported).
            PropertyFailure: the result does not satisfy the required protocol.
        """
        n = case.n if n is None else n
        try:
            impl: HyperConnectionImpl = self.factory(
                n, case.d, layer_index=case.layer_index if layer_index is None else layer_index,
                dtype=dtype or self.dtype, device=device or self.device, seed=case.seed,
            )
        except Exception as exc:  # the factory's own validation: an unsupported configuration
            message = (f"factory(n={n}, d={case.d}, dtype={dtype or self.dtype}) raised "
                       f"{type(exc).__name__}: {exc}")
            self.rejected.append(message)
            raise FactoryRejected(message) from exc
        try:
            check_required(impl)
        except (TypeError, ValueError) as exc:
            raise PropertyFailure(str(exc)) from exc
        self.require(impl.n == n and impl.d == case.d,
                     f"factory(n={n}, d={case.d}) returned an impl with n={impl.n}, d={impl.d}")
        if perturb and (case.perturb > 0 or case.param_scale != 1.0):
            self.perturb(impl, case)
        return impl

    def perturb(self, impl: HyperConnectionImpl, case: Case) -> None:
        """Add ``N(0, case.perturb²)`` noise to every floating parameter, then multiply it by
        ``case.param_scale``, in place (no-op without the ``parameters`` capability)."""
        if PARAMETERS not in self.capabilities:
            return
        with torch.no_grad():
            for i, p in enumerate(impl.parameters()):  # type: ignore[attr-defined]
                if not isinstance(p, torch.Tensor) or not p.is_floating_point():
                    continue
                if case.perturb > 0:
                    noise = strategies.gaussian(p.shape, case.seed, 1000 + i, torch.float64,
                                                std=case.perturb)
                    p.add_(noise.to(device=p.device, dtype=p.dtype))
                if case.param_scale != 1.0:
                    p.mul_(case.param_scale)

    def align_parameters(self, source: HyperConnectionImpl, target: HyperConnectionImpl) -> None:
        """Copy ``source``'s parameters into ``target`` (cast to its dtype/device), so two impls
        built for different dtypes or devices hold the same values — factories need not draw
        the same init in every dtype (torch's ``normal_`` does not). No-op without the
        ``parameters`` capability or when the parameter shapes differ."""
        if PARAMETERS not in self.capabilities:
            return
        src = list(source.parameters())  # type: ignore[attr-defined]
        dst = list(target.parameters())  # type: ignore[attr-defined]
        if len(src) != len(dst) or any(a.shape != b.shape for a, b in zip(src, dst, strict=True)):
            return
        with torch.no_grad():
            for a, b in zip(src, dst, strict=True):
                b.copy_(a.detach().to(device=b.device, dtype=b.dtype))

    def state(self, case: Case, *, dtype: torch.dtype | None = None, device: str | None = None,
              salt: int = 0) -> torch.Tensor:
        """The case's stream state ``[B, T, n, d]`` (replicated across the streams when the
        impl declares ``state_domain="replicated"``)."""
        x = strategies.stream_state(case, dtype or self.dtype, device or self.device, salt)
        return x[..., :1, :].expand_as(x).contiguous() if self.replicated else x

    @property
    def replicated(self) -> bool:
        """The impl declares that it accepts only stream-replicated states ``1_n hᵀ``."""
        return self.conventions.state_domain == "replicated"

    def tangent(self, t: torch.Tensor) -> torch.Tensor:
        """``t [..., n, d]`` projected orthogonally on the declared state domain: unchanged
        for ``"any"``; the stream mean on every stream for ``"replicated"`` (so finite
        differences stay in the domain and gradients are compared on it)."""
        if not self.replicated:
            return t
        return t.mean(dim=-2, keepdim=True).expand_as(t).contiguous()

    def branch(self, case: Case, name: str | None = None, *, dtype: torch.dtype | None = None,
               device: str | None = None, record: bool = True) -> CheckedBranch:
        """A counting (and recording) branch of the case's (or the given) kind that refuses
        an input other than ``[B, T, d]`` (:class:`CheckedBranch`)."""
        fn = strategies.make_branch(name or case.branch, case.d, dtype or self.dtype,
                                    device or self.device, seed=case.seed)
        return CheckedBranch(fn, case.d, record=record)

    def forward(self, impl: HyperConnectionImpl, x: torch.Tensor,
                branch: CountingBranch, *, copy: bool = True) -> torch.Tensor:
        """``impl.forward(x, branch)``, its output checked to be a tensor of ``x``'s shape.
        The impl receives a copy of ``x`` unless ``copy=False`` (only
        ``state.input_unchanged`` passes the state itself; see
        :func:`hcspec.conformance.probes.forward_on_copy`).

        Raises:
            PropertyFailure: wrong type/shape or the branch was not called.
        """
        try:
            return probes.call(impl, x, branch, copy=copy)
        except probes.ProbeError as exc:
            raise PropertyFailure(str(exc)) from exc

    def weights(self, impl: HyperConnectionImpl, x: torch.Tensor) -> Weights:
        """``impl.weights(x)`` on a copy of ``x`` (an autograd clone, so the weights stay
        differentiable w.r.t. ``x``), checked for shapes ``[B,T,n]``, ``[B,T,n]``,
        ``[B,T,n,n]``.

        Raises:
            PropertyFailure: not a triple of tensors of those shapes.
        """
        got = impl.weights(x.clone())  # type: ignore[attr-defined]
        batch, tokens, n, _ = x.shape
        expected = ((batch, tokens, n), (batch, tokens, n), (batch, tokens, n, n))
        names = ("h_pre", "h_post", "H_res")
        self.require(isinstance(got, (tuple, list)) and len(got) == 3,
                     f"weights(x) returned {type(got).__name__}, expected a tuple "
                     "(h_pre [B,T,n], h_post [B,T,n], H_res [B,T,n,n])")
        for name, value, shape in zip(names, got, expected, strict=True):
            self.require(isinstance(value, torch.Tensor),
                         f"weights(x): {name} is {type(value).__name__}, expected a tensor")
            self.require(tuple(value.shape) == shape,
                         f"weights(x): {name} has shape {list(value.shape)}, "
                         f"expected {list(shape)}")
        return (got[0], got[1], got[2])

    def probe(self, impl: HyperConnectionImpl, x: torch.Tensor,
              case: Case) -> probes.ProbedWeights:
        """Black-box weights of ``impl`` at ``x`` (see :mod:`hcspec.conformance.probes`).

        Raises:
            PropertyFailure: the impl cannot be probed (wrong output, branch not called).
            NotApplicable: the impl declares ``state_domain="replicated"``: a rank-1 state
                identifies only ``H_res 1`` and ``1ᵀ h_pre``, not the weights.
        """
        if self.replicated:
            raise NotApplicable(
                "black-box probing of H_res and h_pre needs a full-row-rank [n, d] state; the "
                "impl declares state_domain='replicated' (X = 1_n hᵀ, rank 1)")
        try:
            return probes.probe(impl, x, self.conventions, seed=case.seed)
        except probes.ProbeError as exc:
            raise PropertyFailure(str(exc)) from exc

    def branch_input(self, x_in: torch.Tensor) -> torch.Tensor:
        """What the branch should receive for the aggregate ``x_in``, per the declared
        ``branch_input`` convention (float64)."""
        kind, eps = self.conventions.branch_input, self.conventions.norm_eps
        if kind == "rms_norm":
            return x_in / torch.sqrt(x_in.pow(2).mean(-1, keepdim=True) + eps)
        if kind == "layer_norm":
            centred = x_in - x_in.mean(-1, keepdim=True)
            return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + eps)
        return x_in


def f64(t: torch.Tensor) -> torch.Tensor:
    """Detached float64 CPU copy."""
    return t.detach().to(device="cpu", dtype=torch.float64)


def np64(t: torch.Tensor) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Detached float64 numpy array (for :mod:`hcspec.spec.numeric`)."""
    return f64(t).numpy()


ExamplesFn = Callable[[Context], Sequence[Case]]
StrategyFn = Callable[[Context], st.SearchStrategy[Case]]
CheckFn = Callable[[Context, Case], None]


@contextlib.contextmanager
def seeded_global_rng(seed: int, device: str) -> Iterator[None]:
    """Run a block with torch's global RNG (CPU, and ``device`` when it is CUDA) seeded from
    a case's seed, restoring the caller's state afterwards: a target that draws from the global
    RNG (dropout, a random init) then sees the same numbers whenever the case is replayed, so
    its report and its reproduction command do not vary from run to run."""
    cuda = [torch.device(device).index or 0] if torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(seed)
        yield


@dataclass(frozen=True)
class Property:
    """One entry of the catalogue.

    Attributes:
        id: stable id ``family.name`` (never renamed once published; CLI ``--only`` takes it).
        family: shape, law, independence, constraints, conventions, gradients, reductions,
            dtype, device or state.
        statement: one line: what must hold.
        theorem: the spec theorem id it checks (``None`` for robustness/state checks that no
            theorem states).
        needs: capabilities the impl must offer (:data:`hcspec.conformance.protocol.CAPABILITIES`).
        kinds: the kinds it applies to.
        check: ``check(ctx, case)``.
        examples: the explicit examples, replayed before hypothesis explores.
        strategy: the hypothesis strategy of further cases.
        prerequisites: ids whose failure blocks this one.
        about_init: True when the property is about the factory's init (cases are not
            perturbed); otherwise the cases include perturbed parameters.
        explore: False for properties whose explicit examples are exhaustive (no hypothesis).
        shrink: False to report a failing explicit example as is instead of shrinking it
            (:mod:`hcspec.conformance.shrink`): the shape family, whose messages tell the axes apart
            by the canonical case's distinct sizes (B=2, T=3, n=4, d=8) — a [1, 1, 1, 1]
            would not — and ``compile.fullgraph``, whose every re-run compiles anew.
    """

    id: str
    family: str
    statement: str
    theorem: str | None
    needs: frozenset[str]
    kinds: frozenset[str]
    check: CheckFn
    examples: ExamplesFn
    strategy: StrategyFn
    prerequisites: tuple[str, ...] = ()
    about_init: bool = False
    explore: bool = True
    shrink: bool = True

    def run(self, ctx: Context, case: Case) -> None:
        """``check(ctx, case)`` with torch's global RNG seeded from ``case.seed``
        (:func:`seeded_global_rng`), as the runner and the shrinker run every case.

        Raises:
            whatever ``check`` raises.
        """
        with seeded_global_rng(case.seed, ctx.device):
            self.check(ctx, case)
