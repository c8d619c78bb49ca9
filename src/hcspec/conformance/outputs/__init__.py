"""The outputs of a run: the results and their records, and every form a person or a tool
reads them in.

* :mod:`~hcspec.conformance.outputs.report` — the data model (:class:`Report`, one
  :class:`PropertyResult` per property) and its JSON form;
* :mod:`~hcspec.conformance.outputs.failure` — one failure, explained once;
* :mod:`~hcspec.conformance.outputs.journal` — the run's journal (nothing lost if the
  process dies), :mod:`~hcspec.conformance.outputs.capture` — what a replayed case compared;
* renderers: :mod:`~hcspec.conformance.outputs.terminal` (rich),
  :mod:`~hcspec.conformance.outputs.markdown`, :mod:`~hcspec.conformance.outputs.html_report`,
  :mod:`~hcspec.conformance.outputs.junit`.

The public names a user needs (:class:`~hcspec.conformance.outputs.report.Report`) are
re-exported by :mod:`hcspec.conformance`.
"""
