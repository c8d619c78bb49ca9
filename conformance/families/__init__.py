"""The property families: one module per family, ``hcspec.conformance.families.<family>``,
whose checks declare the properties ``<family>.*``.

A family module imports only the kit's machinery (:mod:`hcspec.conformance.properties` and its
modules, :mod:`hcspec.conformance.strategies`, :mod:`hcspec.conformance.rules`, ...) and the
spec (:mod:`hcspec.spec`), never another family and never :mod:`hcspec.reference`
(tests/conformance/test_layout.py checks the import graph). The run order is
:data:`hcspec.conformance.properties.FAMILIES`.

Importing this package first imports the registry (:mod:`hcspec.conformance.properties`),
which imports every family in run order; so ``from hcspec.conformance.families import exact``
sees the whole catalogue registered, prerequisites first.
"""

from __future__ import annotations

import hcspec.conformance.properties  # noqa: F401  (registers the catalogue in run order)
