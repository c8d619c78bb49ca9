"""hcspec: a verified specification of Hyper-Connections (HC) and manifold-constrained
Hyper-Connections (mHC), a reference implementation and a conformance kit.

The three layers are subpackages: :mod:`hcspec.spec` (exact formulas and theorems),
:mod:`hcspec.reference` (the reference modules) and :mod:`hcspec.conformance` (the property
kit, ``hc-conformance``). This package itself defines nothing; in the source tree its
subpackages are symbolic links to the top-level ``spec/``, ``reference/`` and ``conformance/``
folders (see docs/architecture.md).
"""
