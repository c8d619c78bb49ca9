"""Known-bad implementations: small variants of the reference, each a ``make(...)`` factory of
the conformance protocol with ``CAUGHT_BY``, the property ids that must catch its bug."""
