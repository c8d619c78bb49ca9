"""Known-bad sharded implementations for the ``parallel`` family (one per distributed bug
class). The leading underscore keeps them out of ``tools.mutation``'s single-process kill
table; tests/conformance/parallel/test_mutants.py runs each on 2 gloo ranks and checks that the
properties in its ``CAUGHT_BY`` fail."""
