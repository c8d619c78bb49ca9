"""``hc-spec docs`` says what it counts: theorem pages and the index, not a bare page total
that silently includes index.md."""

from __future__ import annotations

from hcspec.spec import docs
from hcspec.spec.cli import pages_counted


def test_the_page_count_names_theorem_pages_and_the_index() -> None:
    pages = {"a.md": "", "b.md": "", docs.INDEX: ""}
    assert pages_counted(pages) == "2 theorem pages and index.md"
    assert pages_counted({"a.md": ""}) == "1 theorem page"
