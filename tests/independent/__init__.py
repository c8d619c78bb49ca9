"""An independent second implementation of static HC, dynamic HC and mHC.

Written from the papers (HC arXiv:2409.19606 §2 Eq. 1–14, Alg. 2; mHC arXiv:2512.24880 §4
Eq. 3, 7–9) and the row convention of docs/reference.md, without reading ``reference/``, so
that the conformance kit's false-positive rate can be measured on code that shares no
structure with the reference: paper-layout (n+1)×(n+1) matrices, streams on columns
internally, an explicit-loop log-domain Sinkhorn–Knopp. Targets for the kit::

    hc-conformance run tests.independent.hc_static:make
    hc-conformance run tests.independent.hc_dynamic:make
    hc-conformance run tests.independent.mhc:make
"""
