"""Shared fixtures for the spec tests: every registered theorem is proven once per session."""

from __future__ import annotations

import pytest

from hcspec.spec.registry import ProofResult, Theorem, all_theorems


@pytest.fixture(scope="session")
def theorems() -> list[Theorem]:
    return all_theorems()


@pytest.fixture(scope="session")
def proof_results(theorems: list[Theorem]) -> dict[str, ProofResult]:
    """Prove the whole registry once (about half a minute on 2 cores) and share the results."""
    return {theorem.id: theorem.prove() for theorem in theorems}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the whole registry proven (``proof_results``, directly or through a
    fixture) is slow: it runs in the full suite, not in the ``-m "not slow"`` loop."""
    for item in items:
        if "proof_results" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
