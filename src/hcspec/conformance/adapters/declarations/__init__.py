"""The declarations of the built-in targets, one module per adapter module of
:mod:`hcspec.conformance.adapters` (same name), each with a ``TARGETS`` tuple of
:class:`~hcspec.conformance.adapters._builtin.BuiltinTarget`.

These modules import neither torch nor the packages they adapt (only the leaf
:mod:`~hcspec.conformance.adapters._builtin`), so :mod:`hcspec.conformance.subjects.targets` reads
every declaration without loading an adapter: ``hc-conformance targets`` and ``--help`` stay fast.
The adapter module a target names in ``factory_path`` is imported when the target is resolved.
"""
