"""Inspecting a target before any property runs: :func:`prepare` resolves the target, the
profile and the device, builds a sample impl and learns from it (:func:`inspect_target`: the
kind, capabilities, working dtype and conventions, and what is likely to go wrong), and gives
the :class:`RunSetup` every property run reads."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import platform
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from hcspec.conformance.machinery.base import seeded_global_rng
from hcspec.conformance.machinery.declaration import Property
from hcspec.conformance.machinery.setup import FamilySetup, Prepared
from hcspec.conformance.outputs import report as rp
from hcspec.conformance.outputs.report import kit_version
from hcspec.conformance.profiles import Profile, get_profile
from hcspec.conformance.protocol import (
    Conventions,
    ConventionsError,
    Factory,
    UnknownKind,
    capabilities,
    check_required,
    conventions_of,
)
from hcspec.conformance.run import diagnostics, isolation
from hcspec.conformance.run.threads import in_worker
from hcspec.conformance.run.timeouts import TimedOut
from hcspec.conformance.strategies import make_branch
from hcspec.conformance.subjects.targets import Target, TargetError, resolve


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``.

    Raises:
        ValueError: unknown device, or ``cuda`` without a CUDA device.
    """
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--device: expected cpu, cuda or auto, got {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device (torch.cuda.is_available() is False)")
    return device


@dataclass
class TargetInfo:
    """What the run learned from a sample impl (n = 4, d = 8).

    Attributes:
        kind, dtype, capabilities, conventions: as read from the sample impl.
        problems: why no sample impl could be built or read (reported by shape.output).
        warnings: findings about the impl as built (header warnings).
        causes: likely causes of failures found while inspecting (a forward that reseeds
            the global RNG, a non-finite output, a factory that ignores ``dtype``): each
            failure's hint names them.
        global_state_changes: what the factory and the forward changed in torch's global
            state (restored by the kit; :mod:`hcspec.conformance.run.isolation`).
        declaration_error: a declaration the kit cannot read (an unknown ``kind``, an unknown
            or invalid conventions field): :func:`prepare` raises it as a usage error.
    """

    kind: str = "unknown"
    dtype: torch.dtype = torch.float64
    capabilities: frozenset[str] = frozenset()
    conventions: Conventions = field(default_factory=Conventions)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    causes: dict[str, str] = field(default_factory=dict)
    global_state_changes: list[str] = field(default_factory=list)
    declaration_error: str | None = None


StatusFn = Callable[[str], None]

_SENTINEL_SEED = 0x5EED_C0DE
"""The global RNG's seed while a sample forward runs: a forward that calls
``torch.manual_seed`` is seen by ``torch.initial_seed()`` no longer being this."""


def inspect_target(factory: Factory, device: str, seed: int, *,
                   on_status: StatusFn | None = None,
                   timeout: float | None = None) -> TargetInfo:
    """Build a sample impl (float64, else float32) to learn the kind, capabilities, working
    dtype and conventions, and diagnose it (non-deterministic or non-finite forward, a
    factory that ignores ``dtype``, a forward that reseeds the global RNG, changes to torch's
    global state — restored). ``on_status`` is told what is being built or called, before
    it is (so a hang names its place); the whole inspection runs in a worker thread limited
    to ``timeout`` seconds. Problems are recorded, never raised: the shape property reports
    them as failures. Raises only ``KeyboardInterrupt``."""
    status = on_status or (lambda text: None)
    info = TargetInfo()
    with isolation.watch() as changed:
        try:
            in_worker(lambda: _inspect_seeded(info, factory, device, seed, status),
                       timeout, "building and inspecting a sample impl", changed)
        except TimedOut as exc:
            stuck = f"; it was stuck at {exc.stack.where}" if exc.stack is not None else ""
            info.problems.append(f"{info.causes.get('running', 'the inspection')} did not "
                                 f"finish within {exc.seconds:g} s (--timeout){stuck}")
            changed = []  # the abandoned thread is inside the kit's RNG fork: not the target's
    info.causes.pop("running", None)
    if changed:
        info.global_state_changes = list(changed)
        info.warnings.append("the factory or forward changed torch's global state (the kit "
                             "restored it after each property): " + "; ".join(changed))
    return info


def _inspect_seeded(info: TargetInfo, factory: Factory, device: str, seed: int,
                    status: StatusFn) -> None:
    with seeded_global_rng(seed, device):  # the diagnostics run forward: dropout draws
        _inspect(info, factory, device, seed, status)


def _say(info: TargetInfo, status: StatusFn, text: str) -> None:
    info.causes["running"] = text
    status(text)


def _inspect(info: TargetInfo, factory: Factory, device: str, seed: int,
             status: StatusFn) -> None:
    for dtype in (torch.float64, torch.float32):
        call = (f"factory(4, 8, layer_index=0, dtype={dtype}, device={device!r}, "
                f"seed={seed})")
        _say(info, status, f"building a sample impl: {call}")
        try:
            impl = factory(4, 8, layer_index=0, dtype=dtype, device=device, seed=seed)
        except Exception as exc:
            info.problems.append(f"factory(4, 8, dtype={dtype}) raised {type(exc).__name__}: {exc}")
            continue
        info.dtype = dtype
        try:
            check_required(impl)
        except UnknownKind as exc:
            info.declaration_error = str(exc)
            return
        except (TypeError, ValueError) as exc:
            info.problems.append(str(exc))
            return
        info.kind = str(impl.kind)
        info.capabilities = capabilities(impl)
        try:
            info.conventions = conventions_of(impl)
        except ConventionsError as exc:
            info.declaration_error = str(exc)
            return
        ignored = _ignored_dtype(impl, dtype, info.conventions.compute_dtype)
        if ignored:
            info.causes["dtype"] = ignored
            info.warnings.append(ignored)
        _say(info, status, f"calling forward on a sample [2, 3, 4, 8] {dtype} state "
                           "(twice, to check that it is deterministic)")
        warnings = diagnostics.diagnose(impl, dtype, device, info.conventions)
        info.warnings += warnings
        if any("non-finite" in w for w in warnings):
            info.causes["nonfinite"] = next(w for w in warnings if "non-finite" in w)
        _say(info, status, "calling forward once more to see whether it reseeds the global RNG")
        reseeds = _reseeds_global_rng(impl, dtype, device, info.conventions)
        if reseeds:
            info.causes["reseeds"] = reseeds
            info.warnings.append(reseeds)
        return


def _ignored_dtype(impl: object, dtype: torch.dtype,
                   compute_dtype: torch.dtype | None = None) -> str | None:
    """``parameters are float32 but float64 was requested`` when the impl's floating
    parameters have neither the ``dtype`` its factory was asked for nor the declared
    ``compute_dtype`` (parameters kept in a declared internal precision are not ignoring
    anything), else None."""
    parameters = getattr(impl, "parameters", None)
    if not callable(parameters):
        return None
    try:
        found = sorted({str(p.dtype).replace("torch.", "") for p in parameters()
                        if isinstance(p, torch.Tensor) and p.is_floating_point()
                        and p.dtype not in (dtype, compute_dtype)})
    except Exception:  # parameters() itself is checked by the properties
        return None
    if not found:
        return None
    return (f"the factory ignores dtype: parameters are {', '.join(found)} but "
            f"{str(dtype).replace('torch.', '')} was requested (build the parameters with the "
            "dtype the factory receives)")


def _reseeds_global_rng(impl: object, dtype: torch.dtype, device: str,
                        conventions: Conventions) -> str | None:
    """A warning when one forward of ``impl`` calls ``torch.manual_seed`` (the global RNG's
    ``initial_seed()`` changes), else None. The RNG is forked, so nothing leaks."""
    with torch.random.fork_rng():
        torch.manual_seed(_SENTINEL_SEED)
        try:
            x = diagnostics.sample_state(4, 8, dtype, device, conventions)
            branch = make_branch("mlp", 8, dtype, device, seed=7)
            with torch.no_grad():
                impl.forward(x.clone(), branch)  # type: ignore[attr-defined]
        except Exception:  # reported in detail by the properties
            return None
        seeded = torch.initial_seed()
    if seeded == _SENTINEL_SEED:
        return None
    return (f"forward calls torch.manual_seed (the global RNG was reseeded to {seeded} during "
            "one forward): every forward draws the same numbers, and torch.compile cannot "
            "trace it (a graph break: TorchDynamo skips torch.manual_seed); seed once, "
            "outside forward")


def _versions(target: Target) -> dict[str, str]:
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "hypothesis": importlib.metadata.version("hypothesis"),
    }
    versions.update(target.versions)
    return versions


