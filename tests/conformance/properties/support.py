"""Running one property on one case against a target, without the runner: what the family
tests use to show a property passes on the reference and fails on a mutant."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import torch

from hcspec.conformance.families import BY_ID
from hcspec.conformance.machinery.base import Context
from hcspec.conformance.machinery.requirements import Subject
from hcspec.conformance.profiles import get_profile
from hcspec.conformance.run.inspection import inspect_target
from hcspec.conformance.strategies import Case
from hcspec.conformance.subjects.targets import resolve


def factory(target: str) -> Callable[..., Any]:
    """The factory of a TARGET string, or of a mutant module's name (``mutant:NAME``)."""
    if target.startswith("mutant:"):
        module = importlib.import_module(f"tests.mutants.{target.removeprefix('mutant:')}")
        return module.make  # type: ignore[no-any-return]
    return resolve(target).factory


def context(target: str, profile: str = "quick") -> Context:
    """A property context for ``target`` as the runner builds it (sample impl inspected)."""
    make = factory(target)
    info = inspect_target(make, "cpu", 0)
    return Context(factory=make, target_name=target, kind=info.kind,
                   conventions=info.conventions, capabilities=info.capabilities,
                   dtype=info.dtype, device="cpu", profile=get_profile(profile))


def run(prop_id: str, target: str, case: Case | None = None, *, example: int = 0,
        **changes: Any) -> Context:
    """Run ``prop_id`` on ``case`` (default: its explicit example number ``example``, the
    canonical case at init for most properties, with ``changes``) against ``target``; returns
    the context (its records). Raises what the check raises."""
    ctx = context(target)
    prop = BY_ID[prop_id]
    assert prop.unmet(ctx.subject) is None, prop.unmet(ctx.subject)
    chosen = case if case is not None else list(prop.examples(ctx))[example]
    prop.run(ctx, dataclasses.replace(chosen, **changes))
    return ctx


def unmet(prop_id: str, **facts: Any) -> str | None:
    """The not-applicable message of ``prop_id`` on a subject that differs from an mHC
    float64 CPU target with every capability by ``facts``."""
    from hcspec.conformance.protocol import CAPABILITIES, Conventions

    base = Subject("mhc", frozenset(CAPABILITIES), torch.float64, Conventions(), "cpu",
                   get_profile("ci"))
    return BY_ID[prop_id].unmet(dataclasses.replace(base, **facts))
