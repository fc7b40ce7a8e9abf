"""The report page of a ~200 MB session: its size, the time to render it, and Chromium's time to open it.

    python bench/report_page.py [--mb 200] [--repeat 3]

Builds a synthetic Claude Code session (bench/synthetic.py's turns, compacted every --compact-every
turns as Claude Code's autocompact would) of about --mb megabytes under bench/.data/
(CTXPIPE_BENCH_DATA; reused), makes its report as `ctxpipe report` does (ctxpipe.session_report),
renders the page (report_page.session_page), and opens it in
headless Chromium (tests/browser.py finds it; Playwright drives it): the navigation's load event
and first paint, against an empty page's in the same run (the baseline). Targets: page < 5 MB,
load < 3 s. A report, not a test: exit status 1 only when a target is missed or the browser is missing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "tests")]

import synthetic  # noqa: E402  (bench/ and tests/ are put on the path just above)
from browser import chromium, skip_reason  # noqa: E402
from ctxpipe.core.reports import SessionReport  # noqa: E402
from ctxpipe.report.page import session_page  # noqa: E402

BYTES_PER_TURN = 3_156  # synthetic.turns: measured over 1,000 turns
PAGE_LIMIT = 5_000_000
LOAD_LIMIT_MS = 3_000


def session_file(megabytes: int, compact_every: int) -> Path:
    data = Path(os.environ.get("CTXPIPE_BENCH_DATA") or BENCH / ".data")
    turns = megabytes * 1_000_000 // BYTES_PER_TURN
    path = data / f"report-{megabytes}mb-{turns}-every-{compact_every}.jsonl"
    if not path.exists():
        synthetic.write(path.with_suffix(".tmp"), synthetic.turns(turns, compact_every or None)).rename(path)
    return path


def make_report(path: Path) -> SessionReport:
    """The report `ctxpipe report` makes of the file (the library's, from a memory map)."""
    from datetime import datetime, timezone

    from ctxpipe import session_report

    return session_report(path, now=datetime(2026, 5, 5, tzinfo=timezone.utc))


LOAD_SCRIPT = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const paint = performance.getEntriesByType("paint").find(e => e.name === "first-paint");
  return [nav.loadEventEnd, paint ? paint.startTime : null, document.querySelectorAll("circle.call").length];
}"""


def open_times(browser: Any, page_path: Path, repeat: int) -> list[tuple[float, float, int]]:
    """(load event ms, first paint ms, points drawn) of each fresh open of the file in a new page."""
    found = []
    for _ in range(repeat):
        context = browser.new_context()
        page = context.new_page()
        page.goto(page_path.as_uri(), wait_until="load")
        # First paint is recorded after load on a big page: wait for the next frames.
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        load, paint, points = page.evaluate(LOAD_SCRIPT)
        found.append((float(load), float(paint if paint is not None else "nan"), int(points)))
        context.close()
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the synthetic session (MB)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--compact-every",
        type=int,
        default=300,
        help="turns between compactions, as Claude Code's autocompact makes them (about 170K tokens); 0: none, one context of millions of tokens (the worst case)",
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    path = session_file(args.mb, args.compact_every)
    print(f"session: {path} ({path.stat().st_size / 1e6:.1f} MB; ready in {time.perf_counter() - started:.1f} s)")
    started = time.perf_counter()
    report = make_report(path)
    made = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ctxpipe", "count", "--full", "--json", str(path)], check=True, stdout=subprocess.DEVNULL)
    parsed = time.perf_counter() - started
    print(
        f"report data (ctxpipe.session_report): {len(report.calls):,} calls in {made:.1f} s = {made / parsed:.1f}x `count --full` ({parsed:.1f} s, every line parsed: the baseline)"
    )

    renders = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        html = session_page(report)
        renders.append(time.perf_counter() - started)
    size = len(html.encode())
    out = path.with_suffix(".html")
    out.write_text(html, encoding="utf-8")
    print(f"page: {size:,} bytes ({size / 1e6:.2f} MB; target < 5 MB) -> {out}")
    print(f"render in Python: best {min(renders) * 1000:.0f} ms, median {statistics.median(renders) * 1000:.0f} ms")

    reason = skip_reason()
    if reason:
        print(f"browser: skipped: {reason}")
        return 1
    empty = out.with_name("empty.html")
    empty.write_text("<!DOCTYPE html><html><head><meta charset=utf-8><title>empty</title></head><body><p>empty</p></body></html>\n")
    with chromium() as browser:
        # Interleaved, so drift spreads over both; the first open of each warms the browser.
        base, page_times = [], []
        for _ in range(args.repeat):
            base += open_times(browser, empty, 1)
            page_times += open_times(browser, out, 1)
    for name, times in (("empty page (baseline)", base), ("report page", page_times)):
        loads = [t[0] for t in times]
        paints = [t[1] for t in times]
        print(
            f"chromium, {name}: load event best {min(loads):.0f} ms, median {statistics.median(loads):.0f} ms; "
            f"first paint median {statistics.median(paints):.0f} ms"
        )
    print(f"points drawn: {page_times[0][2]:,} of {sum(c.main for c in report.calls):,} main calls")
    load = statistics.median(t[0] for t in page_times)
    print(f"load: median {load:.0f} ms = {load / statistics.median(t[0] for t in base):.1f}x the empty page (target < {LOAD_LIMIT_MS:,} ms)")
    missed = [what for what, bad in (("page size", size >= PAGE_LIMIT), ("load time", load >= LOAD_LIMIT_MS)) if bad]
    print("targets: " + (f"MISSED: {', '.join(missed)}" if missed else "met"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