@dataclass
class RunSetup:
    """A resolved target and everything a property run needs besides the property.

    ``timeout`` is the per-property wall-clock limit in seconds (None: none).
    ``world_size``: the ranks of a multi-process run (None: single-process);
    ``prepared``: what each family setup hook of the selected properties prepared
    (:data:`hcspec.conformance.machinery.setup.FamilySetup`; the session fills it).
    """

    target: Target
    info: TargetInfo
    profile: Profile
    device: str
    seed: int
    timeout: float | None = None
    world_size: int | None = None
    prepared: dict[FamilySetup, Prepared] = field(default_factory=dict)

    def prepared_for(self, prop: Property) -> Prepared | None:
        """What ``prop``'s family setup hook prepared for this run (None: nothing)."""
        return None if prop.setup is None else self.prepared.get(prop.setup)

    def report(self) -> rp.Report:
        """An empty report carrying this run's header."""
        return rp.Report(
            target=self.target.name, kit_version=kit_version(), profile=self.profile.name,
            seed=self.seed, device=self.device, dtype=str(self.info.dtype).replace("torch.", ""),
            kind=self.info.kind, description=self.target.description,
            capabilities=sorted(self.info.capabilities),
            conventions=self._conventions(), versions=_versions(self.target),
            warnings=[*self.info.problems, *self.info.warnings], timeout=self.timeout,
            global_state_changes=list(self.info.global_state_changes),
            max_examples=self.profile.max_examples,
            declared_conventions=[name for name in self.info.conventions.declared_fields()
                                  if name in self._conventions()],
        )

    def _conventions(self) -> dict[str, str]:
        described = self.info.conventions.describe()
        if self.info.kind not in ("mhc", "unknown"):  # Sinkhorn–Knopp fields concern mHC only
            described = {k: v for k, v in described.items() if not k.startswith("sinkhorn")}
        return described


