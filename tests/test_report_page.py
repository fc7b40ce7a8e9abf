"""The session report page and the index page (report_page.py): rendered, then checked in Python and
in a real headless Chromium (tests/browser.py; those tests skip with how to install one).

The reports here are built by `session()`: a main chain with one microcompact marker and one
compaction, a sidechain, cache rebuilds, two stage dry runs, priced at Sonnet 4.5's list prices so
every dollar figure is the tokens times the price (hand-checked in test_builder_figures)."""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium, open_html, skip_reason
from ctxpipe.core.reports import (
    Advice,
    BreakdownRow,
    CacheDecisionReport,
    CalibrationReport,
    CallRow,
    CostReport,
    CountReport,
    DollarParts,
    ExcerptLine,
    IndexRow,
    PricesReport,
    SessionReport,
    StageDryRun,
    TimelineEvent,
    TokenParts,
    WarnReport,
    WarnThresholds,
    WindowPart,
)
from ctxpipe.report.page import (
    COMPACTION_COLOUR,
    CSP,
    LEVEL_COLOURS,
    MAX_POINTS,
    PART_COLOURS,
    REBUILT_COLOUR,
    SCRIPT,
    downsample,
    index_page,
    session_page,
)
from helpers import CORPUS

ROOT = Path(__file__).resolve().parents[1]
PRICES = PricesReport(input=3.0, cache_write_5m=3.75, cache_write_1h=6.0, cache_read=0.3, output=15.0)  # $/Mtok, Sonnet 4.5
MODEL = "claude-sonnet-4-5-20250929"

HOSTILE = [
    "<script>alert(1)</script>",
    "</script><script>alert(2)</script>",
    "<img src=x onerror=alert(3)>",
    '"><svg onload=alert(4)>',
    "javascript:alert(5)",
    "<img src=x onerror=\"window.__pwned='img'\">",
    "</title><script>window.__pwned='title'</script>",
    "line\u2028separator\u2029paragraph",
]
PAYLOAD = " ".join(HOSTILE)


def _call(turn: int, line: int, prompt: int, *, main: bool = True, write: int = 0, output: int = 400, minute: int = 0) -> CallRow:
    """One API call of `prompt` tokens: `write` written to the 5-minute cache, 3 uncached, the rest read."""
    read = prompt - write - 3
    tokens = TokenParts(input=3, cache_write_5m=write, cache_write_1h=0, cache_read=read, output=output)
    return CallRow(
        turn=turn,
        line=line,
        timestamp=f"2026-05-04T10:{minute // 60:02d}:{minute % 60:02d}.000Z",
        model=MODEL,
        main=main,
        prompt_tokens=prompt,
        output_tokens=output,
        tokens=tokens,
        usd=sum(count * PRICES.to_wire()[part] for part, count in tokens.to_wire().items()) / 1e6,
        cache_hit_rate=read / prompt,
        cache_rebuilt=write > prompt / 2,
    )


def _dollars(tokens: TokenParts) -> DollarParts:
    """The tokens at PRICES."""
    return DollarParts(
        input=tokens.input * PRICES.input / 1e6,
        cache_write_5m=tokens.cache_write_5m * PRICES.cache_write_5m / 1e6,
        cache_write_1h=tokens.cache_write_1h * PRICES.cache_write_1h / 1e6,
        cache_read=tokens.cache_read * PRICES.cache_read / 1e6,
        output=tokens.output * PRICES.output / 1e6,
    )


