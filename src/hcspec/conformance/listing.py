"""The rows ``hc-conformance list`` prints, without importing torch when that is safe.

The property catalogue (:mod:`hcspec.conformance.families`) declares each property next to its
check, and the checks import torch (1–3 s on a quiet machine, more under load). So the rows
(id, statement, theorems, requirements, tolerance rule) are also kept in a *user cache*, never
in the package or the repository: one JSON file per source tree under
``$XDG_CACHE_HOME/hcspec/`` (default ``~/.cache/hcspec/``; ``%LOCALAPPDATA%\\hcspec`` on
Windows), named after the path of the sources it describes (:func:`cache_path`). It holds the
rows, the SHA-256 of every hcspec source file the catalogue imported when it was written and
the torch version. :func:`rows` uses it only when all of those files are byte-identical now and
the torch version is the same; otherwise it imports the catalogue, reads the rows from it and
rewrites the cache (atomically: a temporary file in the same folder, then a rename), so an edit
costs one slow listing and nothing else: there is no snapshot to regenerate and nothing to go
stale. A cache folder that cannot be written only makes every listing the slow one.

``python -m hcspec.conformance.listing --write`` rewrites the property table of
docs/conformance.md, the block between :data:`TABLE_START` and :data:`TABLE_END`, from the
catalogue (:func:`markdown_table`); the docs test fails while it is not current.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

_PACKAGE_ROOT: Final = "hcspec"


@dataclass(frozen=True)
class Row:
    """One property as ``hc-conformance list`` shows it.

    Attributes:
        id: the property id (``family.name``).
        statement: what must hold.
        theorems: the spec theorem ids it checks.
        requires: the conditions of its requirements (what the target must offer).
        tolerance: the name of its tolerance rule.
    """

    id: str
    statement: str
    theorems: tuple[str, ...]
    requires: tuple[str, ...]
    tolerance: str


def live_rows() -> list[Row]:
    """The rows read from the imported catalogue (imports torch)."""
    from hcspec.conformance.families import CATALOGUE

    return [Row(p.id, p.statement, tuple(p.theorems), tuple(r.condition for r in p.requires),
                p.tolerance.name) for p in CATALOGUE]


def _torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _source_root() -> Path:
    """The folder that holds hcspec's layers (``conformance/`` is this module's folder)."""
    return Path(__file__).resolve().parent.parent


def _sources() -> dict[str, str]:
    """``{path relative to the layers' root: sha256}`` of every hcspec module imported so far
    (called after importing the catalogue: the files it depends on)."""
    root = _source_root()
    out: dict[str, str] = {}
    for name, module in sorted(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not name.startswith(f"{_PACKAGE_ROOT}.") or not file:
            continue
        path = Path(file).resolve()
        if path.suffix == ".py" and path.is_relative_to(root):
            out[path.relative_to(root).as_posix()] = _digest(path)
    return out


def cache_dir() -> Path:
    """The folder of hcspec's user cache: ``$XDG_CACHE_HOME/hcspec`` when that variable is set
    (an absolute path), else ``%LOCALAPPDATA%\\hcspec`` on Windows, else
    ``~/.cache/hcspec``. Not created here."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / _PACKAGE_ROOT
    local = os.environ.get("LOCALAPPDATA", "")
    if sys.platform == "win32" and local:
        return Path(local) / _PACKAGE_ROOT
    return Path.home() / ".cache" / _PACKAGE_ROOT


def cache_path() -> Path:
    """The cached listing of the sources here: ``catalogue-<key>.json`` in :func:`cache_dir`,
    where ``key`` is the first 16 hex digits of the SHA-256 of the sources' folder (so
    checkouts, worktrees and installs each keep their own file and never evict each other;
    what the file describes is checked by the digests it holds, :func:`stale_reason`)."""
    key = hashlib.sha256(str(_source_root()).encode("utf-8")).hexdigest()[:16]
    return cache_dir() / f"catalogue-{key}.json"


def snapshot(table_rows: list[Row] | None = None) -> dict[str, Any]:
    """The listing of the current sources as the cache stores it: the rows (``table_rows``,
    default :func:`live_rows`), the digests of the hcspec sources imported so far (called
    after importing the catalogue: the files it depends on) and the torch version."""
    listed = live_rows() if table_rows is None else table_rows
    return {"torch": _torch_version(), "sources": _sources(),
            "rows": [asdict(row) for row in listed]}


def _read(path: Path) -> dict[str, Any] | str:
    """The JSON object at ``path``, or why there is none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"no readable cached listing at {path}: {exc}"
    return data if isinstance(data, dict) else f"{path} holds no listing"


def stale_reason(data: dict[str, Any] | None = None) -> str | None:
    """Why the cached listing (or ``data``) does not describe the sources here, or None when
    it does: missing or unreadable, another torch version, or a source file changed, added or
    missing. Reads files only; imports nothing."""
    if data is None:
        read = _read(cache_path())
        if isinstance(read, str):
            return read
        data = read
    if data.get("torch") != _torch_version():
        return f"written with torch {data.get('torch')}, torch here is {_torch_version()}"
    sources = data.get("sources")
    if not isinstance(sources, dict) or not sources or not isinstance(data.get("rows"), list):
        return "the cached listing names no sources or rows"
    root = _source_root()
    for relative, digest in sources.items():
        path = root / relative
        if not path.is_file():
            return f"{relative} is missing"
        if _digest(path) != digest:
            return f"{relative} changed since the listing was cached"
    return None


def write_cache(data: dict[str, Any], path: Path | None = None) -> Path | None:
    """Write ``data`` (:func:`snapshot`) to ``path`` (default :func:`cache_path`) atomically: a
    temporary file in the same folder, then :func:`os.replace`, so a concurrent reader sees the
    old file or the new one, never a part. Returns the path, or None when the folder cannot be
    created or written (the listing is then read from the sources each time)."""
    target = cache_path() if path is None else path
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError:
        return None
    return target


def _rows_of(data: dict[str, Any]) -> list[Row]:
    return [Row(r["id"], r["statement"], tuple(r["theorems"]), tuple(r["requires"]),
                r["tolerance"]) for r in data["rows"]]


def rows() -> tuple[list[Row], str | None]:
    """The catalogue's rows and, when they were not read from the cache, why not (None when
    they were: then torch was not imported). A stale or missing cache is rewritten from the
    imported catalogue (:func:`write_cache`)."""
    read = _read(cache_path())
    reason = read if isinstance(read, str) else stale_reason(read)
    if reason is None and not isinstance(read, str):
        return _rows_of(read), None
    live = live_rows()
    write_cache(snapshot(live))
    return live, reason


DOC: Final = Path(__file__).resolve().parents[3] / "docs" / "conformance.md"
"""The page whose property table is generated (in a source checkout:
``src/hcspec/conformance/listing.py`` is three folders below the repository root)."""

TABLE_START: Final = ("<!-- property-table:start (generated from the catalogue: "
                      "python -m hcspec.conformance.listing --write) -->")
TABLE_END: Final = "<!-- property-table:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(table_rows: list[Row]) -> str:
    """The docs' property table: one row per property, ``| id | statement | spec theorem |
    requires (checked before any case) | tolerance |``, in catalogue order (``—`` for no
    theorem or no requirement; requirements joined by ``; ``)."""
    lines = ["| id | statement | spec theorem | requires (checked before any case) | tolerance |",
             "| --- | --- | --- | --- | --- |"]
    for r in table_rows:
        theorems = ", ".join(f"`{t}`" for t in r.theorems) or "—"
        requires = "; ".join(r.requires) or "—"
        lines.append(f"| `{r.id}` | {_cell(r.statement)} | {theorems} | {_cell(requires)} | "
                     f"{r.tolerance} |")
    return "\n".join(lines) + "\n"


def with_table(doc: str, table_rows: list[Row]) -> str:
    """``doc`` with the text between :data:`TABLE_START` and :data:`TABLE_END` replaced by
    :func:`markdown_table` of ``table_rows``.

    Raises:
        ValueError: the markers are missing or out of order.
    """
    start, end = doc.find(TABLE_START), doc.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"the document has no {TABLE_START!r} … {TABLE_END!r} block")
    return doc[:start + len(TABLE_START)] + "\n" + markdown_table(table_rows) + doc[end:]


def write_doc(path: Path = DOC) -> Path:
    """Rewrite the property table of ``path`` from the imported catalogue; returns the path.

    Raises:
        OSError: the page cannot be read or written.
        ValueError: the page has no table markers.
    """
    doc = path.read_text(encoding="utf-8")
    current = with_table(doc, live_rows())
    if current != doc:
        path.write_text(current, encoding="utf-8")
    return path



def print_catalogue(console: Console, rows: Sequence[Row]) -> None:
    """``hc-conformance list``: id, statement, spec theorems, requirements (decided before any
    case runs), tolerance rule; one row per property (:func:`rows`), as a rich table."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(header_style="bold", show_lines=False)
    table.add_column("id", no_wrap=True)  # ids are copied into --only: never cut or wrapped
    for name in ("statement", "theorems", "requires", "tolerance"):
        table.add_column(name)
    for row in rows:
        table.add_row(row.id, escape(row.statement), ", ".join(row.theorems) or "—",
                      escape("; ".join(row.requires)) or "—", row.tolerance)
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    """``python -m hcspec.conformance.listing [--write]``: say whether the cached listing is
    current (exit 0) or why not (exit 1); ``--write`` rewrites the property table of
    docs/conformance.md (when the page is there: a source checkout) and refreshes the cache."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"]:
        if DOC.exists():
            print(f"wrote the property table of {write_doc()}")
        written = write_cache(snapshot())
        print(f"cached the listing in {written}" if written else
              f"could not write the cached listing in {cache_dir()}")
        return 0
    if args:
        print("usage: python -m hcspec.conformance.listing [--write]", file=sys.stderr)
        return 2
    reason = stale_reason()
    print(reason or f"the cached listing {cache_path()} is current")
    return 0 if reason is None else 1


if __name__ == "__main__":
    sys.exit(main())
