"""Registered theorems, one module per topic; importing this package registers them all."""

from spec.theorems import backprop, connection, norm  # noqa: F401
