"""The HTML report in a real browser: headless Chromium loads the page of a run with a failure,
not-applicable rows and the depth plot, logs no console message (the page has no script, so
any message is a problem: a blocked fetch, a CSP violation, a parse error) and takes a
screenshot. Skipped, with the reason, where no Chromium is installed
(``apt-get install chromium``)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from hcspec.conformance.outputs.html_report import write_html
from hcspec.conformance.run.session import check_implementation

pytestmark = pytest.mark.slow

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TARGET = "tests.mutants.depth_deep_layers_unnormalised:make"


def _browser() -> str:
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found is None:
        pytest.skip(f"no headless browser installed (looked for {', '.join(BROWSERS)} on PATH)")
    return found


def _chromium(browser: str, page: Path, tmp_path: Path, *args: str) -> tuple[str, str]:
    """Run headless Chromium on ``page`` with console logging on stderr; (stdout, stderr)."""
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={profile}",
         "--enable-logging=stderr", "--v=0", *args, page.as_uri()],
        capture_output=True, text=True, timeout=180, env={**os.environ, "LANG": "C.UTF-8"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def _console(stderr: str) -> list[str]:
    """Chromium's log lines of console messages (any level)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_a_broken_page_logs_console_messages(tmp_path: Path) -> None:
    """The control: what the check below looks for does show up when a page is broken."""
    browser = _browser()
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" "
                    "content=\"default-src 'none'\"></head><body><img src=\"https://example."
                    "invalid/x.png\"><script>console.error('boom')</script></body></html>",
                    encoding="utf-8")
    _, stderr = _chromium(browser, page, tmp_path, "--dump-dom")
    assert len(_console(stderr)) >= 2, stderr[-2000:]


def test_the_report_loads_without_console_messages_and_renders(tmp_path: Path) -> None:
    browser = _browser()
    report = check_implementation(TARGET, profile="quick", device="cpu",
                                  only=["shape.output", "depth", "device", "law.reported"])
    statuses = {r.id: r.status for r in report.results}
    assert statuses["depth.mhc_bounded"] == "failed"
    assert statuses["depth.hc_growth"] == "not_applicable"
    page = tmp_path / "report.html"
    write_html([report], page)
    dom, stderr = _chromium(browser, page, tmp_path, "--dump-dom")
    assert _console(stderr) == [], _console(stderr)
    # the DOM Chromium built holds the page's parts (it parsed all of it)
    assert 'id="failure-depth.mhc_bounded"' in dom and "<polyline" in dom
    assert "--only depth.mhc_bounded" in dom  # the reproduction command
    shot = tmp_path / "report.png"
    _, stderr = _chromium(browser, page, tmp_path, "--window-size=1200,1800",
                          f"--screenshot={shot}")
    assert _console(stderr) == [], _console(stderr)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert (width, height) == (1200, 1800) and len(data) > 50_000  # not a blank page
