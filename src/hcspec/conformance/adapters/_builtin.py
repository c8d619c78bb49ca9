"""The declaration of a built-in target, as each declarations module writes it in its ``TARGETS``.

A leaf module (it imports nothing from the kit, nor torch), so that the declarations
(:mod:`hcspec.conformance.adapters.declarations`) can be read without importing the registry
(:mod:`hcspec.conformance.subjects.targets`), which discovers them, or torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Classification = Literal["bug", "convention", "limitation"]
"""Whose a finding is: ``bug`` (the package's: it computes something else than it claims),
``convention`` (a deliberate, declared difference from the paper), ``limitation`` (ours: the
kit's, the adapter's or the environment's, e.g. Triton's CPU interpreter)."""

CLASSIFICATIONS: Final[tuple[Classification, ...]] = ("bug", "convention", "limitation")

DTYPES: Final = ("float16", "bfloat16", "float32", "float64")
"""The dtype names a finding may scope (:attr:`Finding.dtypes`)."""


def _one_line(what: str, text: str) -> None:
    if not text.strip() or "\n" in text:
        raise ValueError(f"{what}: expected one non-empty line, got {text!r}")


@dataclass(frozen=True)
class Finding:
    """One root cause a target is known to show, with every property it makes fail.

    The expected failures of a target (``.ci/expected-failures/PREFIX/NAME.txt``) are generated
    from its findings (:mod:`hcspec.conformance.subjects.entries`): each property a finding scopes
    is one line, so a root cause that fails 19 properties is one entry here. A finding that
    several targets show (the same module under two options) is one object that their
    declarations share. PyTorch's OpInfo ``DecorateInfo`` scopes an expected failure the same
    way (by test, dtype and device).

    Attributes:
        key: a short name, unique among the findings of one declarations module
            (``dropout-on-residual``).
        classification: see :data:`Classification`.
        reason: one line: what goes wrong and why (the qualifier, e.g. "training mode only",
            belongs here).
        properties: the property ids or ``fnmatch`` globs it makes fail (non-empty). A glob
            must match a property, and no property may be scoped by two findings of one target
            (checked against the catalogue by the tests).
        reproducer: the repository path of a script or page that shows it without the kit
            (``docs/findings/repro/*.py``), or None when the findings page is the evidence.
        page: the findings page that classifies it (``docs/findings/PACKAGE.md``).
        dtypes: the dtypes whose cases show it (names of :data:`DTYPES`); empty: any. A
            property runs all its dtypes in one run, so this documents the scope (it is shown
            in the generated line) and does not filter.
        profiles: the run profiles under which it shows; empty: every profile. A target whose
            lane runs another profile leaves the finding out of its expected failures.
        notes: property id -> how the finding shows in that property (appended to the reason
            on that property's line).

    Raises:
        ValueError: an unknown classification or dtype, an empty or multi-line reason, no
            properties, a property holding ``:`` or whitespace, a note for a property not
            scoped by an exact id.
    """

    key: str
    classification: Classification
    reason: str
    properties: tuple[str, ...]
    page: str
    reproducer: str | None = None
    dtypes: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"finding {self.key!r}"
        _one_line(where, self.key)
        _one_line(where, self.reason)
        if self.classification not in CLASSIFICATIONS:
            raise ValueError(f"{where}: classification must be one of {CLASSIFICATIONS}, got "
                             f"{self.classification!r}")
        if not self.properties:
            raise ValueError(f"{where}: scopes no property")
        for pid in self.properties:
            if not pid or ":" in pid or any(c.isspace() for c in pid):
                raise ValueError(f"{where}: bad property id or glob {pid!r}")
        unknown = sorted(set(self.dtypes) - set(DTYPES))
        if unknown:
            raise ValueError(f"{where}: unknown dtypes {unknown} (known: {DTYPES})")
        stray = sorted(set(self.notes) - set(self.properties))
        if stray:
            raise ValueError(f"{where}: notes for properties it does not scope by id: {stray}")
        for note in self.notes.values():
            _one_line(where, note)


@dataclass(frozen=True)
class Lane:
    """How CI installs a target's package and runs the target (one entry per target).

    Attributes:
        script: the CI script that builds the environment and runs the target
            (``.ci/thirdparty`` or ``.ci/lanes/NAME``).
        install: the install line of the package as that script writes it (every
            ``name==version`` pin in it must appear in the script; a test checks).
        profile: the profile the lane runs the target with, for which the expected failures
            are generated (``ci``, or ``kernel`` under Triton's CPU interpreter); None: the
            lane lists the target but cannot run it here (the note says why).
        note: more for the generated file's header (what the lane runs, what it does not).
    """

    script: str
    install: str
    profile: str | None = "ci"
    note: str = ""


@dataclass(frozen=True)
class BuiltinTarget:
    """A built-in TARGET name.

    Attributes:
        name: ``prefix:name``; for a third-party package the prefix is the import name of the
            package (``transformers:deepseek-v4``).
        factory_path: ``module:attribute`` of the factory (imported lazily, when the target
            is resolved).
        description: one line for ``hc-conformance targets`` and the report header.
        requires: the import name of the package the adapter needs, or the module of it that
            the target needs (``transformers.models.hy_v4.modeling_hy_v4``: a release without
            it lists the target as not importable); None: hcspec's own.
        distribution: the distribution whose version the report shows, and which must be the
            one that provides ``requires`` (import names can clash: ``mhc``).
        options: keyword options bound into the factory (the package's own options, e.g.
            ``{"log_domain_sinkhorn": True}``); shown in the description and the report.
        written_for: the package version the adapter was written and checked against.
        available: for an adapter that never imports its package (it loads files by path),
            ``module:function`` of a check that returns why the target cannot be used here
            (a one-line reason) or None when it can; it takes the place of the import of
            ``requires``. None: only ``requires`` decides.
        detail: ``module:function`` returning one more sentence for the description, for a
            fact that needs torch or the package to find out (where Triton kernels will run
            here); called only when the target is resolved or listed as usable, so that the
            declarations stay readable without importing torch. None: no such sentence.
        sharding: ``module:attribute`` of the target's factory with the sharding capability
            (:mod:`hcspec.conformance.parallel.protocol`), which the ``parallel`` family runs
            (same arguments, same impls, plus ``shard_splits`` and ``shard``). None: the
            factory's own impls declare it, or the target does not shard.
        lane: how CI installs the package and runs the target; None: no CI lane (hcspec's
            own targets, a target CI cannot build). A target with a lane has a generated
            expected-failures file.
        findings: what the target is known to fail, one :class:`Finding` per root cause.

    The conventions of a target are declared by the impl its factory builds
    (:class:`hcspec.conformance.protocol.Conventions`), since they can depend on the options.
    """

    name: str
    factory_path: str
    description: str
    requires: str | None = None
    distribution: str = "hcspec"
    options: Mapping[str, Any] = field(default_factory=dict)
    written_for: str | None = None
    available: str | None = None
    detail: str | None = None
    sharding: str | None = None
    lane: Lane | None = None
    findings: tuple[Finding, ...] = ()

    @property
    def options_text(self) -> str:
        """The options as ``key=value, ...`` (empty for none)."""
        return ", ".join(f"{k}={v!r}" for k, v in self.options.items())
