"""Expected-failures files: which properties a target is known to fail, and why.

Format (UTF-8 text): one ``PROPERTY_ID: reason`` per line; blank lines and lines starting with
``#`` are ignored. Example::

    # hyper-connections 0.4.11, mHC target
    constraints.h_res_other_axis: 10 Sinkhorn rounds, declared 20 (reported upstream)

An id may be an ``fnmatch`` glob (``*``, ``?``, ``[...]``), e.g. ``constraints.*: reason``: it
stands for every property id it matches, each with that reason. A glob that matches no property
is an error, as an unknown id is; so is a property listed twice (by its id or by a glob).

A listed property that fails is reported ``xfail``; one that passes is ``xpass``, which fails the
run like a new failure does (so a fixed bug or a changed package is noticed).
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Collection, Mapping
from pathlib import Path


def _where(source: str, number: int, option: str | None) -> str:
    return f"{option} {source}:{number}" if option else f"{source}:{number}"


def is_glob(pid: str) -> bool:
    """Whether ``pid`` is an ``fnmatch`` pattern (holds ``*``, ``?`` or ``[``)."""
    return any(c in pid for c in "*?[")


def _unknown(pid: str, known: Collection[str]) -> str:
    if is_glob(pid):
        return (f"the glob {pid!r} matches no property id "
                "(hc-conformance list prints every id)")
    close = difflib.get_close_matches(pid, sorted(known), n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unknown property id {pid!r}{hint} (hc-conformance list prints every id)"


def parse(text: str, source: str = "<text>", *, option: str | None = None,
          known: Collection[str] | None = None) -> dict[str, str]:
    """Parse the file format above into ``{property id: reason}`` (globs expanded).

    ``option`` (e.g. ``--expected-failures``) prefixes every message, so the user knows which
    argument holds the bad file; with ``known`` (the catalogue's ids) an unknown id is an
    error that suggests the closest known one, and a glob stands for the known ids it
    matches.

    Raises:
        ValueError: a line without ``:`` or with an empty id or reason, a property listed
            twice (by id or glob), an id not in ``known``, a glob that matches none of
            ``known``, or a glob without ``known`` to expand it against; the message names
            the option, the source and the line number.
    """
    out: dict[str, str] = {}
    listed_at: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = _where(source, number, option)
        pid, sep, reason = line.partition(":")
        pid, reason = pid.strip(), reason.strip()
        if not sep or not pid or not reason:
            raise ValueError(f"{where}: expected 'PROPERTY_ID: reason', got {raw!r}")
        if known is None:
            if is_glob(pid):
                raise ValueError(f"{where}: the glob {pid!r} needs the catalogue's ids to be "
                                 "expanded")
            ids = [pid]
        else:
            ids = sorted(fnmatch.filter(known, pid)) if is_glob(pid) else (
                [pid] if pid in known else [])
            if not ids:
                raise ValueError(f"{where}: {_unknown(pid, known)}")
        for one in ids:
            if one in out:
                by = f" (by {pid})" if one != pid else ""
                raise ValueError(f"{where}: {one}{by} is listed twice (first on line "
                                 f"{listed_at[one]})")
            out[one], listed_at[one] = reason, number
    return out


def expand(entries: Mapping[str, str], known: Collection[str], *,
           where: str = "expected_failures") -> dict[str, str]:
    """``{id or glob: reason}`` (the pytest helper's ``expected_failures=``) as ``{property id:
    reason}``: each glob replaced by the ids it matches.

    Raises:
        ValueError: an unknown id, a glob that matches nothing, or a property given twice;
            the message starts with ``where``.
    """
    text = "\n".join(f"{pid}: {reason}" for pid, reason in entries.items())
    for pid, reason in entries.items():
        if not reason.strip() or "\n" in pid + reason or ":" in pid:
            raise ValueError(f"{where}: {pid!r}: expected a property id or glob and a "
                             "non-empty one-line reason")
    try:
        return parse(text, known=known)
    except ValueError as exc:
        message = str(exc).partition(": ")[2]  # without the '<text>:N' position
        raise ValueError(f"{where}: {message}") from None


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


if __name__ == "__main__":  # `python -m ...subjects.expected --write`: the .ci files
    from hcspec.conformance.subjects.entries import main

    raise SystemExit(main())
