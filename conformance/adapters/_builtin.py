"""The declaration of a built-in target, as each declarations module writes it in its ``TARGETS``.

A leaf module (it imports nothing from the kit, nor torch), so that the declarations
(:mod:`hcspec.conformance.adapters.declarations`) can be read without importing the registry
(:mod:`hcspec.conformance.targets`), which discovers them, or torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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

    @property
    def options_text(self) -> str:
        """The options as ``key=value, ...`` (empty for none)."""
        return ", ".join(f"{k}={v!r}" for k, v in self.options.items())
