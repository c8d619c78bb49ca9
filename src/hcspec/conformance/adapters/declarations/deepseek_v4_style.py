"""Declarations of :mod:`hcspec.conformance.adapters.deepseek_v4_style`: none (it is a helper
that other adapters build their targets with)."""

from __future__ import annotations

from typing import Final

from hcspec.conformance.adapters._builtin import BuiltinTarget

TARGETS: Final[tuple[BuiltinTarget, ...]] = ()
"""That module is a helper: it declares no built-in target of its own."""
