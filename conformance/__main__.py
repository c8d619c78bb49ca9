"""``python -m conformance`` is ``hc-conformance``."""

import sys

from conformance.cli import main

sys.exit(main())
