"""One target's run inside a pytest session (:mod:`hcspec.conformance.pytest_plugin`): its
settings, its setup built at the first property (:func:`hcspec.conformance.run.inspection.prepare`)
and each property evaluated as one test item
(:func:`hcspec.conformance.run.execution.evaluate_property`). Imports nothing of the kit until a
conformance item runs, as the plugin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from hcspec.conformance.outputs.report import PropertyResult
    from hcspec.conformance.run.hypothesis_home import SessionHome
    from hcspec.conformance.run.inspection import RunSetup


@dataclass(frozen=True)
class Settings:
    """The effective settings of one target's run (after the precedence rule)."""

    target: str
    profile: str
    device: str
    seed: int
    timeout: float | None
    expected_failures: tuple[tuple[str, str], ...]


class TargetRun:
    """One target's run within a pytest session: the settings, the setup (built at the first
    property) and the statuses so far (for prerequisite blocking)."""

    def __init__(self, settings: Settings, home: SessionHome) -> None:
        self.settings = settings
        self.expected = dict(settings.expected_failures)
        self.statuses: dict[str, str] = {}
        self._setup: RunSetup | None = None
        self._home = home
        self.running: str | None = None

    def setup(self) -> RunSetup:
        """The resolved and inspected target (built once, at the first property). A target
        whose sample impl declares an unknown ``kind`` or conventions field ends the session
        as a usage error (exit code 4), as at collection."""
        from hcspec.conformance.run.inspection import prepare
        from hcspec.conformance.subjects.targets import TargetError, importable_folders

        if self._setup is None:
            s = self.settings
            try:
                with self._home.active(), importable_folders():
                    self._setup = prepare(s.target, profile=s.profile, device=s.device,
                                          seed=s.seed, timeout=s.timeout)
            except TargetError as exc:  # a typo in a declaration (kind, conventions)
                pytest.exit(f"hcspec conformance kit, target {s.target!r}: {exc}",
                            returncode=pytest.ExitCode.USAGE_ERROR)
        return self._setup

    def run(self, prop_id: str) -> PropertyResult:
        """Run one property (hypothesis' files go to the session's private home, not to
        ``.hypothesis/`` in the current directory)."""
        from hcspec.conformance import families as catalogue
        from hcspec.conformance.run.execution import evaluate_property
        from hcspec.conformance.subjects.targets import importable_folders

        prop = catalogue.BY_ID[prop_id]
        self.running = prop_id  # left set when a signal stops the property
        setup = self.setup()
        # the current folder importable while the target runs (a factory importing its
        # project's modules lazily), as under the CLI
        with self._home.active(), importable_folders():
            result = evaluate_property(setup, prop, self.statuses, self.expected.get(prop_id))
        self.statuses[prop_id] = result.status
        self.running = None
        return result


def validate(settings: Settings) -> None:
    """Resolve the target and check profile, device and expected-failure ids, without
    running anything of the target.

    Raises:
        pytest.UsageError: any of them is wrong (one message, pytest exit code 4).
    """
    from hcspec.conformance.families import BY_ID
    from hcspec.conformance.profiles import get_profile
    from hcspec.conformance.run.inspection import resolve_device
    from hcspec.conformance.subjects.targets import resolve

    try:
        get_profile(settings.profile)
        resolve_device(settings.device)
        unknown = sorted({pid for pid, _ in settings.expected_failures} - set(BY_ID))
        if unknown:
            raise ValueError(f"expected failures name unknown property ids: "
                             f"{', '.join(unknown)}")
        resolve(settings.target)
    except (ValueError, OSError) as exc:  # TargetError is a ValueError
        raise pytest.UsageError(
            f"hcspec conformance kit, target {settings.target!r}: {exc}") from exc
