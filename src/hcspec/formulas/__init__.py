"""Torch statements of the spec's formulas, beneath the reference and the kit."""