def _timeout(profile: Profile, timeout: float | None) -> float | None:
    """The per-property limit: ``timeout`` when given (0 or less: none), else the profile's
    own (:attr:`hcspec.conformance.profiles.Profile.timeout`)."""
    if timeout is None:
        return profile.timeout
    return timeout if timeout > 0 else None


def prepare(
    target: str | Factory | None, *, profile: str = "ci", device: str = "auto", seed: int = 0,
    timeout: float | None = None, on_status: StatusFn | None = None,
    on_resolved: Callable[[rp.Report], None] | None = None, world_size: int | None = None,
    max_examples: int | None = None,
) -> RunSetup:
    """Resolve the target, profile and device and inspect a sample impl
    (:func:`inspect_target`, within the time limit). ``on_resolved`` is called once the
    target is resolved, before any factory or forward runs, with a report holding the part of
    the header known by then (target, versions, profile, seed, device).

    ``max_examples`` replaces the profile's hypothesis examples per property (None: the
    profile's own); the report records the number used (``Report.max_examples``).

    Raises:
        hcspec.conformance.subjects.targets.TargetError, ValueError: as
            :func:`check_implementation`; also a TargetError when the sample impl declares an
            unknown ``kind`` or conventions the kit cannot read
            (:attr:`TargetInfo.declaration_error`; with a "did you mean").
    """
    if world_size is not None and (isinstance(world_size, bool) or not isinstance(
            world_size, int) or world_size < 1):
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    chosen = get_profile(profile)
    if max_examples is not None:  # --max-examples: every property's exploration budget
        if isinstance(max_examples, bool) or not isinstance(max_examples, int) \
                or max_examples < 1:
            raise ValueError(f"max_examples must be an int >= 1, got {max_examples!r}")
        chosen = dataclasses.replace(chosen, max_examples=max_examples)
    resolved = resolve(target)
    dev = resolve_device(device)
    limit = _timeout(chosen, timeout)
    early = RunSetup(resolved, TargetInfo(), chosen, dev, seed, limit, world_size)
    if on_resolved is not None:
        on_resolved(early.report())
    early.info = inspect_target(resolved.factory, dev, seed, on_status=on_status, timeout=limit)
    if early.info.declaration_error is not None:  # a typo in a declaration: a usage error
        raise TargetError(f"TARGET {resolved.name!r}: {early.info.declaration_error}")
    return early
