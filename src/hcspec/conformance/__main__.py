"""``python -m hcspec.conformance`` is ``hc-conformance``."""

from hcspec.conformance.cli import console_main

console_main()
