"""Relative links in README.md and docs/**/*.md resolve: the file (or folder) exists, and a
``#fragment`` names a heading of the target page (GitHub's anchors). Links inside code blocks
and code spans are not links; URLs with a scheme are not checked (no network in tests).

A link that starts with ``/`` is relative to the repository root, as GitHub reads it: the
preambles in docs/findings/src/ are copied into docs/findings/*.md, so their links must work
from both places.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
_INLINE = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _without_code(text: str) -> str:
    """The text with fenced blocks removed and code spans blanked (a link's text may be a code
    span, as in [`file.py`](file.py), so a span becomes a placeholder, not nothing)."""
    return _CODE_SPAN.sub("x", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    """The targets of the inline and reference-style links in Markdown ``text``."""
    plain = _without_code(text)
    return [m.group(1) for m in _INLINE.finditer(plain)] + _REFERENCE.findall(plain)


def anchors(text: str) -> set[str]:
    """GitHub's anchors of the headings in ``text``: lower case, punctuation dropped, spaces
    to hyphens, ``-1``, ``-2``... for repeats."""
    seen: dict[str, int] = {}
    result = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of ``page`` that do not resolve, each with the reason."""
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in links(text):
        if _SCHEME.match(target):
            continue
        path_part, _, fragment = target.partition("#")
        path_part = unquote(path_part.split("?")[0])
        if not path_part:
            resolved = page
        elif path_part.startswith("/"):
            resolved = root / path_part.lstrip("/")
        else:
            resolved = page.parent / path_part
        if not resolved.exists():
            broken.append(f"{target}: no such file {resolved}")
        elif (fragment and resolved.suffix == ".md" and resolved.is_file()
              and unquote(fragment).lower() not in anchors(resolved.read_text(encoding="utf-8"))):
            broken.append(f"{target}: {resolved.name} has no heading #{fragment}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_the_checker_finds_broken_links_and_skips_code(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A title, with `code`\n\n## Again\n## Again\n")
    (tmp_path / "sub").mkdir()
    page = tmp_path / "sub" / "page.md"
    page.write_text(
        "[ok](../there.md#a-title-with-code) [ok too](../there.md#again-1) [root](/there.md)\n"
        "[`missing.py`](missing.py) [gone](../there.md#nope) [web](https://example.org/x)\n"
        "`[not a link](nowhere.md)`\n\n```sh\n[also not](nowhere.md)\n```\n\n"
        "[ref]: ../absent.md\n# Local\n[self](#local) [self bad](#elsewhere)\n")
    assert sorted(broken_links(page, root=tmp_path)) == sorted([
        f"missing.py: no such file {tmp_path / 'sub' / 'missing.py'}",
        "../there.md#nope: there.md has no heading #nope",
        f"../absent.md: no such file {tmp_path / 'sub' / '../absent.md'}",
        "#elsewhere: page.md has no heading #elsewhere",
    ])
