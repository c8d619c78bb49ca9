"""The committed derivation pages read as derivations: no tautological step, no overlong display,
the statement once, then how generally and how every formula was checked; and (slow, needs
Chromium + KaTeX) every
formula typesets in a real browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sympy

from hcspec.spec.docs import LINE_BUDGET, MAX_DISPLAY, display, lines, visible_width
from hcspec.spec.registry import GENERALITIES
from tools import render_derivations

PAGES = sorted((Path(__file__).resolve().parents[2] / "docs" / "derivations").glob("*.md"))
THEOREM_PAGES = [page for page in PAGES if page.name not in ("index.md", "seed-claims.md")]
DISPLAY = re.compile(r"\$\$\n(.*?)\n\$\$", re.S)


def tautologies(page_text: str) -> list[str]:
    """Displays whose sides, split at top-level ' = ', repeat one another."""
    found = []
    for block in DISPLAY.findall(page_text):
        sides = [side.strip() for side in block.split(" = ")]
        if len(sides) >= 2 and len(set(sides)) < len(sides):
            found.append(block[:120])
    return found


def unwrapped(block: str) -> str:
    """A display without the aligned-lines markup a wide chain is typeset with."""
    return "".join(lines(block)).replace("&", "")


def test_the_checks_can_fail() -> None:
    assert tautologies("$$\nA = A\n$$") == ["A = A"]
    assert tautologies("$$\nA = B\n$$") == []


@pytest.mark.parametrize("page", THEOREM_PAGES, ids=lambda p: p.stem)
def test_no_tautological_step_and_no_overlong_display(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert tautologies(text) == []
    assert [len(b) for b in map(unwrapped, DISPLAY.findall(text)) if len(b) > MAX_DISPLAY] == []


def overflowing(page_text: str) -> list[str]:
    """Display lines wider than the page (1000 px, :data:`LINE_BUDGET` visible characters)."""
    return [line[:120] for block in DISPLAY.findall(page_text) for line in lines(block)
            if visible_width(line) > LINE_BUDGET]


def test_the_layout_check_can_fail_and_long_chains_are_wrapped() -> None:
    long = " + ".join(f"x_{{{k}}}" for k in range(60))
    assert overflowing(f"$$\n{long}\n$$") != []
    a, b = sympy.symbols("a b")
    chain = sympy.Symbol(" = ".join([sympy.latex(sum(a**k for k in range(1, 16)))] * 1
                                    + [sympy.latex(sum(b**k for k in range(1, 16)))]))
    _, text = display("wide", chain)
    assert text.startswith(r"\begin{aligned}") and overflowing(f"$$\n{text}\n$$") == []
    assert visible_width(r"\frac{a + b}{c}") == 5 and visible_width(r"\left(x\right)") == 3


@pytest.mark.parametrize("page", THEOREM_PAGES, ids=lambda p: p.stem)
def test_no_display_line_overflows_a_1000px_page(page: Path) -> None:
    assert overflowing(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("page", THEOREM_PAGES, ids=lambda p: p.stem)
def test_each_page_says_what_it_proves_and_how_generally(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert text.count("**Statement.**") == 1, page.name  # the statement appears once
    statement = re.search(r"^\*\*Statement\.\*\* (.*)$", text, re.M)
    assert statement is not None and text.count(statement.group(1)) == 1, page.name
    assert re.search(r"^Proven (for|exactly).*\. Every formula below was checked", text,
                     re.M), page.name
    assert any(f"**Generality:** {key} — " in text for key in GENERALITIES), page.name
    assert text.index("**Statement.**") < text.index("## Derivation")  # the claim comes first


@pytest.mark.slow
def test_every_formula_typesets_in_a_browser() -> None:
    browser, katex = render_derivations.find_browser(), render_derivations.find_katex()
    if browser is None or katex is None:
        pytest.skip("needs Chromium and KaTeX (Debian: apt-get install chromium libjs-katex)")
    assert render_derivations.render(PAGES, browser, katex) == []


@pytest.mark.slow
def test_a_math_error_is_reported(tmp_path: Path) -> None:
    browser, katex = render_derivations.find_browser(), render_derivations.find_katex()
    if browser is None or katex is None:
        pytest.skip("needs Chromium and KaTeX (Debian: apt-get install chromium libjs-katex)")
    page = tmp_path / "broken.md"
    page.write_text("text\n\n$$\n\\frac{1}{\n$$\n\nand $x^2$ inline\n", encoding="utf-8")
    errors = render_derivations.render([page], browser, katex)
    assert [e.formula for e in errors] == ["\\frac{1}{"]
