"""The torch statements of the spec's formulas: the one place the reference and the
conformance kit both take them from.

* :mod:`hcspec.formulas.sinkhorn`: the Sinkhorn–Knopp variants (spec
  ``mhc.sinkhorn_variants``) and the fixed-point gradient of their limit (spec
  ``sinkhorn.implicit_gradient``);
* :mod:`hcspec.formulas.mhc`: an mHC step's weights from its logits under a
  :class:`~hcspec.spec.record.Formula` (mHC Eq. 8–9: the gates and ``H_res``);
* :mod:`hcspec.formulas.published`: the published parameterizations' steps (spec
  ``published.*``);
* :mod:`hcspec.formulas.sharding`: how a state is cut across the ranks of a process group;
* :mod:`hcspec.formulas.gated`: Qwen4-exp's gated read and write (spec ``gated.*``,
  ``published.qwen4_exp_step``), with its own record, :class:`~hcspec.spec.record.GatedFormula`.

The records these formulas compute with (:class:`~hcspec.spec.record.SinkhornSpec`,
:class:`~hcspec.spec.record.Formula`) are the spec's, :mod:`hcspec.spec.record`.

The layer rule (``tests/test_layers.py``): this package imports torch and :mod:`hcspec.spec`
at most, never :mod:`hcspec.reference` or :mod:`hcspec.conformance`; both of those import it,
so the kit's expected values and the reference's steps are written once and the kit never
takes an expected value from the reference. Importing the package itself imports nothing.
"""
