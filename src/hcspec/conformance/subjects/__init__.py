"""The subjects of a run: the targets the kit checks.

- :mod:`.targets`: the registry of targets (``BUILTIN``, the reference's and the adapters')
  and the resolution of a TARGET string to a factory (:func:`.targets.resolve`);
- :mod:`.discovery`: the built-in declarations (``adapters/declarations/*.py``, read without
  importing torch) and the plugin targets, registered in ``BUILTIN``;
- :mod:`.plugins`: the ``hcspec.targets`` entry-point group, through which another package
  ships its own target declarations;
- :mod:`.entries`: one entry per target (declaration, lane, findings), and the files generated
  from it (``.ci/expected-failures/*``, ``docs/findings/index.md``);
- :mod:`.expected`: reading an expected-failures file (``--expected-failures``) and
  ``python -m hcspec.conformance.subjects.expected --write | --check``.

The adapters themselves (the code that presents a package's module as a kit impl) are
:mod:`hcspec.conformance.adapters`. What a target declares, :class:`BuiltinTarget` with its
:class:`Lane` and :class:`Finding` (one per root cause), is re-exported here from its
torch-free leaf module (:mod:`hcspec.conformance.adapters._builtin`): a package that ships its
own targets through the ``hcspec.targets`` entry points imports them from here.
"""

from hcspec.conformance.adapters._builtin import BuiltinTarget, Finding, Lane

__all__ = ["BuiltinTarget", "Finding", "Lane"]
