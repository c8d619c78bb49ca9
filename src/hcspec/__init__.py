"""hcspec: a verified specification of Hyper-Connections (HC) and manifold-constrained
Hyper-Connections (mHC), a reference implementation and a conformance kit.

The layers are subpackages, each importing only the ones before it: :mod:`hcspec.spec` (exact
formulas and theorems, and the records of a step's degrees of freedom), :mod:`hcspec.formulas`
(the torch statements of the spec's formulas, shared by the two below), :mod:`hcspec.reference`
(the reference modules) and :mod:`hcspec.conformance` (the property kit, ``hc-conformance``).
This package itself defines nothing; its four layers are real folders here, and the
repository's top-level ``spec``, ``reference`` and ``conformance`` are symbolic links to three
of them (see docs/architecture.md).
"""
