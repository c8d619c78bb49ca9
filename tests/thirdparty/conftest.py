"""Fixtures of the third-party adapter tests: no conformance target leaks in from the
environment."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_env_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HC_CONFORMANCE_TARGET", raising=False)
