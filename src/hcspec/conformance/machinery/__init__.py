"""The machinery the property families share: declaring a property (``declaration``), its
cases (``cases``), what it requires of a target (``requirements``), building and observing an
impl (``building``, ``observing``, ``inputs``), recording the comparisons it makes
(``recording``, ``precision``) and the errors that end it (``errors``, ``base``). The registry
of families is :mod:`hcspec.conformance.families`; a family imports this machinery through
:mod:`hcspec.conformance.author`.
"""
