"""Expected-failures files: which properties a target is known to fail, and why.

Format (UTF-8 text): one ``PROPERTY_ID: reason`` per line; blank lines and lines starting with
``#`` are ignored. Example::

    # hyper-connections 0.4.11, mHC target
    constraints.h_res_other_axis: 10 Sinkhorn rounds, declared 20 (upstream issue #123)

A listed property that fails is reported ``xfail``; one that passes is ``xpass``, which fails the
run like a new failure does (so a fixed bug or a changed package is noticed).
"""

from __future__ import annotations

from pathlib import Path


def parse(text: str, source: str = "<text>") -> dict[str, str]:
    """Parse the file format above into ``{property id: reason}``.

    Raises:
        ValueError: a line without ``:`` or with an empty id or reason, or a repeated id; the
            message names the source and line number.
    """
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pid, sep, reason = line.partition(":")
        pid, reason = pid.strip(), reason.strip()
        if not sep or not pid or not reason:
            raise ValueError(f"{source}:{number}: expected 'PROPERTY_ID: reason', got {raw!r}")
        if pid in out:
            raise ValueError(f"{source}:{number}: {pid} is listed twice")
        out[pid] = reason
    return out


def load(path: str | Path) -> dict[str, str]:
    """Read and :func:`parse` an expected-failures file.

    Raises:
        OSError: unreadable file. ValueError: as :func:`parse`.
    """
    return parse(Path(path).read_text(encoding="utf-8"), str(path))