def session(main_calls: int = 36, *, text: str = "", events: list[TimelineEvent] | None = None) -> SessionReport:
    """A session report: `main_calls` main calls growing by 2,500 tokens a turn, a sidechain call every
    ninth turn, a microcompact marker after main turn 12 and a compaction after main turn 24 (the
    prompt drops to 30,000 and the cache is rebuilt), and `text` put into every transcript string."""
    calls: list[CallRow] = []
    prompt, line = 20_000, 3
    main_turns = []
    for k in range(main_calls):
        turn = len(calls) + 1
        first = k == 0
        compacted = k == 24
        if compacted:
            prompt = 30_000
        calls.append(_call(turn, line, prompt, write=prompt - 3 if first or compacted else 2_500, minute=k))
        main_turns.append(turn)
        if k % 9 == 8:
            calls.append(_call(turn + 1, line + 1, 9_000, main=False, write=9_000 - 3, output=150, minute=k))
        prompt += 2_500
        line += 7
    if events is None:
        events = [
            TimelineEvent(kind="microcompact", line=90, after_turn=main_turns[min(12, main_calls - 1)], tokens_saved=4_200, label=f"microcompact {text}"),
            TimelineEvent(kind="compact_boundary", line=170, after_turn=main_turns[min(23, main_calls - 1)], tokens_saved=None, label=f"compacted {text}"),
        ]
    tokens = TokenParts(
        input=sum(c.tokens.input for c in calls),
        cache_write_5m=sum(c.tokens.cache_write_5m for c in calls),
        cache_write_1h=sum(c.tokens.cache_write_1h for c in calls),
        cache_read=sum(c.tokens.cache_read for c in calls),
        output=sum(c.tokens.output for c in calls),
    )
    usd_by_part = _dollars(tokens)
    prompt_total = sum(c.prompt_tokens for c in calls)
    last = [c for c in calls if c.main][-1].prompt_tokens
    window = 200_000
    file = f"session {text}.jsonl"
    model = f"{MODEL}{text}"
    cache = CacheDecisionReport(
        clear=True,
        reason=f"clearing pays after 3 turns {text}",
        tokens_freed=21_000,
        prompt_tokens=last,
        kept_prefix_tokens=12_000,
        cache_warm=True,
        ttl_minutes=5,
        horizon=10,
        cost_keep_usd=0.4521,
        cost_clear_usd=0.3376,
        break_even_turn=3,
        prices_per_mtok=PRICES,
    )
    return SessionReport(
        file=file,
        format="claude-code",
        kind="main",
        model=model,
        title=f"Tighten the limits {text}",
        session_id="77777777-7777-4777-8777-777777777777",
        first_activity=calls[0].timestamp,
        last_activity=calls[-1].timestamp,
        count=CountReport(
            file=file,
            format="claude-code",
            kind="main",
            model=model,
            context_window=window,
            tokens=last,
            exact_tokens=last - 1_200,
            estimated_tokens=1_200,
            messages=4 * main_calls,
            estimated_messages=1,
            percent_of_window=round(100 * last / window, 1),
            tokenizer="o200k_base",
            calibration=CalibrationReport(slope=1.0, overhead=0.0, source="transcript", pairs=12),
            anchor_uuid=None,
            window_source="model",
            rules="2.1.88",
            adjustments=[],
            skipped_lines=0,
            baseline_tokens=0,
            baseline=None,
            baseline_in_total=True,
            reinjected_tokens=0,
            reinjected=None,
        ),
        warn=WarnReport(
            file=file,
            model=model,
            level="warning",
            tokens=last,
            exact_tokens=last - 1_200,
            estimated_tokens=1_200,
            context_window=window,
            autocompact_window=window,
            effective_window=180_000,
            max_output_tokens=20_000,
            thresholds=WarnThresholds(warning=147_000, error=147_000, autocompact=167_000, blocking=177_000),
            percent_left=13,
            percent_used=round(100 * last / window, 1),
            explanations=[],
            ignored=[],
            rules="2.1.88",
        ),
        calls=calls,
        events=events,
        window=[
            WindowPart(part="baseline", tokens=14_000, percent=7.0),
            WindowPart(part="messages", tokens=last - 14_000, percent=round(100 * (last - 14_000) / window, 1)),
            WindowPart(part="free", tokens=max(0, 167_000 - last), percent=round(100 * max(0, 167_000 - last) / window, 1)),
            WindowPart(part="autocompact_buffer", tokens=window - max(last, 167_000), percent=round(100 * (window - max(last, 167_000)) / window, 1)),
        ],
        breakdown={
            "tool": [
                BreakdownRow(key=f"Read{text}", tokens=31_000, blocks=14, share=62.0),
                BreakdownRow(key="Bash", tokens=12_500, blocks=9, share=25.0),
                BreakdownRow(key="Edit", tokens=6_500, blocks=5, share=13.0),
            ],
            "role": [
                BreakdownRow(key="user", tokens=41_000, blocks=30, share=55.0),
                BreakdownRow(key="assistant", tokens=33_700, blocks=41, share=45.0),
            ],
            "block": [
                BreakdownRow(key="tool_result", tokens=40_000, blocks=28, share=54.0),
                BreakdownRow(key="text", tokens=22_000, blocks=35, share=29.0),
                BreakdownRow(key="tool_use", tokens=12_700, blocks=28, share=17.0),
            ],
        },
        largest=[
            ExcerptLine(
                line=120, role="user", block="tool_result", tool=f"Read{text}", subject=f"/src/parse.py{text}", tokens=8_900, excerpt=f"def parse(): {text}"
            ),
            ExcerptLine(line=64, role="assistant", block="text", tool=None, subject=None, tokens=2_100, excerpt=f"Here is the plan {text}"),
        ],
        cost=CostReport(
            usd=sum(usd_by_part.to_wire().values()),
            usd_by_part=usd_by_part,
            tokens=tokens,
            api_calls=len(calls),
            cache_hit_rate=tokens.cache_read / prompt_total,
            cache_rebuilds=sum(c.cache_rebuilt for c in calls),
            models=[model],
            prices_per_mtok={model: PRICES},
            long_context_calls=0,
            fast_calls=0,
            unpriced_models=[],
        ),
        horizon=10,
        dry_runs=[
            StageDryRun(
                stage="microcompact",
                engine=None,
                tokens_before=last,
                tokens_after=last - 21_000,
                tokens_freed=21_000,
                changed=True,
                cache=cache,
                note=f"cleared 14 tool results {text}",
            ),
            StageDryRun(
                stage="collapse",
                engine=None,
                tokens_before=last,
                tokens_after=last,
                tokens_freed=0,
                changed=False,
                cache=None,
                note="no duplicate results",
            ),
        ],
        advice=Advice(
            stage="microcompact",
            command=f"ctxpipe microcompact --force -o 'session {text}.jsonl' 'session {text}.jsonl'",
            why=f"microcompact saves the most for the cache it breaks: it frees 21,000 tokens. {text}".strip(),
        ),
        recommendation=f"microcompact saves the most for the cache it breaks: it frees 21,000 tokens. {text}".strip(),
    )


