"""Adapters: factories that make an implementation follow :mod:`hcspec.conformance.protocol`.

Each module here serves one package and imports it only when its factory is called, so the kit
loads without the package. :mod:`hcspec.conformance.subjects.targets` maps built-in TARGET
names to them.
"""
