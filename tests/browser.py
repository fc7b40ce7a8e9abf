"""A real headless Chromium for the page tests, driven by Playwright; never downloaded.

The browser is Debian's `chromium` (or CTXPIPE_CHROMIUM): `playwright install` is never run, so the
tests skip with a reason that says how to get one when Playwright or the browser is missing.
A page is served from a made-up origin through Playwright's routing, and every other request the
page makes is recorded and refused, so a test can assert that the page asked the network for nothing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ORIGIN = "http://report.invalid"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
INSTALL = "install one with `apt-get install chromium` (or set CTXPIPE_CHROMIUM to a Chromium binary) and `pip install playwright`"


def find_chromium() -> str | None:
    """CTXPIPE_CHROMIUM, else `chromium` or `chromium-browser` on PATH."""
    given = os.environ.get("CTXPIPE_CHROMIUM")
    if given:
        return given if Path(given).is_file() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def skip_reason() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if importlib.util.find_spec("playwright") is None:  # not imported: every worker collecting the page's tests asks
        return f"Playwright is not installed: {INSTALL}"
    if find_chromium() is None:
        given = os.environ.get("CTXPIPE_CHROMIUM")
        where = f"CTXPIPE_CHROMIUM={given} is not a file" if given else "no chromium or chromium-browser on PATH"
        return f"no Chromium ({where}): {INSTALL}"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (playwright's Browser)."""
    from playwright.sync_api import sync_playwright

    path = find_chromium()
    assert path is not None, skip_reason()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Opened:
    """A page loaded in the browser, and everything it did that a test may object to."""

    page: Any
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    outside_requests: list[str] = field(default_factory=list)
    csp_violations: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return self.console_errors + self.page_errors + [f"dialog: {d}" for d in self.dialogs] + [f"request: {r}" for r in self.outside_requests]


def open_html(context: Any, html: str, name: str = "page.html") -> Opened:
    """Serve `html` at ORIGIN/name in a new page of `context` and wait for its load event."""
    page = context.new_page()
    opened = Opened(page)
    url = f"{ORIGIN}/{name}"

    def console(message: Any) -> None:
        if message.type == "error":
            opened.console_errors.append(message.text)

    def dialog(d: Any) -> None:
        opened.dialogs.append(f"{d.type}: {d.message}")
        d.dismiss()

    def route(r: Any) -> None:
        if r.request.url == url:
            r.fulfill(status=200, content_type="text/html; charset=utf-8", body=html.encode("utf-8"))
        else:
            opened.outside_requests.append(r.request.url)
            r.abort()

    page.on("console", console)
    page.on("pageerror", lambda error: opened.page_errors.append(str(error)))
    page.on("dialog", dialog)
    # Requests the router never sees (a data: URL, a blocked one) are still requests: record them.
    page.on("request", lambda request: None if request.url == url else opened.outside_requests.append(request.url))
    page.route("**/*", route)
    page.goto(url, wait_until="load")
    return opened
