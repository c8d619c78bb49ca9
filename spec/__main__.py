"""``python -m spec``: the same command line as ``hc-spec`` (see :mod:`spec.cli`)."""

from spec.cli import main

raise SystemExit(main())
