"""One run of the catalogue against a target, and what keeps it safe.

* :mod:`~hcspec.conformance.run.session` — the session loop
  (:func:`~hcspec.conformance.run.session.check_implementation`, re-exported by
  :mod:`hcspec.conformance`), with its :class:`~hcspec.conformance.run.session.Listener`;
* :mod:`~hcspec.conformance.run.inspection` — the target inspected before any property runs;
* :mod:`~hcspec.conformance.run.execution` — one property run, its failure shrunk
  (:mod:`~hcspec.conformance.run.shrink`) and explained
  (:mod:`~hcspec.conformance.run.diagnostics`);
* the guards around code the kit does not own: :mod:`~hcspec.conformance.run.isolation`
  (torch's global state), :mod:`~hcspec.conformance.run.threads`,
  :mod:`~hcspec.conformance.run.timeouts`, :mod:`~hcspec.conformance.run.stacks` (where
  stuck code is), :mod:`~hcspec.conformance.run.hypothesis_home`.
"""
