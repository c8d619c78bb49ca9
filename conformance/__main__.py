"""``python -m hcspec.conformance`` is ``hc-conformance``."""

import sys

from hcspec.conformance.cli import main

sys.exit(main())
