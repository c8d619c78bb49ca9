"""Run profiles: how much the kit explores (hypothesis settings and the size of generated cases).

* ``quick`` — a smoke run: the explicit examples plus a few random ones.
* ``ci`` — enough examples for a CI gate.
* ``thorough`` — many more examples, larger shapes and extreme magnitudes.
* ``kernel`` — sized for Triton kernels run through Triton's CPU interpreter (about a second
  per forward): the explicit examples plus one generated case per property, reaching the
  shapes where kernels break (n up to 8, d past a 64-wide block).

A profile is data: every knob the kit reads from it is a field of :class:`Profile` (example
counts, shape bounds, extremes, the per-property time limit, the ``torch.compile`` backend, the
depth of the stacks, which explicit examples the families add or trim). No code compares a
profile's name (a test checks it), so a new profile is one :func:`register` call or one entry
of :data:`PROFILES`.

Every profile is deterministic: the runner seeds each property's exploration from the
property id and ``--seed`` (:func:`hcspec.conformance.run.execution.exploration_seed`), so a CI gate
sees the same cases every run. :data:`PROFILES` is the one source of the names:
:data:`PROFILE_NAMES` is a live view of its keys, so the CLI's ``--profile`` and the pytest
plugin's ``--hc-profile`` offer exactly the registered profiles.

Each profile is also registered with hypothesis as ``hcspec-<name>`` so users' own tests can
``hypothesis.settings.load_profile("hcspec-ci")``: importing :mod:`hcspec.conformance.strategies`
registers them (:func:`register_with_hypothesis`). This module itself does not import hypothesis,
so the pytest plugin can read the profile names without slowing every pytest start.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, overload

if TYPE_CHECKING:
    from hypothesis import settings


@dataclass(frozen=True)
class Profile:
    """How much a run explores.

    Attributes:
        name: the key in :data:`PROFILES` (``--profile NAME``); only shown, never compared.
        max_examples: hypothesis examples per property, after the explicit ones.
        derandomize: the registered hypothesis profile (``hcspec-<name>``, for users' own
            tests) draws the same examples every run; the kit's runner seeds explicitly.
        max_batch, max_tokens, max_n, max_d: bounds of generated shapes ``[B, T, n, d]``.
        extreme: also draw extreme magnitudes (states scaled to 1e±6, parameters scaled ×1e4).
        timeout: the default wall-clock limit per property in seconds (``--timeout`` overrides
            it), about ten times the slowest property of the reference targets on a loaded
            2-core machine, so that only a hang reaches it.
        compile_backend: the ``torch.compile`` backend of the compile family: ``eager``
            (TorchDynamo's trace only), ``aot_eager`` (plus AOTAutograd) or ``inductor``
            (generated kernels; needs a C++ compiler on the CPU).
        stack_depth: sublayers in the depth family's stacks.
        trimmed_examples: families whose explicit examples are costly run only their first
            few (a smoke run).
        extra_examples: families add their costlier explicit examples (e.g. more compiles).
        oracle_max_n: the largest expansion rate the families that compare with an oracle
            (published, law, exact, gradients) draw, within the target's declared
            ``supported_expansion_rates``: the spread of sizes is the profile's, not a
            family's (a formula slip that shows only at n ≥ 5 hides below it).
        ragged_d: hidden sizes those families draw besides ``1..max_d`` (not multiples of
            common tile widths: a lane or tile bug shows only past a tile).
        size_rows: ``(n, d)`` of the explicit examples those families add (each kept where
            the target's declared sizes allow it), so that even a run of explicit examples
            only (``quick``) reaches the large expansion rates.
    """

    name: str
    max_examples: int
    derandomize: bool
    max_batch: int
    max_tokens: int
    max_n: int
    max_d: int
    extreme: bool
    timeout: float
    compile_backend: str
    stack_depth: int
    trimmed_examples: bool = False
    extra_examples: bool = False
    oracle_max_n: int = 8
    ragged_d: tuple[int, ...] = (5, 13, 33)
    size_rows: tuple[tuple[int, int], ...] = ((5, 13), (8, 33))

    def __post_init__(self) -> None:
        if self.compile_backend not in COMPILE_BACKENDS:
            raise ValueError(f"profile {self.name!r}: compile_backend "
                             f"{self.compile_backend!r}; expected one of {COMPILE_BACKENDS}")
        if not self.timeout > 0 or self.stack_depth < 1 or self.max_examples < 1:
            raise ValueError(f"profile {self.name!r}: timeout must be > 0, stack_depth and "
                             f"max_examples >= 1")
        if self.oracle_max_n < self.max_n or any(d < 1 for d in self.ragged_d) or any(
                not 1 <= n <= self.oracle_max_n or d < 1 for n, d in self.size_rows):
            raise ValueError(f"profile {self.name!r}: oracle_max_n must be >= max_n, ragged_d "
                             "positive and size_rows (n, d) with 1 <= n <= oracle_max_n")

    def hypothesis_settings(self, seed_is_fixed: bool = False) -> settings:
        """hypothesis settings for this profile (no example database: runs are reproducible
        from the profile and the seed alone; no deadline: torch timings vary)."""
        from hypothesis import HealthCheck, settings

        return settings(
            max_examples=self.max_examples,
            derandomize=self.derandomize and not seed_is_fixed,
            database=None,
            deadline=None,
            print_blob=False,
            suppress_health_check=list(HealthCheck),
        )


COMPILE_BACKENDS: Final = ("eager", "aot_eager", "inductor")
"""The ``torch.compile`` backends a profile may name, cheapest first."""

PROFILES: Final[dict[str, Profile]] = {
    "quick": Profile("quick", max_examples=2, derandomize=True, max_batch=2, max_tokens=3,
                     max_n=4, max_d=8, extreme=False, timeout=300.0, compile_backend="eager",
                     stack_depth=16, trimmed_examples=True),
    "ci": Profile("ci", max_examples=20, derandomize=True, max_batch=3, max_tokens=4,
                  max_n=4, max_d=12, extreme=False, timeout=600.0, compile_backend="aot_eager",
                  stack_depth=16, ragged_d=(5, 13, 33, 65)),
    "thorough": Profile("thorough", max_examples=100, derandomize=False, max_batch=4,
                        max_tokens=8, max_n=8, max_d=24, extreme=True, timeout=1800.0,
                        compile_backend="inductor", stack_depth=32, extra_examples=True,
                        ragged_d=(5, 13, 33, 65, 129, 257),
                        size_rows=((5, 13), (6, 65), (7, 33), (8, 129))),
    "kernel": Profile("kernel", max_examples=1, derandomize=True, max_batch=2, max_tokens=3,
                      max_n=8, max_d=72, extreme=False, timeout=600.0,
                      compile_backend="aot_eager", stack_depth=16, ragged_d=(65, 72, 129),
                      size_rows=((5, 65), (8, 72))),
}
"""Every profile by name, cheapest first (``kernel``, sized apart for Triton's interpreter,
last). A new profile is one entry here (or :func:`register`)."""
DEFAULT_PROFILE: Final = "ci"


class _Names(Sequence[str]):
    """The keys of :data:`PROFILES` as a tuple-like sequence, read when used (so a profile
    registered later is offered too)."""

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return tuple(PROFILES)[index]

    def __len__(self) -> int:
        return len(PROFILES)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(PROFILES))

    def __contains__(self, name: object) -> bool:
        return name in PROFILES

    def __eq__(self, other: object) -> bool:
        return tuple(PROFILES) == (tuple(other) if isinstance(other, Sequence) else other)

    def __hash__(self) -> int:
        return hash(tuple(PROFILES))

    def __repr__(self) -> str:
        return repr(tuple(PROFILES))


PROFILE_NAMES: Final[Sequence[str]] = _Names()
"""The profile names, cheapest first: the choices of ``--profile`` and ``--hc-profile`` (a live
view of :data:`PROFILES`)."""


def register(profile: Profile) -> None:
    """Add ``profile`` to :data:`PROFILES` (and to hypothesis as ``hcspec-<name>`` when
    hypothesis is already imported): the CLI, the pytest plugin and the runner offer it from
    then on.

    Raises:
        ValueError: a profile of that name exists.
    """
    if profile.name in PROFILES:
        raise ValueError(f"a profile named {profile.name!r} exists")
    PROFILES[profile.name] = profile
    import sys

    if "hypothesis" in sys.modules:
        register_with_hypothesis()


def unregister(name: str) -> Profile:
    """Remove the profile ``name`` and return it (for tests that register one temporarily).

    Raises:
        KeyError: no such profile.
    """
    return PROFILES.pop(name)


def get_profile(name: str) -> Profile:
    """The profile called ``name``.

    Raises:
        ValueError: unknown name; the message lists the known ones.
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"unknown profile {name!r}; expected one of {', '.join(PROFILES)}"
        ) from None


def register_with_hypothesis() -> None:
    """Register every profile with hypothesis as ``hcspec-<name>`` (idempotent)."""
    from hypothesis import settings

    for profile in PROFILES.values():
        settings.register_profile(f"hcspec-{profile.name}", profile.hypothesis_settings())
