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
