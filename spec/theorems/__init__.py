"""Registered theorems, one module per family; importing this package registers them all."""
