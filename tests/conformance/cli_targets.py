"""Factories addressed by TARGET strings in the CLI tests."""

from __future__ import annotations

from typing import Any

from hcspec.conformance.adapters.reference import make_hc_static

_calls = {"n": 0}


def make_interrupting(n: int, d: int, **kwargs: Any) -> Any:
    """The reference static HC, until the 30th build, which raises KeyboardInterrupt (as if
    the user pressed Ctrl-C in the middle of a run)."""
    _calls["n"] += 1
    if _calls["n"] >= 30:
        raise KeyboardInterrupt
    return make_hc_static(n, d, **kwargs)
