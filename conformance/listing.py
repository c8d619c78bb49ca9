"""The rows ``hc-conformance list`` prints, without importing torch when that is safe.

The property catalogue (:mod:`hcspec.conformance.properties`) declares each property next to its
check, and the checks import torch (1–3 s on a quiet machine, more under load). So the rows
(id, statement, theorems, requirements, tolerance rule) are also kept in a snapshot,
``catalogue.json`` next to this module, together with the SHA-256 of every hcspec source file
the catalogue imported when the snapshot was written and the torch version. :func:`rows` uses
the snapshot only when all of those files are byte-identical now and the torch version is the
same; otherwise it imports the catalogue and reads the rows from it. So the listing is never
stale, only slower after an edit until the snapshot is rewritten::

    python -m hcspec.conformance.listing --write

(a test fails while the snapshot is out of date, naming this command). The same command
rewrites the property table of docs/conformance.md, the block between :data:`TABLE_START` and
:data:`TABLE_END`, from the catalogue (:func:`markdown_table`); the docs test fails while it
is not current.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

SNAPSHOT: Final = Path(__file__).with_name("catalogue.json")
"""Where the snapshot is (shipped with the package)."""

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
    from hcspec.conformance.properties import CATALOGUE

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


def snapshot() -> dict[str, Any]:
    """The snapshot of the current sources: the rows, the sources' digests, the torch version
    (imports the catalogue)."""
    rows = live_rows()
    return {"torch": _torch_version(), "sources": _sources(),
            "rows": [asdict(row) for row in rows]}


def stale_reason(data: dict[str, Any] | None = None) -> str | None:
    """Why the stored snapshot (or ``data``) does not describe the sources here, or None when
    it does: missing or unreadable, another torch version, or a source file changed, added or
    missing. Reads files only; imports nothing."""
    if data is None:
        try:
            data = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return f"no readable snapshot at {SNAPSHOT}: {exc}"
    if data.get("torch") != _torch_version():
        return f"written with torch {data.get('torch')}, torch here is {_torch_version()}"
    root = _source_root()
    for relative, digest in data.get("sources", {}).items():
        path = root / relative
        if not path.is_file():
            return f"{relative} is missing"
        if _digest(path) != digest:
            return f"{relative} changed since the snapshot was written"
    return None


def rows() -> tuple[list[Row], str | None]:
    """The catalogue's rows and, when they were not read from the snapshot, why not (None when
    they were: then torch was not imported)."""
    reason = stale_reason()
    if reason is None:
        data = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
        return [Row(r["id"], r["statement"], tuple(r["theorems"]), tuple(r["requires"]),
                    r["tolerance"]) for r in data["rows"]], None
    return live_rows(), reason


def write() -> Path:
    """Write the snapshot of the current sources to :data:`SNAPSHOT`; returns the path."""
    SNAPSHOT.write_text(json.dumps(snapshot(), indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")
    return SNAPSHOT


DOC: Final = Path(__file__).resolve().parents[1] / "docs" / "conformance.md"
"""The page whose property table is generated (in a source checkout)."""

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


def main(argv: list[str] | None = None) -> int:
    """``python -m hcspec.conformance.listing [--write]``: say whether the snapshot is up to
    date (exit 0) or why not (exit 1); ``--write`` rewrites it and the property table of
    docs/conformance.md (when the page is there: a source checkout)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"]:
        print(f"wrote {write()}")
        if DOC.exists():
            print(f"wrote the property table of {write_doc()}")
        return 0
    if args:
        print("usage: python -m hcspec.conformance.listing [--write]", file=sys.stderr)
        return 2
    reason = stale_reason()
    print(reason or "the catalogue snapshot is up to date")
    return 0 if reason is None else 1


if __name__ == "__main__":
    sys.exit(main())
