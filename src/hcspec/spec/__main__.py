"""``python -m hcspec.spec``: the same command line as ``hc-spec`` (see :mod:`hcspec.spec.cli`)."""

from hcspec.spec.cli import main

raise SystemExit(main())