def test_builder_figures() -> None:
    """The builder's figures by hand: the first call writes 19,997 tokens to the cache, reads none."""
    first = session().calls[0]
    assert first.prompt_tokens == 20_000 and first.cache_rebuilt
    # 3 × $3 + 19,997 × $3.75 + 400 × $15, per million tokens.
    assert first.usd == pytest.approx((9 + 74_988.75 + 6_000) / 1e6)
    report = session()
    assert report.cost.api_calls == 36 + 4  # a sidechain call after main calls 9, 18, 27, 36
    assert report.cost.cache_rebuilds == 2 + 4  # the first call, the compaction, the 4 sidechain calls
    assert report.count.tokens == 30_000 + 11 * 2_500


# --- pure Python: no browser -------------------------------------------------------------------------


def _scripts(page: str) -> list[str]:
    return re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.S)


def test_one_script_and_its_hash_in_the_policy() -> None:
    page = session_page(session(text=PAYLOAD))
    assert _scripts(page) == [SCRIPT]
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in CSP
    assert "default-src 'none'" in CSP and "connect-src 'none'" in CSP
    assert f'content="{CSP}"' in page


def test_hostile_text_is_escaped_everywhere() -> None:
    for page in (session_page(session(text=PAYLOAD)), index_page([_row(PAYLOAD, "2026-05-04T10:00:00Z")], title=PAYLOAD)):
        assert page.count("<script") == 1 and page.count("</script>") == 1
        for needle in ("<img", "<svg onload", '"><svg', "</title><script"):
            assert needle not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "&quot;&gt;&lt;svg onload=alert(4)&gt;" in page
        assert 'href="javascript' not in page


def test_control_characters_are_shown_not_sent() -> None:
    page = session_page(session(text="nul\x00 esc\x1b[31m del\x7f lone\ud800"))
    page.encode("utf-8")  # a lone surrogate would fail here
    assert "\x00" not in page and "\x1b" not in page and "\x7f" not in page
    assert "nul\u2400 esc\u241b[31m del\u2421 lone\ufffd" in page


def test_bidi_overrides_and_c1_controls_are_shown_as_escapes() -> None:
    # U+202E would make the rest of a model name read backwards; U+0085 (NEL) and U+2066 act on layout too.
    page = session_page(session(text="model\u202eevil \u2066isolate\u2069 next\x85line \u200fmark"))
    assert not any(char in page for char in "\u202e\u2066\u2069\x85\u200f")
    assert "model\\u202eevil \\u2066isolate\\u2069 next\\u0085line \\u200fmark" in page


def test_index_links_stay_relative() -> None:
    rows = [_row("a.jsonl", "2026-05-01T00:00:00Z", page="javascript:alert(1)"), _row("b.jsonl", None, page="/etc/passwd")]
    page = index_page(rows, title="sessions")
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs == ["./javascript%3Aalert%281%29", "./etc/passwd"]


def test_index_is_sorted_newest_first_without_script() -> None:
    rows = [_row("old", "2026-01-01T00:00:00Z"), _row("none", None), _row("new", "2026-05-01T00:00:00Z"), _row("mid", "2026-03-01T00:00:00Z")]
    page = index_page(rows, title="sessions")
    order = re.findall(r'data-col="file" data-value="([^"]*)"', page)
    assert order == ["new", "mid", "old", "none"]


def test_the_advice_shows_why_and_the_command_as_code() -> None:
    report = session(text=PAYLOAD)
    page = session_page(report)
    advice = re.search(r'<div id="recommendation" data-stage="microcompact"><span id="why">(.*?)</span><code id="command">(.*?)</code></div>', page)
    assert advice is not None
    assert html.unescape(advice[1]) == report.advice.why and html.unescape(advice[2]) == report.advice.command
    assert "`" not in advice[0]
    report.advice = Advice(stage=None, command=None, why="No need to compact now.")
    assert '<div id="recommendation" data-stage=""><span id="why">No need to compact now.</span></div>' in session_page(report)


def test_a_compaction_side_call_shows_not_a_session_never_its_level() -> None:
    report = session()
    report.kind = "compaction"
    report.warn.level = "blocking"
    page = session_page(report)
    assert '<span id="level" class="level level-unknown side-call" data-value="not a session">not a session</span>' in page
    assert 'class="level level-blocking"' not in page and "left before" not in page and "not a session" in page.split('id="side-call">')[1][:120]
    rows = [_row("agent-acompact-1.jsonl", "2026-05-04T10:00:00Z", level="blocking", kind="compaction"), _row("main.jsonl", "2026-05-04T09:00:00Z")]
    index = index_page(rows, title="sessions")
    assert index.count(">not a session<") == 1 and 'class="level level-blocking"' not in index
    assert '<td data-col="level" data-value="">' in index  # a side-call has no level to sort by


