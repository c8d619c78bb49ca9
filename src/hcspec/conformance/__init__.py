"""hcspec conformance kit: property-based tests any HC/mHC implementation can run.

Main entry points (imported lazily, so ``import hcspec.conformance`` stays cheap — the pytest plugin
loads in every pytest run of a project that installs hcspec):

* :func:`check_implementation` — run the catalogue against a target, return a
  :class:`~hcspec.conformance.outputs.report.Report` (see :mod:`hcspec.conformance.run.session`);
  :func:`check_parallel` / :func:`assert_parallel_conforms`, the same on ``world_size`` ranks
  (by default the ``parallel`` family only);
* :class:`Conventions` and the protocol classes in :mod:`hcspec.conformance.protocol`;
* public hypothesis strategies in :mod:`hcspec.conformance.strategies`;
* the catalogue in :mod:`hcspec.conformance.families` (``hc-conformance list``).

The public line: besides this facade, the modules users import are :mod:`.protocol`,
:mod:`.strategies`, :mod:`.bridge`, :mod:`.subjects` (a target's declaration, ``targets.resolve``,
``entries.expected_failures``), :mod:`.adapters.deepseek_v4_style`, :mod:`.native.framework`,
:mod:`.parallel.protocol`, :mod:`.pytest_plugin` (its helper) and, for a family of the
catalogue, :mod:`.author`. The rest — :mod:`.run`, :mod:`.machinery`, :mod:`.outputs` (but its
``Report``), the front ends (``cli``, ``run_command``, ``compare``, ``replay``, ``scaffold``,
``listing``) and every name starting with ``_`` — is internal and may change between releases
(docs/architecture.md draws it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hcspec.conformance.outputs.report import Report
    from hcspec.conformance.protocol import Conventions, HyperConnectionImpl
    from hcspec.conformance.run.session import (
        assert_parallel_conforms,
        check_implementation,
        check_parallel,
    )

__all__ = ["Conventions", "HyperConnectionImpl", "Report", "assert_parallel_conforms",
           "check_implementation", "check_parallel"]

_LAZY = {
    "check_implementation": "hcspec.conformance.run.session",
    "check_parallel": "hcspec.conformance.run.session",
    "assert_parallel_conforms": "hcspec.conformance.run.session",
    "Conventions": "hcspec.conformance.protocol",
    "HyperConnectionImpl": "hcspec.conformance.protocol",
    "Report": "hcspec.conformance.outputs.report",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'hcspec.conformance' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)
