"""Registered theorems, one module per topic; importing this package registers them all."""

from spec.theorems import backprop, connection, doubly_stochastic, duality, norm  # noqa: F401
