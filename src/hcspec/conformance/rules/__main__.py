"""``python -m hcspec.conformance.rules [--write|--check]``: print the rules table, write it into
docs/conformance.md, or exit 1 when the table there is not current
(:func:`hcspec.conformance.rules.main`)."""

from hcspec.conformance.rules import main

raise SystemExit(main())
