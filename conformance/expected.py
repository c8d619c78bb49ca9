"""Expected-failures files: which properties a target is known to fail, and why.

Format (UTF-8 text): one ``PROPERTY_ID: reason`` per line; blank lines and lines starting with
``#`` are ignored. Example::

    # hyper-connections 0.4.11, mHC target
    constraints.h_res_other_axis: 10 Sinkhorn rounds, declared 20 (upstream issue #123)

A listed property that fails is reported ``xfail``; one that passes is ``xpass``, which fails the
run like a new failure does (so a fixed bug or a changed package is noticed).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from pathlib import Path


def _where(source: str, number: int, option: str | None) -> str:
    return f"{option} {source}:{number}" if option else f"{source}:{number}"


def parse(text: str, source: str = "<text>", *, option: str | None = None,
          known: Collection[str] | None = None) -> dict[str, str]:
    """Parse the file format above into ``{property id: reason}``.

    ``option`` (e.g. ``--expected-failures``) prefixes every message, so the user knows which
    argument holds the bad file; with ``known`` (the catalogue's ids) an unknown id is an
    error that suggests the closest known one.

    Raises:
        ValueError: a line without ``:`` or with an empty id or reason, a repeated id, or
            an id not in ``known``; the message names the option, the source and the line
            number.
    """
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = _where(source, number, option)
        pid, sep, reason = line.partition(":")
        pid, reason = pid.strip(), reason.strip()
        if not sep or not pid or not reason:
            raise ValueError(f"{where}: expected 'PROPERTY_ID: reason', got {raw!r}")
        if pid in out:
            raise ValueError(f"{where}: {pid} is listed twice")
        if known is not None and pid not in known:
            close = difflib.get_close_matches(pid, sorted(known), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(f"{where}: unknown property id {pid!r}{hint} "
                             "(hc-conformance list prints every id)")
        out[pid] = reason
    return out


def load(path: str | Path, *, option: str | None = None,
         known: Collection[str] | None = None) -> dict[str, str]:
    """Read and :func:`parse` an expected-failures file.

    Raises:
        OSError: unreadable file (the message names ``option``). ValueError: not UTF-8 text
            (the message names ``option`` and the file), or as :func:`parse`.
    """
    where = f"{option} {path}" if option else str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise OSError(f"{where}: cannot read the expected-failures file: "
                      f"{exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: the expected-failures file is not UTF-8 text "
                         f"(byte {exc.object[exc.start]:#04x} at offset {exc.start})") from exc
    return parse(text, str(path), option=option, known=known)