def test_what_fills_the_window_is_one_bar_of_parts_that_add_up() -> None:
    report = session()
    page = session_page(report)
    bar = re.search(r'<div class="window-bar" id="window"[^>]*>(.*?)</div>', page)
    assert bar is not None
    parts = re.findall(r'data-part="(\w+)" data-tokens="(\d+)" style="width:([\d.]+)%', bar[1])
    assert [name for name, _, _ in parts] == ["baseline", "messages", "free", "autocompact_buffer"]
    assert sum(int(tokens) for _, tokens, _ in parts) == report.count.context_window
    assert abs(sum(float(width) for _, _, width in parts) - 100) < 0.01
    table = re.findall(r'<tr data-part="(\w+)"><td>.*?</i> ([^<]+)</td><td class="num">([\d,]+)</td>', page)
    assert [(name, label) for name, label, _ in table][:2] == [("baseline", "system prompt and tools"), ("messages", "messages")]
    assert [int(tokens.replace(",", "")) for _, _, tokens in table] == [part.tokens for part in report.window]


def test_the_charts_have_labelled_axes_and_one_colour_per_thing() -> None:
    report = session()
    page = session_page(report)
    for chart in ("timeline", "cost-chart", "hit-rate-chart"):
        svg = re.search(rf'<svg id="{chart}".*?</svg>', page, flags=re.S)
        assert svg is not None and 'class="axis-title x"' in svg[0] and 'class="axis-title y"' in svg[0], chart
    cost = re.search(r'<svg id="cost-chart".*?</svg>', page, flags=re.S)
    assert cost is not None and 'class="x-axis"' in cost[0] and 'class="y-axis"' in cost[0]
    # The dollar scale: its top, halfway and zero.
    assert len(re.findall(r'<text x="\d+" y="[\d.]+" text-anchor="end">\$[\d.,]+</text>', cost[0])) == 3
    ticks = [int(turn) for turn in re.findall(r'<g class="tick" data-turn="(\d+)">', cost[0])]
    assert ticks[0] == report.calls[0].turn and ticks[-1] == report.calls[-1].turn and len(ticks) == 6
    # Each part of a bar, the rebuilt mark and a compaction have a colour of their own.
    assert len({*PART_COLOURS.values(), REBUILT_COLOUR}) == len(PART_COLOURS) + 1
    assert COMPACTION_COLOUR not in LEVEL_COLOURS.values()
    assert set(re.findall(r'class="rebuilt" d="[^"]*" fill="([^"]+)"', page)) == {REBUILT_COLOUR}


def test_the_largest_results_show_what_they_acted_on() -> None:
    page = session_page(session(text=PAYLOAD))
    [subject] = re.findall(r'<td class="subject">([^<]*)</td>', page)[:1]
    assert html.unescape(subject) == f"/src/parse.py{PAYLOAD}"


def test_the_index_groups_by_project_with_titles_and_totals() -> None:
    rows = [
        _row("a.jsonl", "2026-05-01T00:00:00Z", project="-home-dev-app", title="Fix <b>login</b>", usd=2.0),
        _row("b.jsonl", "2026-05-03T00:00:00Z", project="-home-dev-api", usd=1.25),
        _row("c.jsonl", "2026-04-01T00:00:00Z", project="-home-dev-app", usd=None),
    ]
    page = index_page(rows, title="sessions")
    # The project with the newest activity first, and each session under its own.
    assert re.findall(r'data-project="([^"]*)"', page) == ["-home-dev-api", "-home-dev-app"]
    groups = re.findall(r"<tbody>(.*?)</tbody>", page)
    assert [re.findall(r'data-col="file" data-value="([^"]*)"', group) for group in groups] == [["b.jsonl"], ["a.jsonl", "c.jsonl"]]
    assert "-home-dev-app · 2 sessions · $2.00 (1 without a price)" in page
    assert '<span id="total-usd" data-value="3.25">$3.25</span> (1 session without a price)' in page
    assert '>Fix &lt;b&gt;login&lt;/b&gt;</a><div class="path">a.jsonl</div>' in page
    # The error column only when a file failed: a narrow window keeps the figures.
    assert "<th>error</th>" not in page and 'class="error"' not in page
    failed = index_page([*rows, _row("d.jsonl", None, page=None, project="-home-dev-api")], title="sessions")
    assert failed.count("<th>error</th>") == 1 and '<td class="error">not a transcript</td>' in failed


def _main(n: int, seed: int = 7) -> list[CallRow]:
    """n main calls with a deterministic zig-zag of sizes (so min and max are not at the ends)."""
    return [_call(i + 1, i + 1, 20_000 + (i * seed * 7919) % 50_000) for i in range(n)]


def test_downsample_keeps_every_call_when_they_fit() -> None:
    calls = _main(MAX_POINTS)
    assert downsample(calls, []) == calls


