"""A minimal reading of an HTML page for the tests of the HTML report: every element with its
attributes and its text (the text of its descendants included), found with the stdlib's
``html.parser`` so that the tests read what a browser reads, not the template's source."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                  "source", "track", "wbr"})


@dataclass
class Element:
    """One element: tag, attributes, text (its own and its descendants', unescaped)."""

    tag: str
    attrs: dict[str, str]
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i].tag == tag:
                del self.open[i:]
                return
        raise AssertionError(f"</{tag}> closes nothing")

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element.parts.append(data)


def read(page: str) -> list[Element]:
    """Every element of ``page`` in document order (an unmatched end tag fails)."""
    reader = _Reader()
    reader.feed(page)
    reader.close()
    return reader.elements


def by_id(elements: list[Element], ident: str) -> Element:
    """The one element whose id is ``ident``."""
    found = [e for e in elements if e.attrs.get("id") == ident]
    assert len(found) == 1, (ident, len(found))
    return found[0]
