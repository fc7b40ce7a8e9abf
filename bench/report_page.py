"""The report page of a ~200 MB session: its size, the time to render it, and Chromium's time to open it.

    python bench/report_page.py [--mb 200] [--repeat 3]

Builds a synthetic Claude Code session (bench/synthetic.py's turns) of about --mb megabytes under
bench/.data/ (CTXPIPE_BENCH_DATA; reused while its size is right), makes its SessionReport with
ctxpipe.report_data when that module exists (else one CallRow per response of the file, priced at
Sonnet 4.5's list prices, built here), renders the page (report_page.session_page), and opens it in
headless Chromium (tests/browser.py finds it; Playwright drives it): the navigation's load event
and first paint, against an empty page's in the same run (the baseline). Targets: page < 5 MB,
load < 3 s. A report, not a test: exit status 1 only when a target is missed or the browser is missing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "tests")]

import synthetic  # noqa: E402  (bench/ and tests/ are put on the path just above)
from browser import chromium, skip_reason  # noqa: E402
from ctxpipe.core.reports import CallRow, SessionReport  # noqa: E402
from ctxpipe.report_page import session_page  # noqa: E402

BYTES_PER_TURN = 3_156  # synthetic.turns: measured over 1,000 turns
PRICES = {"input": 3.0, "cache_write_5m": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3, "output": 15.0}
PAGE_LIMIT = 5_000_000
LOAD_LIMIT_MS = 3_000


def session_file(megabytes: int) -> Path:
    data = Path(os.environ.get("CTXPIPE_BENCH_DATA") or BENCH / ".data")
    turns = megabytes * 1_000_000 // BYTES_PER_TURN
    path = data / f"report-{megabytes}mb-{turns}.jsonl"
    if not path.exists():
        synthetic.write(path.with_suffix(".tmp"), synthetic.turns(turns)).rename(path)
    return path


def bench_report(path: Path) -> SessionReport:
    """The SessionReport without report_data: one CallRow per response (its usage from its last
    line), every call on the main chain; the rest of the report is small and fixed."""
    usage_by_id: dict[str, tuple[int, str, dict[str, Any]]] = {}
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, 1):
            entry = orjson.loads(raw)
            message = entry.get("message") if entry.get("type") == "assistant" else None
            if isinstance(message, dict) and isinstance(message.get("usage"), dict):
                usage_by_id[message["id"]] = (number, entry.get("timestamp"), message["usage"])
    calls: list[CallRow] = []
    for turn, (number, stamp, usage) in enumerate(usage_by_id.values(), 1):
        tokens = {
            "input": usage.get("input_tokens", 0),
            "cache_write_5m": usage.get("cache_creation_input_tokens", 0),
            "cache_write_1h": 0,
            "cache_read": usage.get("cache_read_input_tokens", 0),
            "output": usage.get("output_tokens", 0),
        }
        prompt = tokens["input"] + tokens["cache_write_5m"] + tokens["cache_read"]
        calls.append(
            {
                "turn": turn,
                "line": number,
                "timestamp": stamp,
                "model": synthetic.MODEL,
                "main": True,
                "prompt_tokens": prompt,
                "output_tokens": tokens["output"],
                "tokens": tokens,  # type: ignore[typeddict-item]  # a plain dict of the five parts
                "usd": sum(tokens[p] * PRICES[p] for p in PRICES) / 1e6,
                "cache_hit_rate": tokens["cache_read"] / prompt if prompt else None,
                "cache_rebuilt": tokens["cache_write_5m"] > prompt / 2,
            }
        )
    parts = {p: sum(c["tokens"][p] for c in calls) for p in PRICES}  # type: ignore[literal-required]  # p is a part's name
    last = calls[-1]["prompt_tokens"]
    window = 1_000_000
    thresholds = {"warning": 947_000, "error": 947_000, "autocompact": 967_000, "blocking": 977_000}
    count = {"file": str(path), "format": "claude-code", "kind": "main", "model": synthetic.MODEL, "context_window": window, "tokens": last}
    count |= {"percent_of_window": round(100 * last / window, 1)}
    warn = {"level": "blocking", "thresholds": thresholds, "percent_left": 0}
    return {  # type: ignore[typeddict-item,return-value]  # only the keys the page reads
        "file": path.name,
        "format": "claude-code",
        "kind": "main",
        "model": synthetic.MODEL,
        "session_id": synthetic.SESSION,
        "first_activity": calls[0]["timestamp"],
        "last_activity": calls[-1]["timestamp"],
        "count": count,
        "warn": warn,
        "calls": calls,
        "events": [],
        "breakdown": {"tool": [], "role": [], "block": []},
        "largest": [],
        "cost": {
            "usd": sum(parts[p] * PRICES[p] for p in PRICES) / 1e6,
            "usd_by_part": {p: parts[p] * PRICES[p] / 1e6 for p in PRICES},
            "tokens": parts,
            "api_calls": len(calls),
            "cache_hit_rate": parts["cache_read"] / max(1, sum(c["prompt_tokens"] for c in calls)),
            "cache_rebuilds": sum(c["cache_rebuilt"] for c in calls),
            "models": [synthetic.MODEL],
            "prices_per_mtok": {synthetic.MODEL: PRICES},
            "long_context_calls": 0,
            "unpriced_models": [],
        },
        "horizon": 10,
        "dry_runs": [],
        "recommendation": "(bench: no dry run)",
    }


def make_report(path: Path, own: bool) -> tuple[SessionReport, str]:
    try:
        from ctxpipe import report_data
    except ImportError:
        own = True
    if own:
        return bench_report(path), "built by the bench (one CallRow per response)"
    from datetime import datetime, timezone

    report = report_data.session_report(path.read_bytes(), str(path), report_data.ReportOptions(), datetime.now(timezone.utc))
    return report, "ctxpipe.report_data.session_report"


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
    parser.add_argument("--own-report", action="store_true", help="build the report here even when ctxpipe.report_data exists")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    path = session_file(args.mb)
    print(f"session: {path} ({path.stat().st_size / 1e6:.1f} MB; ready in {time.perf_counter() - started:.1f} s)")
    started = time.perf_counter()
    report, source = make_report(path, args.own_report)
    print(f"report: {source}: {len(report['calls']):,} calls in {time.perf_counter() - started:.1f} s")

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
    print(f"points drawn: {page_times[0][2]:,} of {sum(c['main'] for c in report['calls']):,} main calls")
    load = statistics.median(t[0] for t in page_times)
    print(f"load: median {load:.0f} ms = {load / statistics.median(t[0] for t in base):.1f}x the empty page (target < {LOAD_LIMIT_MS:,} ms)")
    missed = [what for what, bad in (("page size", size >= PAGE_LIMIT), ("load time", load >= LOAD_LIMIT_MS)) if bad]
    print("targets: " + (f"MISSED: {', '.join(missed)}" if missed else "met"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