def test_downsample_keeps_bucket_extremes_and_event_neighbours() -> None:
    calls = _main(50_000)
    events = [TimelineEvent(kind="compact_boundary", line=None, after_turn=t, tokens_saved=None, label="c") for t in (7_001, 23_456, 49_999)]
    drawn = downsample(calls, events)
    turns = [c.turn for c in drawn]
    assert turns == sorted(set(turns)), "in order, each once"
    assert len(drawn) <= MAX_POINTS + 2 + 2 * len(events)
    assert {1, 50_000, 7_001, 7_002, 23_456, 23_457, 49_999} <= set(turns)
    kept = set(turns)
    size = len(calls) / (MAX_POINTS // 2)
    for b in range(MAX_POINTS // 2):
        bucket = calls[int(b * size) : int((b + 1) * size)]
        assert min(bucket, key=lambda c: c.prompt_tokens).turn in kept
        assert max(bucket, key=lambda c: c.prompt_tokens).turn in kept
    assert max(c.prompt_tokens for c in drawn) == max(c.prompt_tokens for c in calls)
    assert min(c.prompt_tokens for c in drawn) == min(c.prompt_tokens for c in calls)


def test_a_huge_session_makes_a_small_page() -> None:
    report = session(3)
    report.calls = _main(160_000)
    report.events = [TimelineEvent(kind="microcompact", line=i, after_turn=i * 400, tokens_saved=10, label="mc") for i in range(1, 300)]
    page = session_page(report)
    assert len(page.encode()) < 5_000_000
    assert f'data-calls="{160_000}"' in page and "Downsampled:" in page
    assert page.count('class="call"') <= MAX_POINTS + 2 + 2 * 299
    assert page.count('class="event stage"') == 299


def test_no_autocompact_line_when_autocompact_is_off() -> None:
    report = session()
    report.warn.thresholds.autocompact = None
    page = session_page(report)
    assert re.findall(r'class="threshold" data-level="(\w+)"', page) == ["warning", "blocking"]


def _row(
    file: str,
    last: str | None,
    *,
    page: str | None = "p.html",
    tokens: int | None = 1000,
    usd: float | None = 1.5,
    level: str | None = "normal",
    project: str = "",
    title: str | None = None,
    kind: str | None = None,
) -> IndexRow:
    return IndexRow(
        file=file,
        page=page,
        project=project,
        name=file,
        title=title,
        kind=kind,
        model=MODEL,
        tokens=tokens,
        percent_of_window=None if tokens is None else round(100 * tokens / 200_000, 1),
        level=level,
        usd=usd,
        last_activity=last,
        error=None if page else "not a transcript",
    )


# --- in Chromium --------------------------------------------------------------------------------------

needs_browser = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with chromium() as launched:
        yield launched


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    made = browser.new_context(viewport={"width": 1200, "height": 900})
    yield made
    made.close()


def _value(page: Any, element_id: str) -> str:
    return str(page.get_attribute(f"#{element_id}", "data-value"))


@needs_browser
def test_page_in_chromium_shows_the_reports_figures(context: Any, tmp_path: Path) -> None:
    report = session()
    opened = open_html(context, session_page(report))
    page = opened.page
    assert opened.problems == []

    main = [c for c in report.calls if c.main]
    points = page.eval_on_selector_all("#timeline circle.call", "els => els.map(e => [+e.dataset.turn, +e.dataset.tokens, e.dataset.line])")
    assert points == [[c.turn, c.prompt_tokens, str(c.line)] for c in main]
    levels = page.eval_on_selector_all("#timeline .threshold", "els => els.map(e => [e.dataset.level, +e.dataset.tokens])")
    assert levels == [["warning", 147_000], ["autocompact", 167_000], ["blocking", 177_000]]
    markers = page.eval_on_selector_all("#timeline .event", "els => els.map(e => [e.dataset.kind, e.classList.contains('compact'), +e.dataset.afterTurn])")
    assert markers == [[e.kind, e.kind == "compact_boundary", e.after_turn] for e in report.events]
    # Each marker is drawn between the call it follows and the next one.
    for event in report.events:
        x = page.eval_on_selector(f'#timeline .event[data-after-turn="{event.after_turn}"] line', "e => +e.getAttribute('x1')")
        before = page.eval_on_selector(f'#timeline circle.call[data-turn="{event.after_turn}"]', "e => +e.getAttribute('cx')")
        assert before < x and page.locator("#timeline circle.call").count() > 0

    assert int(_value(page, "total-tokens")) == report.count.tokens
    assert page.inner_text("#total-tokens") == f"{report.count.tokens:,}"
    assert int(_value(page, "context-window")) == 200_000
    assert float(_value(page, "cost-usd")) == report.cost.usd
    assert page.inner_text("#cost-usd") == f"${report.cost.usd:,.2f}"
    assert float(_value(page, "cache-hit-rate")) == report.cost.cache_hit_rate
    assert int(_value(page, "cache-rebuilds")) == report.cost.cache_rebuilds
    assert int(_value(page, "api-calls")) == len(report.calls)
    assert _value(page, "level") == "warning"
    for part in ("input", "cache_write_5m", "cache_read", "output"):
        assert int(_value(page, f"tokens-{part}")) == report.cost.tokens.to_wire()[part]
        assert float(_value(page, f"usd-{part}")) == report.cost.usd_by_part.to_wire()[part]
    runs = page.eval_on_selector_all("#dry-runs tr.dry-run", "els => els.map(e => [e.dataset.stage, +e.dataset.freed, e.querySelector('.freed').innerText])")
    assert runs == [[r.stage, r.tokens_freed, f"{r.tokens_freed:,}"] for r in report.dry_runs]
    assert page.inner_text("#why") == report.advice.why and page.inner_text("#command") == report.advice.command
    assert "`" not in page.inner_text("#recommendation")  # the command is code on the page, not backticks
    assert page.eval_on_selector_all("#cost-chart .cost-bar", "els => els.map(e => +e.dataset.usd)") == [c.usd for c in report.calls]
    assert page.locator("#hit-rate-chart circle.rebuilt").count() == report.cost.cache_rebuilds
    assert page.locator("#largest tr.largest").count() == 2

    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    _check_png(shot)
    assert opened.problems == []


def _check_png(path: Path, wide: int = 1000) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= wide and height >= 1500, (width, height)  # the whole page, not a blank viewport
    assert len(data) > 50_000


@needs_browser
def test_breakdown_switch(context: Any) -> None:
    opened = open_html(context, session_page(session()))
    page = opened.page
    visible = "() => [...document.querySelectorAll('.breakdown')].filter(e => !e.hidden).map(e => e.dataset.by)"
    assert page.evaluate(visible) == ["tool"]
    assert page.is_visible("#breakdown-switch")
    for by in ("role", "block", "tool"):
        page.click(f'#breakdown-switch button[data-by="{by}"]')
        assert page.evaluate(visible) == [by]
        assert page.get_attribute(f'#breakdown-switch button[data-by="{by}"]', "aria-pressed") == "true"
    page.click('#breakdown-switch button[data-by="role"]')
    keys = page.eval_on_selector_all('.breakdown[data-by="role"] .bar-row', "els => els.map(e => [e.dataset.key, +e.dataset.tokens])")
    assert keys == [["user", 41_000], ["assistant", 33_700]]
    assert page.inner_text('.breakdown[data-by="role"] .bar-row .num') == "41,000 · 55%"  # share is a percent already
    assert opened.problems == []


@needs_browser
def test_hover_shows_a_calls_details(context: Any) -> None:
    report = session()
    opened = open_html(context, session_page(report))
    page = opened.page
    call = [c for c in report.calls if c.main][5]
    page.hover(f'#timeline circle.call[data-turn="{call.turn}"]', force=True)
    assert page.is_visible("#tip")
    tip = page.inner_text("#tip")
    assert f"turn {call.turn:,}" in tip and f"{call.prompt_tokens:,} tokens" in tip and f"line {call.line:,}" in tip
    assert opened.problems == []


@needs_browser
def test_page_reads_with_javascript_off(browser: Any) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        opened = open_html(context, session_page(session()))
        page = opened.page
        assert page.locator(".breakdown:visible").count() == 3
        assert page.locator("#timeline circle.call").count() == 36
        assert (
            page.eval_on_selector("#timeline circle.call", "e => e.querySelector('title').textContent")
            == "turn 1 · 20,000 tokens · line 3 · 2026-05-04T10:00:00.000Z"
        )
        assert opened.problems == []
    finally:
        context.close()


@needs_browser
def test_hostile_text_runs_nothing_and_shows_as_text(context: Any) -> None:
    payload = PAYLOAD + " nul\x00end"
    opened = open_html(context, session_page(session(text=payload)))
    page = opened.page
    for selector in ("#total-tokens", "#recommendation", "#largest"):
        page.wait_for_selector(selector)
    assert opened.dialogs == [] and opened.page_errors == [] and opened.outside_requests == []
    assert page.evaluate("() => window.__pwned") is None
    flat = " ".join(page.inner_text("body").split())
    for piece in HOSTILE:
        assert " ".join(piece.replace("\u2028", " ").replace("\u2029", " ").split()) in flat, piece
    assert "nul\u2400end" in page.inner_text("#recommendation")
    assert page.inner_text("#file").startswith("session <script>alert(1)</script> </script><script>alert(2)</script>")
    assert page.inner_text("#model").startswith(MODEL + "<script>alert(1)</script>")
    assert page.evaluate("() => document.querySelectorAll('script').length") == 1
    assert page.evaluate("() => document.querySelectorAll('img, iframe, object, embed, svg [onload]').length") == 0
    # Hover every element with a tooltip: the script writes them as text.
    page.hover("#largest tr.largest", force=True)
    page.hover(".breakdown .bar-row", force=True)
    assert page.evaluate("() => window.__pwned") is None and opened.dialogs == []

    index = open_html(context, index_page([_row(payload, "2026-05-04T10:00:00Z", page=payload)], title=payload))
    assert index.problems == [] and index.page.evaluate("() => window.__pwned") is None
    assert index.page.inner_text("h1").startswith("<script>alert(1)</script>")
    href = index.page.get_attribute("#sessions a", "href") or ""
    assert href.startswith("./%3Cscript%3Ealert%281%29") and ":" not in href


@needs_browser
def test_index_sorts(context: Any) -> None:
    rows = [
        _row("a", "2026-03-01T00:00:00Z", tokens=50_000, usd=2.0, level="warning"),
        _row("b", "2026-05-01T00:00:00Z", tokens=10_000, usd=9.5, level="normal"),
        _row("c", None, tokens=None, usd=None, level=None, page=None),
        _row("d", "2026-01-01T00:00:00Z", tokens=150_000, usd=0.25, level="blocking"),
        _row("e", "2026-04-01T00:00:00Z", tokens=90_000, usd=None, level="autocompact"),
    ]
    opened = open_html(context, index_page(rows, title="sessions"))
    page = opened.page
    order = "() => [...document.querySelectorAll('#sessions tr.session')].map(r => r.querySelector('td[data-col=file]').dataset.value).join('')"
    assert page.evaluate(order) == "beadc"
    page.click('th[data-sort="tokens"] button')
    assert page.evaluate(order) == "deabc"  # largest first; no figure last
    page.click('th[data-sort="tokens"] button')
    assert page.evaluate(order) == "baedc"
    page.click('th[data-sort="usd"] button')
    assert page.evaluate(order) == "badec"
    page.click('th[data-sort="level"] button')
    assert page.evaluate(order) == "deabc"
    page.click('th[data-sort="last_activity"] button')
    assert page.evaluate(order) == "beadc"
    page.click('th[data-sort="last_activity"] button')
    assert page.evaluate(order) == "daebc"
    assert page.get_attribute('th[data-sort="last_activity"]', "aria-sort") == "ascending"
    assert page.get_attribute("#sessions a", "href") == "./p.html"
    assert opened.problems == []


@needs_browser
def test_index_sorts_within_each_project(context: Any) -> None:
    rows = [
        _row("a", "2026-03-01T00:00:00Z", tokens=50_000, project="one"),
        _row("b", "2026-05-01T00:00:00Z", tokens=10_000, project="two"),
        _row("c", "2026-01-01T00:00:00Z", tokens=90_000, project="one"),
        _row("d", "2026-02-01T00:00:00Z", tokens=70_000, project="two"),
    ]
    opened = open_html(context, index_page(rows, title="sessions"))
    page = opened.page
    order = "() => [...document.querySelectorAll('#sessions tbody')].map(b => b.rows[0].dataset.project + ':' + [...b.querySelectorAll('tr.session')].map(r => r.querySelector('td[data-col=file]').dataset.value).join('')).join(' ')"
    assert page.evaluate(order) == "two:bd one:ac"
    page.click('th[data-sort="tokens"] button')
    assert page.evaluate(order) == "two:db one:ca"
    assert opened.problems == []


@needs_browser
def test_index_fits_a_narrow_window(browser: Any) -> None:
    """At 800 px the whole table shows, its last column too (no sideways scrolling): names and titles
    wrap, and a time breaks between its date and its hour, never inside either."""
    long_name = "test__fixtures__transcripts__fa812bfe-b295-4cca-9c2f-fdf01028cb46__subagents__agent-acompact-70d8e7.jsonl"
    rows = [
        _row(long_name, "2026-02-12T16:13:25Z", tokens=173_417, usd=0.0987, level="autocompact", project="marot__spotter", kind="compaction"),
        _row("s.jsonl", "2026-02-12T16:17:55Z", tokens=76_549, usd=10.23, project="marot__spotter", title="Work on bead spotter-a0y. " * 4),
        _row("t.jsonl", "2025-12-28T12:21:00Z", tokens=17_193, usd=None, level="blocking", project="simonw__claude-code-transcripts"),
    ]
    made = browser.new_context(viewport={"width": 800, "height": 900})
    try:
        opened = open_html(made, index_page(rows, title="ctxpipe report: 3 sessions"))
        page = opened.page
        right = page.evaluate("() => document.getElementById('sessions').getBoundingClientRect().right")
        assert right <= 800, right
        times = page.eval_on_selector_all("td.when", "cells => cells.map(c => c.innerText)")
        assert times and all(text.split() == [text.split()[0], text.split()[1]] and len(text.split()[0]) == 10 for text in times), times
        assert opened.problems == []
    finally:
        made.close()


@needs_browser
def test_a_session_page_fits_a_phone(browser: Any) -> None:
    """At 375 px the page itself never scrolls sideways: a wide table scrolls in its own box and a
    long path breaks."""
    report = session()
    report.file = "/home/dev/projects/" + "a-very-long-project-folder-name-" * 4 + "/test__fixtures__transcripts__fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"
    made = browser.new_context(viewport={"width": 375, "height": 800})
    try:
        opened = open_html(made, session_page(report))
        page = opened.page
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 375
        wide = page.evaluate(
            "() => [...document.querySelectorAll('table')].filter(t => t.getBoundingClientRect().right > 375 && !t.closest('.table-wrap')).map(t => t.id)"
        )
        assert wide == []
        assert opened.problems == []
    finally:
        made.close()


@needs_browser
def test_downsampled_page_in_chromium(context: Any) -> None:
    report = session(3)
    report.calls = _main(30_000)
    report.events = [TimelineEvent(kind="compact_boundary", line=5, after_turn=12_345, tokens_saved=None, label="compacted")]
    opened = open_html(context, session_page(report))
    page = opened.page
    drawn = page.locator("#timeline circle.call").count()
    assert drawn == int(page.get_attribute("#downsampled", "data-drawn") or 0) <= MAX_POINTS + 4
    assert page.get_attribute("#downsampled", "data-calls") == "30000"
    assert "Downsampled" in page.inner_text("#downsampled")
    assert page.locator('#timeline circle.call[data-turn="12345"]').count() == 1
    assert page.locator('#timeline circle.call[data-turn="12346"]').count() == 1
    assert page.locator("#cost-chart .cost-bar").count() <= 600
    assert opened.problems == []


SCREENSHOT_WIDTHS = (800, 1400)  # a narrow window and a wide one: docs/report-800.png, docs/report-1400.png


@needs_browser
def test_screenshot_for_the_readme(browser: Any) -> None:
    """With CTXPIPE_WRITE_SCREENSHOT=1: docs/report-800.png and docs/report-1400.png, of the corpus's
    compacted session when the report's data can be built (report_data and the corpus present), else
    of this module's session."""
    if os.environ.get("CTXPIPE_WRITE_SCREENSHOT") != "1":
        pytest.skip("set CTXPIPE_WRITE_SCREENSHOT=1 to write docs/report-800.png and docs/report-1400.png")
    report = _corpus_report() or session()
    for width in SCREENSHOT_WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        try:
            opened = open_html(context, session_page(report))
            assert opened.problems == []
            # Nothing is wider than the window: no sideways scrolling at either width.
            assert opened.page.evaluate("() => document.documentElement.scrollWidth") <= width
            target = ROOT / "docs" / f"report-{width}.png"
            target.parent.mkdir(exist_ok=True)
            opened.page.screenshot(path=str(target), full_page=True)
            _check_png(target, width)
        finally:
            context.close()


COMPACTED = CORPUS / "marot__spotter" / "test__fixtures__transcripts__fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl"


def _corpus_report() -> SessionReport | None:
    """The corpus's compacted session's report, when report_data and the corpus are both here (named
    as if given from the corpus folder, as a person would)."""
    try:
        from ctxpipe.report import data as report_data
    except ImportError:
        return None
    if not COMPACTED.is_file():
        return None
    from datetime import datetime, timezone

    shown = str(COMPACTED.relative_to(CORPUS))
    now = datetime.now(timezone.utc)
    report: SessionReport = report_data.session_report(COMPACTED.read_bytes(), shown, report_data.ReportOptions(), now, None, str(COMPACTED))
    return report


@needs_browser
def test_corpus_compacted_session_in_chromium(context: Any) -> None:
    """The corpus's compacted session: its page draws one point per main call and the compact boundary."""
    report = _corpus_report()
    if report is None:
        pytest.skip("needs ctxpipe.report.data and ../shared/corpus")
    opened = open_html(context, session_page(report))
    page = opened.page
    assert opened.problems == []
    main = [c.turn for c in report.calls if c.main]
    assert page.eval_on_selector_all("#timeline circle.call", "els => els.map(e => +e.dataset.turn)") == main
    assert page.locator("#timeline .event.compact").count() == sum(e.kind == "compact_boundary" for e in report.events) >= 1
    assert int(_value(page, "total-tokens")) == report.count.tokens
    if report.cost.usd is not None:
        assert float(_value(page, "cost-usd")) == report.cost.usd
    runs = page.eval_on_selector_all("#dry-runs tr.dry-run", "els => els.map(e => +e.dataset.freed)")
    assert runs == [r.tokens_freed for r in report.dry_runs]


def test_unpriced_cost_is_unknown_not_zero() -> None:
    report = session()
    report.cost.usd = None
    report.cost.unpriced_models = ["<b>mystery</b>"]
    report.calls[0].usd = None
    page = session_page(report)
    assert '<span id="cost-usd" data-value="">unknown</span>' in page
    assert "no known price for &lt;b&gt;mystery&lt;/b&gt;" in page
    assert "1 unpriced (model with no known price)" in page


@needs_browser
def test_the_harness_sees_a_request_and_the_policy_stops_a_foreign_script(context: Any) -> None:
    """The checks above could fail: a page that fetches is caught, and a script our policy does not
    name does not run even when it is in the page."""
    leaky = open_html(context, '<!DOCTYPE html><img src="http://example.invalid/x.png"><p>x</p>')
    assert any("example.invalid" in url for url in leaky.outside_requests)
    page = session_page(session()).replace("<body>", "<body><script>window.__pwned = 1</script>", 1)
    opened = open_html(context, page)
    assert opened.page.evaluate("() => window.__pwned") is None
    assert opened.page.evaluate("() => document.getElementById('breakdown-switch').hidden") is False  # ours ran


def test_a_name_or_time_of_megabytes_makes_no_page_of_megabytes(tmp_path: Path) -> None:
    # A compaction's trigger, a call's timestamp, the model id and the session id are written on the
    # page in a label, a tooltip and a table: each was written whole, up to three times (a 5 MB
    # trigger made a 15 MB page). They are cut to a label's length; the facts (--json) keep them whole.
    import json

    from helpers import FIXTURES, run_cli

    huge = "x" * (1 << 20)
    lines = []
    for raw in (FIXTURES / "claude-code" / "compacted.jsonl").read_bytes().splitlines():
        obj = json.loads(raw)
        if obj.get("subtype") == "compact_boundary":
            obj["compactMetadata"] = {**obj.get("compactMetadata", {}), "trigger": "auto " + huge}
        if obj.get("type") == "assistant":
            obj["timestamp"] = "at " + huge
            obj["message"]["model"] = "claude-" + huge
        obj["sessionId"] = "s-" + huge
        lines.append(json.dumps(obj))
    path = tmp_path / "huge-names.jsonl"
    path.write_text("\n".join(lines) + "\n")
    page = tmp_path / "page.html"
    done = run_cli("report", "--now", "2026-12-01T00:00:00Z", path, "-o", page)
    assert done.returncode == 0, done.stderr
    assert page.stat().st_size < 200_000, page.stat().st_size
    text = page.read_text()
    assert "compacted (auto xxx" in text and "x" * 200 not in text
    facts = run_cli("report", "--json", "--now", "2026-12-01T00:00:00Z", path)
    assert facts.returncode == 0 and json.loads(facts.stdout)["session_id"] == "s-" + huge
