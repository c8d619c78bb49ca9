"""Requirements: the facts about a target that decide, before any case runs, whether a
property applies — its kind, a capability, float64 support, the declared state domain or
branch input, a CUDA device, a usable ``torch.compile``.

A property declares its requirements (:func:`hcspec.conformance.machinery.declaration.declare`);
the runner evaluates them on the :class:`Subject` inspected from a sample impl and reports the
property not applicable with the first unmet requirement's reason. ``hc-conformance list``
shows each requirement's condition.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from hcspec.conformance.profiles import Profile
from hcspec.conformance.protocol import (
    CAPABILITIES,
    ELEMENTWISE_WEIGHTS,
    KINDS,
    READ_MAP,
    WEIGHTS,
    Conventions,
)


@dataclass(frozen=True)
class Subject:
    """What applicability is decided on: facts about the target and the run, known before any
    case runs.

    Attributes:
        kind: the sample impl's kind (``"unknown"`` when none could be inspected).
        capabilities: the optional capabilities of the sample impl.
        dtype: the working dtype (float64 unless the factory rejects it).
        conventions: the declared conventions.
        device: ``"cpu"`` or ``"cuda"``, where the run happens.
        profile: the run profile.
        distributed: the facts of a multi-process run (``--world-size N`` or a
            ``torch.distributed`` launcher); None in a single-process run.
    """

    kind: str
    capabilities: frozenset[str]
    dtype: torch.dtype
    conventions: Conventions
    device: str
    profile: Profile
    distributed: Distributed | None = None


@dataclass(frozen=True)
class Distributed:
    """What a multi-process run knows before any rank starts (read from a sample of the
    target's sharded factory, :mod:`hcspec.conformance.parallel.harness`).

    Attributes:
        world_size: the number of ranks (>= 1).
        splits: the splits the target declares (``()``: no sharding capability).
        named_parameters: the unsharded impl has ``named_parameters()``.
        problem: why the ranks cannot run here (device, backend), or None.
    """

    world_size: int
    splits: tuple[str, ...] = ()
    named_parameters: bool = False
    problem: str | None = None


@dataclass(frozen=True)
class Requirement:
    """One condition a property needs.

    Attributes:
        condition: what must hold, in a few words (``hc-conformance list``).
        reason: why the property cannot run when it does not hold (the not-applicable
            message); never empty.
        holds: ``holds(subject)``.
        detail: optional ``detail(subject)``: the circumstance, appended to the reason
            (e.g. the target's actual kind, or why the compiler is unusable).
        separator: what joins the reason and the detail.
        kinds: for a kind requirement, the kinds allowed (else None).
        capability: for a capability requirement, its name (else None).
    """

    condition: str
    reason: str
    holds: Callable[[Subject], bool]
    detail: Callable[[Subject], str | None] | None = None
    separator: str = "; "
    kinds: frozenset[str] | None = None
    capability: str | None = None

    def unmet(self, subject: Subject) -> str | None:
        """The not-applicable message when the requirement fails on ``subject``, else None."""
        if self.holds(subject):
            return None
        extra = self.detail(subject) if self.detail is not None else None
        return f"{self.reason}{self.separator}{extra}" if extra else self.reason


def kinds(*allowed: str) -> Requirement:
    """The impl's kind is one of ``allowed`` (a target whose kind is unknown passes: its
    shape properties report why it could not be inspected).

    Raises:
        ValueError: a kind not in :data:`hcspec.conformance.protocol.KINDS`.
    """
    unknown = sorted(set(allowed) - set(KINDS))
    if unknown or not allowed:
        raise ValueError(f"kinds(): expected some of {KINDS}, got {allowed}")
    names = ", ".join(sorted(allowed))
    return Requirement(
        f"kind ∈ {{{names}}}", f"applies to {names}",
        lambda s: s.kind not in KINDS or s.kind in allowed,
        lambda s: f"the target's kind is {s.kind}", kinds=frozenset(allowed))


def capability(name: str) -> Requirement:
    """The impl offers the optional capability ``name``.

    Raises:
        ValueError: ``name`` is not in :data:`hcspec.conformance.protocol.CAPABILITIES`.
    """
    if name not in CAPABILITIES:
        raise ValueError(f"capability(): expected one of {CAPABILITIES}, got {name!r}")
    return Requirement(
        f"capability {name}",
        f"needs the capability {name}, which the impl does not offer "
        "(see hcspec.conformance.protocol)",
        lambda s: name in s.capabilities, capability=name)


def float64(what: str) -> Requirement:
    """The factory builds float64 impls (the run's working dtype is float64); ``what`` says
    why the property needs it."""
    return Requirement(
        "float64", f"{what}; the factory rejected float64",
        lambda s: s.dtype == torch.float64,
        lambda s: f"(runs in {s.dtype})", separator=" ")


def any_state_domain(why: str) -> Requirement:
    """The impl accepts any stream state (does not declare ``state_domain="replicated"``);
    ``why`` says what a replicated state ``X = 1_n hᵀ`` cannot show."""
    return Requirement(
        "state_domain any", f"{why}; the impl declares state_domain='replicated' (X = 1_n hᵀ)",
        lambda s: s.conventions.state_domain != "replicated")


PROBING_WHY = ("black-box probing of H_res and h_pre needs a full-row-rank [n, d] state "
               "(a rank-1 state identifies only H_res 1 and 1ᵀ h_pre)")
PROBING = any_state_domain(PROBING_WHY)
"""Probing the weights through the branch (:mod:`hcspec.conformance.probes`)."""

WEIGHTS_OR_PROBING = Requirement(
    "capability weights or state_domain any",
    f"reads the weights through weights(x), which the impl does not offer, or by probing: "
    f"{PROBING_WHY}; the impl declares state_domain='replicated' (X = 1_n hᵀ)",
    lambda s: WEIGHTS in s.capabilities or s.conventions.state_domain != "replicated")
"""The mHC weights are readable: reported by ``weights(x)``, else probed."""

PROBED_H_PRE = Requirement(
    "branch_input x_in",
    "h_pre is identifiable by probing only when the branch receives x_in = h_preᵀX itself",
    lambda s: s.conventions.branch_input == "x_in",
    lambda s: f"the declared branch input is {s.conventions.branch_input!r}")
"""Probing identifies ``h_pre`` (the branch receives ``x_in`` unnormalised)."""


PER_STREAM_READ = Requirement(
    "read per_stream",
    "needs per-stream scalar weights h_pre [n] (x_in = h_preᵀX), reported or probed; the impl "
    "declares a read that is not per-stream (conventions.read='elementwise', x_in = Σ_s h_pre_s "
    "⊙ X_s, or 'map': spec gated.per_stream_only), checked by the gated family instead",
    lambda s: s.conventions.read == "per_stream")
"""The read is per-stream: ``h_pre`` is n scalars (not Qwen4-exp's element-wise gated read)."""

ELEMENTWISE_READ = Requirement(
    "read elementwise or map",
    "applies to a read that is not per-stream (conventions.read='elementwise' or 'map', "
    "Qwen4-exp's gated read)",
    lambda s: s.conventions.read != "per_stream",
    lambda s: f"the declared read is {s.conventions.read!r}")
"""The read is not per-stream: element-wise or another map (the ``gated`` family)."""


READ_REPORTED = Requirement(
    "capability elementwise_weights or read_map",
    "needs the read reported: elementwise_weights(x) or read_map(x), neither of which the "
    "impl offers (see hcspec.conformance.protocol)",
    lambda s: ELEMENTWISE_WEIGHTS in s.capabilities or READ_MAP in s.capabilities)
"""The impl reports its read: element-wise weights or the read map (``gated.law``)."""


def reads_per_stream(requires: tuple[Requirement, ...]) -> bool:
    """Whether a property with these requirements reads per-stream weights: it needs the
    ``weights`` capability, probes the weights (:data:`PROBING`, :data:`WEIGHTS_OR_PROBING`,
    :data:`PROBED_H_PRE`) or states a fact of the HC kinds only (a kind requirement without
    ``mhc``); :func:`hcspec.conformance.machinery.declaration.declare` then adds
    :data:`PER_STREAM_READ` first."""
    for requirement in requires:
        if requirement.capability == WEIGHTS or requirement in (PROBING, WEIGHTS_OR_PROBING,
                                                                PROBED_H_PRE):
            return True
        if requirement.kinds is not None and "mhc" not in requirement.kinds:
            return True
    return False


def cuda_reason() -> str | None:
    """Why CUDA cannot be used here, or None when it can."""
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    return None


CUDA = Requirement("a CUDA device", "compares the CUDA forward with the CPU forward",
                   lambda s: cuda_reason() is None, lambda s: cuda_reason())
"""A CUDA device is present (whatever the run's device)."""

TRACE_BACKEND = "eager"
CHEAP_BACKEND = "aot_eager"
FULL_BACKEND = "inductor"


def compile_backend(profile: Profile) -> str:
    """The profile's ``compile_backend``: ``eager`` under ``quick`` (TorchDynamo's trace only),
    ``inductor`` under ``thorough``, else ``aot_eager`` (see
    :mod:`hcspec.conformance.families.compile`)."""
    return profile.compile_backend


def compile_unavailable(backend: str, device: str) -> str | None:
    """Why ``torch.compile`` with ``backend`` cannot run on ``device`` here, or None."""
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


COMPILE = Requirement(
    "torch.compile usable (aot_eager; eager under quick, inductor under thorough)",
    "torch.compile with the profile's backend cannot run here",
    lambda s: compile_unavailable(compile_backend(s.profile), s.device) is None,
    lambda s: compile_unavailable(compile_backend(s.profile), s.device))
"""``torch.compile`` with the profile's backend can run on the run's device."""

TRACEABLE = Requirement(
    "traceable (no conventions.untraceable)",
    "the impl declares that TorchDynamo cannot trace its forward",
    lambda s: s.conventions.untraceable is None,
    lambda s: s.conventions.untraceable, separator=": ")
"""The impl does not declare ``Conventions.untraceable`` (a forward that calls into another
array framework, which ``torch.compile`` cannot see into)."""


DIFFERENTIABLE = Requirement(
    "differentiable (no conventions.no_backward)",
    "the impl declares that it has no backward",
    lambda s: s.conventions.no_backward is None,
    lambda s: s.conventions.no_backward, separator=": ")
"""The impl does not declare ``Conventions.no_backward`` (inference-only native kernels):
every property that differentiates the impl requires it."""


def not_bridged(moot: str) -> Requirement:
    """The impl is not bridged from another array framework (``Conventions.bridged`` is None):
    ``moot`` says what :mod:`hcspec.conformance.bridge` does that makes the property's bug
    class impossible, so a bridged target would pass it without its own code being checked
    (the report then says so, with the framework's name)."""
    return Requirement(
        "not bridged (no conventions.bridged)",
        f"the framework bridge makes this bug class impossible: {moot}; a pass would say "
        "nothing about the implementation",
        lambda s: s.conventions.bridged is None,
        lambda s: f"bridged from {s.conventions.bridged}", separator="; ")


SHARDING_CAPABILITY = "sharding"
"""The sharding capability's name (:mod:`hcspec.conformance.parallel.protocol`); a
capability of the target's sharded factory, not of :data:`hcspec.conformance.protocol.CAPABILITIES`
(those are detected on every impl)."""

DISTRIBUTED = Requirement(
    "multi-process run",
    "runs across torch.distributed ranks, and this run is single-process: give --world-size N "
    "(N ranks started here) or launch the kit with torchrun",
    lambda s: s.distributed is not None)
"""The run has ranks (what the parallel family's setup hook prepared says so)."""

SHARDING = Requirement(
    f"capability {SHARDING_CAPABILITY}",
    "the target declares no sharding capability (impl.shard_splits and impl.shard(split, "
    "group); see hcspec.conformance.parallel.protocol)",
    lambda s: s.distributed is not None and bool(s.distributed.splits),
    capability=SHARDING_CAPABILITY)
"""The target runs sharded across a process group (``shard_splits`` and ``shard``)."""

NAMED_PARAMETERS = Requirement(
    "named_parameters()",
    "the unsharded impl has no named_parameters(), so its parameters cannot be matched with "
    "the ranks' parameter_shards()",
    lambda s: s.distributed is not None and s.distributed.named_parameters)
"""The unsharded impl names its parameters (the ranks' parameter map refers to the names)."""

TWO_RANKS = Requirement(
    "world size >= 2", "needs at least 2 ranks to compare world sizes",
    lambda s: s.distributed is not None and s.distributed.world_size >= 2,
    lambda s: None if s.distributed is None else f"this run has {s.distributed.world_size}")
"""At least two ranks (half the ranks, the upper ranks)."""

RANKS_START = Requirement(
    "ranks can start here",
    "the ranks cannot run here",
    lambda s: s.distributed is None or s.distributed.problem is None,
    lambda s: None if s.distributed is None else s.distributed.problem, separator=": ")
"""The device and the build of torch can host the run's ranks."""


def first_unmet(requirements: Iterable[Requirement], subject: Subject) -> str | None:
    """The message of the first requirement ``subject`` does not meet, or None."""
    for requirement in requirements:
        message = requirement.unmet(subject)
        if message is not None:
            return message
    return None
