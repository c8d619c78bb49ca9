"""Render the derivation pages in a real browser and fail on math errors.

Every ``$$ … $$`` display and ``$ … $`` inline formula of ``docs/derivations/*.md`` is typeset by
KaTeX (``throwOnError``) inside headless Chromium; the tool reports each formula KaTeX rejects, with
its page and KaTeX's message, and can save one screenshot per page to look at.

Needs Chromium and KaTeX (Debian: ``apt-get install chromium libjs-katex``); without them it says
which is missing and exits 2. Run from the repository root::

    python -m tools.render_derivations                       # every page
    python -m tools.render_derivations --screenshots DIR     # also DIR/<page>.png
    python -m tools.render_derivations --pages docs/derivations/norm.jacobians.md

Exit code 0 when every formula renders, 1 when one does not, 2 when a browser or KaTeX is missing.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "docs" / "derivations"
KATEX_DIRS = (Path("/usr/share/javascript/katex"), Path("/usr/share/nodejs/katex/dist"))
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

_DISPLAY = re.compile(r"\$\$\n(.*?)\n\$\$", re.S)
_INLINE = re.compile(r"(?<!\$)\$([^$\n]+)\$(?!\$)")


@dataclass(frozen=True)
class MathError:
    """A formula KaTeX rejected."""

    page: str
    formula: str
    message: str


def find_browser() -> str | None:
    """The path of a Chromium-family browser, or None."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def find_katex() -> Path | None:
    """The directory holding ``katex.min.js`` and ``katex.min.css``, or None."""
    for directory in KATEX_DIRS:
        if (directory / "katex.min.js").is_file() and (directory / "katex.min.css").is_file():
            return directory
    return None


def page_html(markdown: str, katex: Path) -> str:
    """A standalone HTML page: the Markdown's text as paragraphs, every formula in a span that
    the page's script typesets with KaTeX, recording each failure in ``#errors`` (JSON)."""
    parts: list[str] = []
    formulas: list[tuple[str, bool]] = []

    def formula(tex: str, display: bool) -> str:
        formulas.append((tex, display))
        return f'<span class="tex" data-i="{len(formulas) - 1}"></span>'

    position = 0
    for match in _DISPLAY.finditer(markdown):
        parts.append(_text(markdown[position:match.start()], formula))
        parts.append(f"<div>{formula(match.group(1), True)}</div>")
        position = match.end()
    parts.append(_text(markdown[position:], formula))
    data = json.dumps(formulas).replace("</", "<\\/")
    return f"""<!doctype html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="file://{katex}/katex.min.css">
<script src="file://{katex}/katex.min.js"></script>
<style>body {{ font-family: sans-serif; max-width: 1100px; margin: 1em auto; }}</style>
</head><body>{''.join(parts)}<pre id="errors"></pre>
<script>
const formulas = {data};
const errors = [];
for (const span of document.querySelectorAll("span.tex")) {{
  const [tex, display] = formulas[Number(span.dataset.i)];
  try {{ katex.render(tex, span, {{displayMode: display, throwOnError: true, strict: "ignore"}}); }}
  catch (e) {{ errors.push([tex, String(e.message || e)]); span.textContent = "MATH ERROR"; }}
}}
if (typeof katex === "undefined") errors.push(["", "KaTeX did not load"]);
document.getElementById("errors").textContent = "ERRORS:" + JSON.stringify(errors) + ":END";
</script></body></html>"""


def _text(chunk: str, formula: object) -> str:
    assert callable(formula)
    out = []
    for paragraph in chunk.split("\n\n"):
        if not paragraph.strip() or paragraph.startswith("<!--"):
            continue
        pieces, last = [], 0
        for match in _INLINE.finditer(paragraph):
            pieces.append(html.escape(paragraph[last:match.start()]))
            pieces.append(formula(match.group(1), False))
            last = match.end()
        pieces.append(html.escape(paragraph[last:]))
        out.append(f"<p>{''.join(pieces)}</p>")
    return "".join(out)


def render(pages: Sequence[Path], browser: str, katex: Path,
           screenshots: Path | None = None) -> list[MathError]:
    """Typeset every formula of ``pages`` in headless ``browser``; return the failures.

    Raises:
        RuntimeError: when the browser does not report back (it crashed or timed out).
    """
    errors: list[MathError] = []
    with tempfile.TemporaryDirectory(prefix="derivations-") as tmp:
        for page in pages:
            target = Path(tmp) / (page.stem + ".html")
            target.write_text(page_html(page.read_text(encoding="utf-8"), katex),
                              encoding="utf-8")
            command = [browser, "--headless", "--no-sandbox", "--disable-gpu",
                       "--allow-file-access-from-files", "--virtual-time-budget=5000"]
            done = subprocess.run([*command, "--dump-dom", target.as_uri()],
                                  capture_output=True, text=True, timeout=120, check=False)
            found = re.search(r"ERRORS:(.*?):END", html.unescape(done.stdout), re.S)
            if found is None:
                raise RuntimeError(f"{page.name}: the browser did not report back "
                                   f"(exit {done.returncode}): {done.stderr[-400:]}")
            for tex, message in json.loads(found.group(1)):
                errors.append(MathError(page.name, tex, message))
            if screenshots is not None:
                screenshots.mkdir(parents=True, exist_ok=True)
                subprocess.run([*command, "--window-size=1200,1600", "--hide-scrollbars",
                                f"--screenshot={screenshots / (page.stem + '.png')}",
                                target.as_uri()], capture_output=True, timeout=120, check=False)
    return errors


def main(argv: Sequence[str] | None = None) -> int:
    """Render the pages, print each math error, return the exit code (see the module doc)."""
    parser = argparse.ArgumentParser(prog="python -m tools.render_derivations",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", nargs="+", type=Path, help="pages to render (default: all)")
    parser.add_argument("--screenshots", type=Path, metavar="DIR",
                        help="save a PNG of every page here")
    args = parser.parse_args(argv)
    browser, katex = find_browser(), find_katex()
    if browser is None or katex is None:
        missing = [name for name, found in (("a Chromium browser", browser), ("KaTeX", katex))
                   if found is None]
        print(f"render_derivations: {' and '.join(missing)} not found (Debian: apt-get install "
              "chromium libjs-katex)", file=sys.stderr)
        return 2
    pages = args.pages or sorted(PAGES.glob("*.md"))
    errors = render(pages, browser, katex, args.screenshots)
    for error in errors:
        print(f"{error.page}: {error.message}\n    {error.formula[:300]}")
    print(f"{len(pages)} pages, {len(errors)} math errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
