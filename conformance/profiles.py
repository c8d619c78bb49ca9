"""Run profiles: how much the kit explores (hypothesis settings and the size of generated cases).

* ``quick`` — a smoke run: the explicit examples plus a few random ones.
* ``ci`` — enough examples for a CI gate.
* ``thorough`` — many more examples, larger shapes and extreme magnitudes.
* ``kernel`` — sized for Triton kernels run through Triton's CPU interpreter (about a second
  per forward): the explicit examples plus one generated case per property, reaching the
  shapes where kernels break (n up to 8, d past a 64-wide block).

Every profile is deterministic: the runner seeds each property's exploration from the
property id and ``--seed`` (:func:`hcspec.conformance.runner.exploration_seed`), so a CI gate
sees the same cases every run. :data:`PROFILE_NAMES` and :data:`DEFAULT_PROFILE` are the one
source of the names (the CLI and the pytest plugin offer exactly these).

Each profile is also registered with hypothesis as ``hcspec-<name>`` so users' own tests can
``hypothesis.settings.load_profile("hcspec-ci")``: importing :mod:`hcspec.conformance.strategies`
registers them (:func:`register_with_hypothesis`). This module itself does not import hypothesis,
so the pytest plugin can read the profile names without slowing every pytest start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from hypothesis import settings


@dataclass(frozen=True)
class Profile:
    """How much a run explores.

    Attributes:
        name: ``quick``, ``ci``, ``thorough`` or ``kernel``.
        max_examples: hypothesis examples per property, after the explicit ones.
        derandomize: the registered hypothesis profile (``hcspec-<name>``, for users' own
            tests) draws the same examples every run; the kit's runner seeds explicitly.
        max_batch, max_tokens, max_n, max_d: bounds of generated shapes ``[B, T, n, d]``.
        extreme: also draw extreme magnitudes (states scaled to 1e±6, parameters scaled ×1e4).
    """

    name: str
    max_examples: int
    derandomize: bool
    max_batch: int
    max_tokens: int
    max_n: int
    max_d: int
    extreme: bool

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


PROFILES: Final[dict[str, Profile]] = {
    "quick": Profile("quick", max_examples=2, derandomize=True, max_batch=2, max_tokens=3,
                     max_n=4, max_d=8, extreme=False),
    "ci": Profile("ci", max_examples=20, derandomize=True, max_batch=3, max_tokens=4,
                  max_n=4, max_d=12, extreme=False),
    "thorough": Profile("thorough", max_examples=100, derandomize=False, max_batch=4,
                        max_tokens=8, max_n=8, max_d=24, extreme=True),
    "kernel": Profile("kernel", max_examples=1, derandomize=True, max_batch=2, max_tokens=3,
                      max_n=8, max_d=72, extreme=False),
}
DEFAULT_PROFILE: Final = "ci"
PROFILE_NAMES: Final[tuple[str, ...]] = tuple(PROFILES)
"""The profile names, cheapest first: the choices of ``--profile`` and ``--hc-profile``."""


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
