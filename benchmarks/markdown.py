"""Tables shown twice: on the terminal (rich) and in the Markdown report.

A pipe table is a few lines of string joining; no table library is a dependency of the project
(``rich`` renders the terminal side).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table as RichTable


@dataclass
class Table:
    """A titled table of already formatted cells, with notes printed under it.

    Attributes:
        title: one line. headers: column names. rows: cells (strings), one list per row.
        notes: lines shown below the table.
    """

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: str) -> None:
        """Append a row.

        Raises:
            ValueError: the number of cells differs from the number of headers.
        """
        if len(cells) != len(self.headers):
            raise ValueError(f"row has {len(cells)} cells, table {self.title!r} has "
                             f"{len(self.headers)} columns")
        self.rows.append(list(cells))

    def numeric_columns(self) -> list[bool]:
        """Per column: every cell is a figure (right-aligned); the first column never is."""
        def figure(cell: str) -> bool:
            text = cell.replace("×", "").replace("–", " ").replace("−", "-").strip()
            if not text:
                return True
            try:
                float(text.split()[0])
            except ValueError:
                return False
            return True

        return [index > 0 and all(figure(row[index]) for row in self.rows)
                for index in range(len(self.headers))]

    def markdown(self) -> str:
        """The table as GitHub-flavoured Markdown, title in bold above it, notes below."""

        def line(cells: list[str]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        align = ["---:" if numeric else "---" for numeric in self.numeric_columns()]
        out = [f"**{self.title}**", "", line(self.headers), "| " + " | ".join(align) + " |"]
        out += [line(r) for r in self.rows]
        if self.notes:
            out += [""] + [f"{note}  " if i < len(self.notes) - 1 else note
                           for i, note in enumerate(self.notes)]
        return "\n".join(out)

    def print(self, console: Console) -> None:
        """Render on the terminal."""
        table = RichTable(title=self.title, title_justify="left")
        for header, numeric in zip(self.headers, self.numeric_columns(), strict=True):
            table.add_column(header, justify="right" if numeric else "left")
        for row in self.rows:
            table.add_row(*row)
        console.print(table)
        for note in self.notes:
            console.print(f"  {note}", highlight=False)


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds with 3 significant digits (``n/a`` for None)."""
    if seconds is None:
        return "n/a"
    value = 1e3 * seconds
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def mib(nbytes: float | None) -> str:
    """Bytes as MiB with one decimal (``n/a`` for None)."""
    return "n/a" if nbytes is None else f"{nbytes / 2**20:.1f}"


def ratio(value: float | None) -> str:
    """A ratio as ``1.23×`` (``n/a`` for None)."""
    return "n/a" if value is None else f"{value:.2f}×"
