"""The session report as HTML: one self-contained page per session, and an index page for a folder.

Rendering only: the figures come from a SessionReport (core.reports) and are shown as they are.
Each page is one file that asks the network for nothing (inline CSS, inline SVG, one inline script
allowed by its hash in a Content-Security-Policy), and reads with JavaScript off too: every section
is plain HTML, and the tooltips are SVG <title>s. The script only adds hover details, the breakdown
switch and the index's sorting; it reads the page's own data- attributes and writes text with
textContent, so no transcript string is ever run or parsed as markup.

Every string of a report comes from a transcript and is hostile: `_text` escapes it for text and
attributes alike (and shows control characters as visible symbols). Machine-readable copies of the
figures sit in data- attributes and ids, so tests compare them with the report without reading prose.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import quote

from ..core.fields import rounded_percent
from ..core.reports import BreakdownRow, CallRow, DollarParts, IndexRow, PricesReport, SessionReport, TimelineEvent, TokenParts
from ..files.sessions import COMPACTION_NOTE
from .data import LABEL_CHARACTERS, shortened

# Above this many main calls the timeline is drawn from a sample: each bucket's min and max, and
# the calls on either side of every event (a 200 MB session has ~10^5 calls; its page stays small).
MAX_POINTS = 2000
# Bars of the cost chart and points of the hit-rate chart: above this many calls, consecutive calls
# are summed into one bar (the page says how many a bar holds).
MAX_BARS = 600
EXCERPT_CHARS = 300  # the largest table's excerpts (the report's may be longer)
TABLE_ROWS = 50  # rows of a capped table (largest lines, rebuilt calls, events)
BREAKDOWN_ROWS = 25  # keys per breakdown; the rest are summed into one row

LEVELS = ("normal", "warning", "autocompact", "blocking")
LEVEL_COLOURS = {"normal": "#2e7d32", "warning": "#b58900", "autocompact": "#a03cae", "blocking": "#c62828"}
PART_NAMES = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")
PART_LABELS = {
    "input": "input",
    "cache_write_5m": "cache write 5 min",
    "cache_write_1h": "cache write 1 h",
    "cache_read": "cache read",
    "output": "output",
}
PART_COLOURS = {"input": "#1f77b4", "cache_write_5m": "#ff7f0e", "cache_write_1h": "#8c564b", "cache_read": "#2ca02c", "output": "#9467bd"}
REBUILT_COLOUR = "#000"  # a call that rebuilt the cache: a mark of its own, no part's colour
COMPACTION_COLOUR = "#333"  # a compaction on the timeline: no level's colour
WINDOW_LABELS = {"baseline": "system prompt and tools", "messages": "messages", "free": "free space", "autocompact_buffer": "autocompact buffer"}
WINDOW_COLOURS = {"baseline": "#8c6bb1", "messages": "#1f77b4", "free": "#f1f1f1", "autocompact_buffer": "#c9c9c9"}
SIDE_CALL = "not a session"  # the level shown for a compaction side-call (warn says the same)
BREAKDOWN_KINDS = ("tool", "role", "block")

# Shown as a symbol or an escape, never acted on: C0 controls but tab and newline (their pictures),
# DEL, C1 controls, the bidi marks, embeddings, overrides and isolates (which would reorder what a
# page shows: a model name could read backwards), and lone surrogates (which no page can encode).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return "\ufffd" if 0xD800 <= code <= 0xDFFF else f"\\u{code:04x}"


def _text(value: object) -> str:
    """Any value as HTML text or as an attribute's value (quotes escaped too)."""
    return html.escape(_UNSAFE.sub(_visible, value if isinstance(value, str) else str(value)), quote=True)


def _label(value: object) -> str:
    """A name or a time the file records, as _text, on one line and at most LABEL_CHARACTERS."""
    return _text(shortened(value if isinstance(value, str) else str(value), LABEL_CHARACTERS))


def _int(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _usd(value: float | None) -> str:
    if value is None:
        return "–"
    return f"${value:,.2f}" if abs(value) >= 1 or value == 0 else f"${value:,.4f}"


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def _parts(parts: TokenParts | DollarParts | PricesReport) -> dict[str, float]:
    """The five billed parts as a plain dict, to index by a part's name."""
    return {
        "input": parts.input,
        "cache_write_5m": parts.cache_write_5m,
        "cache_write_1h": parts.cache_write_1h,
        "cache_read": parts.cache_read,
        "output": parts.output,
    }


def _short(tokens: float) -> str:
    return f"{tokens / 1_000_000:.2f}M" if tokens >= 1_000_000 else f"{tokens / 1000:.0f}K" if tokens >= 1000 else f"{tokens:.0f}"


def _figure(element_id: str, value: object, shown: str) -> str:
    """A figure with its machine-readable value: `<span id=.. data-value=..>shown</span>`."""
    data = "" if value is None else _text(value)
    return f'<span id="{element_id}" data-value="{data}">{_text(shown)}</span>'


# --- the script, allowed by its hash --------------------------------------------------------------

SCRIPT = """
(function () {
  "use strict";
  var tip = document.getElementById("tip");
  function show(event) {
    var el = event.target.closest("[data-tip]");
    if (!el || !tip) { if (tip) { tip.hidden = true; } return; }
    tip.textContent = el.getAttribute("data-tip");
    tip.hidden = false;
    tip.style.left = (event.pageX + 14) + "px";
    tip.style.top = (event.pageY + 14) + "px";
  }
  document.addEventListener("mouseover", show);
  document.addEventListener("mousemove", function (event) {
    if (tip && !tip.hidden) { tip.style.left = (event.pageX + 14) + "px"; tip.style.top = (event.pageY + 14) + "px"; }
  });
  document.addEventListener("mouseout", function (event) {
    if (tip && !(event.relatedTarget && event.relatedTarget.closest && event.relatedTarget.closest("[data-tip]"))) { tip.hidden = true; }
  });

  var switcher = document.getElementById("breakdown-switch");
  if (switcher) {
    var choose = function (by) {
      document.querySelectorAll(".breakdown").forEach(function (part) { part.hidden = part.getAttribute("data-by") !== by; });
      switcher.querySelectorAll("button").forEach(function (b) { b.setAttribute("aria-pressed", String(b.getAttribute("data-by") === by)); });
    };
    switcher.hidden = false;
    switcher.addEventListener("click", function (event) {
      var b = event.target.closest("button[data-by]");
      if (b) { choose(b.getAttribute("data-by")); }
    });
    choose("tool");
  }

  var table = document.getElementById("sessions");
  if (table) {
    var sortBy = function (key, descending) {
      Array.prototype.forEach.call(table.tBodies, function (body) { sortBody(body, key, descending); });
      table.setAttribute("data-sorted-by", key);
      table.setAttribute("data-sorted-desc", String(descending));
      table.querySelectorAll("th[data-sort]").forEach(function (th) {
        th.setAttribute("aria-sort", th.getAttribute("data-sort") === key ? (descending ? "descending" : "ascending") : "none");
      });
    };
    var sortBody = function (body, key, descending) {
      var rows = Array.prototype.slice.call(body.querySelectorAll("tr.session"));
      var value = function (row) {
        var cell = row.querySelector('td[data-col="' + key + '"]');
        var raw = cell ? cell.getAttribute("data-value") : "";
        if (raw === null || raw === "") { return null; }
        var number = Number(raw);
        return isNaN(number) ? raw : number;
      };
      rows.sort(function (a, b) {
        var x = value(a), y = value(b);
        if (x === null || y === null) { return (x === null) - (y === null); }
        var order = x < y ? -1 : x > y ? 1 : 0;
        return descending ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    };
    table.querySelectorAll("th[data-sort] button").forEach(function (button) {
      button.addEventListener("click", function () {
        var key = button.parentNode.getAttribute("data-sort");
        var same = table.getAttribute("data-sorted-by") === key;
        sortBy(key, same ? table.getAttribute("data-sorted-desc") !== "true" : true);
      });
    });
  }
})();
"""

SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
# No network at all: nothing may be fetched, framed, posted or used as a base; only the inline
# style and this one script run.
CSP = (
    "default-src 'none'; "
    f"script-src 'sha256-{SCRIPT_HASH}'; "
    "style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'; frame-src 'none'; connect-src 'none'"
)

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1100px; padding: 1em 1.5em 3em; color: #222; background: #fff; }
h1 { font-size: 1.35em; margin: 0.2em 0; overflow-wrap: anywhere; }
h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.93em; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.level { display: inline-block; padding: 0.05em 0.6em; border-radius: 0.8em; color: #fff; font-weight: 600; white-space: nowrap; }
td.when span { white-space: nowrap; }
@media (max-width: 900px) { body { padding: 0.8em 0.8em 2em; } th, td { padding: 0.2em 0.35em; } }
.level-normal { background: #2e7d32; } .level-warning { background: #b58900; }
.level-autocompact { background: #a03cae; } .level-blocking { background: #c62828; } .level-unknown { background: #777; }
.meta { color: #555; overflow-wrap: anywhere; } .meta span.k { color: #888; }
.note { color: #666; font-size: 0.9em; }
.excerpt { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.85em; white-space: pre-wrap; word-break: break-all; max-width: 40em; }
svg { display: block; max-width: 100%; height: auto; font-size: 11px; }
svg text { fill: #444; }
.call { fill: #1f77b4; } .call:hover { fill: #000; }
.bar-row { display: grid; grid-template-columns: 14em 1fr 10em; gap: 0.6em; align-items: center; margin: 2px 0; }
.bar-row .name { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.bar { background: #1f77b4; height: 0.9em; min-width: 1px; }
.bar-track { background: #f1f1f1; }
#breakdown-switch button { font: inherit; padding: 0.2em 0.8em; border: 1px solid #bbb; background: #f7f7f7; cursor: pointer; }
#breakdown-switch button[aria-pressed="true"] { background: #1f77b4; color: #fff; border-color: #1f77b4; }
#tip { position: absolute; background: #222; color: #fff; padding: 0.3em 0.6em; border-radius: 4px; font-size: 0.85em; pointer-events: none; white-space: pre; z-index: 10; }
#recommendation { font-size: 1.05em; background: #f4f8fc; border-left: 4px solid #1f77b4; padding: 0.5em 0.8em; }
.legend span { display: inline-block; margin-right: 1em; }
.legend i { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.3em; vertical-align: -0.05em; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.92em; background: #eef2f6; padding: 0.1em 0.35em; border-radius: 3px; word-break: break-all; }
#recommendation code { display: block; margin-top: 0.4em; padding: 0.4em 0.6em; }
.window-bar { display: flex; height: 1.6em; border: 1px solid #bbb; margin: 0.5em 0; }
.window-bar span { display: block; height: 100%; }
.subject { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.85em; word-break: break-all; }
tr.project th { background: #f4f6f8; text-align: left; padding-top: 0.6em; }
.path { color: #666; font-size: 0.85em; word-break: break-all; }
.table-wrap { overflow-x: auto; }
th button { font: inherit; font-weight: 600; border: 0; background: none; cursor: pointer; padding: 0; text-decoration: underline dotted; }
"""


def _document(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{_text(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f'{body}\n<div id="tip" hidden></div>\n<script>{SCRIPT}</script>\n</body>\n</html>\n'
    )


# --- the timeline ----------------------------------------------------------------------------------


def downsample(calls: Sequence[CallRow], events: Iterable[TimelineEvent], limit: int = MAX_POINTS) -> list[CallRow]:
    """At most about `limit` of `calls` (in order) to draw: all of them when they fit; else, per
    bucket, its smallest and largest prompt, plus the first and last call and the calls on either
    side of every event (so a compaction's drop is drawn where it happened)."""
    if len(calls) <= limit:
        return list(calls)
    keep: set[int] = {0, len(calls) - 1}
    position = {call.turn: i for i, call in enumerate(calls)}
    for event in events:
        after = event.after_turn
        i = position.get(after, -1) if after is not None else -1
        keep.update(j for j in (i, i + 1) if 0 <= j < len(calls))
    buckets = max(1, limit // 2)
    size = len(calls) / buckets
    for b in range(buckets):
        start, stop = int(b * size), min(len(calls), max(int(b * size) + 1, int((b + 1) * size)))
        span = range(start, stop)
        keep.add(min(span, key=lambda i: calls[i].prompt_tokens))
        keep.add(max(span, key=lambda i: calls[i].prompt_tokens))
    return [calls[i] for i in sorted(keep)]


def _call_tip(call: CallRow) -> str:
    parts = [f"turn {call.turn:,}", f"{call.prompt_tokens:,} tokens"]
    if call.line is not None:
        parts.append(f"line {call.line:,}")
    if call.timestamp:
        parts.append(shortened(str(call.timestamp), LABEL_CHARACTERS))
    return " · ".join(parts)


def _timeline(report: SessionReport) -> str:
    main = [call for call in report.calls if call.main]
    events = report.events
    thresholds = report.warn.thresholds
    lines = [("warning", thresholds.warning), ("autocompact", thresholds.autocompact), ("blocking", thresholds.blocking)]
    drawn = downsample(main, events)
    width, height, left, right, top, bottom = 1000, 390, 76, 130, 20, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    ceiling = max([call.prompt_tokens for call in main] + [value for _, value in lines if value is not None] + [1]) * 1.05
    index = {call.turn: i for i, call in enumerate(main)}
    span = max(1, len(main) - 1)

    def x(i: float) -> float:
        return left + plot_w * (min(max(i, 0), span) / span if len(main) > 1 else 0.5)

    def y(tokens: float) -> float:
        return top + plot_h * (1 - tokens / ceiling)

    out = [
        f'<svg id="timeline" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="prompt tokens at each main API call" data-calls="{len(main)}" data-drawn="{len(drawn)}">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ddd"/>',
    ]
    for step in range(5):
        tick = ceiling / 1.05 * step / 4
        out.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{_short(tick)}</text>')
    for name, value in lines:
        if value is None:
            continue
        colour = LEVEL_COLOURS[name]
        out.append(
            f'<g class="threshold" data-level="{name}" data-tokens="{value}"><title>{name}: {value:,} tokens</title>'
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="{colour}" stroke-dasharray="6 4"/>'
            f'<text x="{left + plot_w + 6}" y="{y(value) + 4:.1f}" fill="{colour}">{name} {_short(value)}</text></g>'
        )
    for event in events:
        after = event.after_turn
        at = x(index[after] + 0.5) if after is not None and after in index else x(-1) if after is None else x(span)
        compact = event.kind == "compact_boundary"
        colour, stroke = (COMPACTION_COLOUR, ' stroke-width="2"') if compact else ("#6d6d6d", ' stroke-dasharray="2 3"')
        label = _text(event.label + (f" (−{event.tokens_saved:,} tokens)" if event.tokens_saved else ""))
        where = "" if event.line is None else event.line
        out.append(
            f'<g class="event {"compact" if compact else "stage"}" data-kind="{_text(event.kind)}" data-line="{where}"'
            f' data-after-turn="{"" if after is None else after}" data-tip="{label}"><title>{label}</title>'
            f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{top}" y2="{top + plot_h}" stroke="{colour}"{stroke}/>'
            # A few markers are named on the chart too; many would write over each other.
            + (f'<text x="{at + 3:.1f}" y="{top + 12}" fill="{colour}">{"compacted" if compact else _text(event.kind)}</text>' if len(events) <= 12 else "")
            + "</g>"
        )
    if drawn:
        path = " ".join(f"{x(index[c.turn]):.1f},{y(c.prompt_tokens):.1f}" for c in drawn)
        out.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" stroke-width="1" opacity="0.6"/>')
        radius = 3 if len(drawn) <= 300 else 2 if len(drawn) <= 1000 else 1.3
        for c in drawn:
            tip = _text(_call_tip(c))
            out.append(
                f'<circle class="call" cx="{x(index[c.turn]):.1f}" cy="{y(c.prompt_tokens):.1f}" r="{radius}" data-turn="{c.turn}"'
                f' data-line="{"" if c.line is None else c.line}" data-tokens="{c.prompt_tokens}" data-time="{_label(c.timestamp or "")}"'
                f' data-tip="{tip}"><title>{tip}</title></circle>'
            )
    first, last = (main[0].timestamp, main[-1].timestamp) if main else (None, None)
    out.append(f'<text x="{left}" y="{top + plot_h + 14}">{_text((first or "")[:19])}</text>')
    out.append(f'<text x="{left + plot_w}" y="{top + plot_h + 14}" text-anchor="end">{_text((last or "")[:19])}</text>')
    out.append(_axis_titles(left, top, plot_w, plot_h, height, "API calls on the main chain, in order", "prompt tokens"))
    out.append("</svg>")
    if not main:
        caption = '<p class="note">No API call on the main chain: nothing to draw.</p>'
    elif len(drawn) < len(main):
        caption = (
            f'<p class="note" id="downsampled" data-drawn="{len(drawn)}" data-calls="{len(main)}">Downsampled: {len(drawn):,} of {len(main):,} '
            "main calls drawn (each bucket's smallest and largest prompt, and the calls next to every event).</p>"
        )
    else:
        caption = (
            f'<p class="note">{len(main):,} API call{"s" if len(main) != 1 else ""} on the main chain; hover a point for its turn, tokens, line and time.</p>'
        )
    return "\n".join(out) + "\n" + caption + _events_table(events)


def _axis_titles(left: float, top: float, plot_w: float, plot_h: float, height: float, x_title: str, y_title: str) -> str:
    """A chart's axis titles: the x one centred under the plot, the y one turned along its left."""
    middle = top + plot_h / 2
    return (
        f'<text class="axis-title x" x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">{_text(x_title)}</text>'
        f'<text class="axis-title y" x="14" y="{middle:.1f}" text-anchor="middle" transform="rotate(-90 14 {middle:.1f})">{_text(y_title)}</text>'
    )


def _capped_table(table_id: str, header: str, rows: Sequence[str], more: str) -> str:
    """A table of at most TABLE_ROWS rows, and a note saying how many more there are (`more` names them)."""
    extra = f'<p class="note">and {len(rows) - TABLE_ROWS:,} {more}</p>' if len(rows) > TABLE_ROWS else ""
    return _table(table_id, header, "".join(rows[:TABLE_ROWS])) + extra


def _table(table_id: str, header: str, body: str) -> str:
    """A table (its header row's cells, its rows) in a box that scrolls sideways on its own when the
    window is narrow (.table-wrap), rather than the page."""
    return f'<div class="table-wrap"><table id="{table_id}"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table></div>'


def _events_table(events: Sequence[TimelineEvent]) -> str:
    if not events:
        return '<p class="note">No compaction or stage marker in this session.</p>'

    def kept(e: TimelineEvent) -> str:
        if e.facts is None:
            return '<td class="num"></td>'
        share = "" if not isinstance(e.recall, float) else f" ({rounded_percent(e.recall)})"
        return f'<td class="num kept" data-facts="{e.facts}" data-carried="{e.carried}">{e.carried}/{e.facts}{share}</td>'

    rows = [
        f'<tr class="event-row"><td>{_text(e.kind)}</td><td class="num">{_int(e.line)}</td><td class="num">{_int(e.after_turn)}</td>'
        f'<td class="num">{_int(e.tokens_saved)}</td>{kept(e)}<td>{_text(e.label)}</td></tr>'
        for e in events
    ]
    header = (
        '<th>event</th><th class="num">line</th><th class="num">after turn</th><th class="num">tokens saved</th><th class="num">facts kept</th><th>label</th>'
    )
    return _capped_table("events", header, rows, "more events") + _losses(events)


LOST_LISTED = 40  # lost facts listed under a compaction (audit --json has them all)


def _losses(events: Sequence[TimelineEvent]) -> str:
    """What each compaction lost, as `ctxpipe audit` finds it: one list per compaction that lost any."""
    parts = []
    for e in events:
        if not e.lost:
            continue
        items = "".join(f'<li class="lost" data-kind="{_text(f.kind)}">{_text(f.kind)}: {_text(f.text)}</li>' for f in e.lost[:LOST_LISTED])
        more = f'<li class="note">and {len(e.lost) - LOST_LISTED:,} more (ctxpipe audit --json)</li>' if len(e.lost) > LOST_LISTED else ""
        parts.append(
            f'<details class="losses" data-line="{_int(e.line)}"><summary>Lost by the compaction at line {_int(e.line)}: {len(e.lost)} fact(s)</summary><ul>{items}{more}</ul></details>'
        )
    return "".join(parts)


# --- what fills the window -------------------------------------------------------------------------


def _window(report: SessionReport) -> str:
    """The window as `/context` shows it: one bar of its parts, and their figures."""
    parts = report.window
    whole = sum(part.tokens for part in parts) or 1
    bar = "".join(
        f'<span class="window-part" data-part="{part.part}" data-tokens="{part.tokens}" style="width:{100 * part.tokens / whole:.3f}%;background:{WINDOW_COLOURS[part.part]}"'
        f' data-tip="{WINDOW_LABELS[part.part]}: {part.tokens:,} tokens ({part.percent:g}%)"></span>'
        for part in parts
        if part.tokens
    )
    rows = "".join(
        f'<tr data-part="{part.part}"><td><i style="display:inline-block;width:.8em;height:.8em;border:1px solid #bbb;background:{WINDOW_COLOURS[part.part]}"></i> '
        f'{WINDOW_LABELS[part.part]}</td><td class="num">{part.tokens:,}</td><td class="num">{part.percent:g}%</td></tr>'
        for part in parts
    )
    baseline = report.count.baseline
    where = f'<p class="note">System prompt and tools: the session baseline, {_text(baseline.note)}.</p>' if baseline else ""
    return (
        f'<div class="window-bar" id="window" role="img" aria-label="the context window by part">{bar}</div>'
        + _table("window-parts", '<th>part</th><th class="num">tokens</th><th class="num">of the window</th>', rows)
        + where
    )


def _breakdown(report: SessionReport) -> str:
    parts = []
    for by in BREAKDOWN_KINDS:
        rows: list[BreakdownRow] = sorted(report.breakdown.get(by, []), key=lambda r: -r.tokens)
        shown, rest = rows[:BREAKDOWN_ROWS], rows[BREAKDOWN_ROWS:]
        top = max([r.tokens for r in rows] + [1])
        body = "".join(
            f'<div class="bar-row" data-key="{_text(r.key)}" data-tokens="{r.tokens}" data-tip="{_text(r.key)}: {r.tokens:,} tokens, '
            f'{r.blocks:,} blocks">'
            f'<span class="name">{_text(r.key)}</span><span class="bar-track"><span class="bar" style="display:block;width:{100 * r.tokens / top:.2f}%">'
            f'</span></span><span class="num">{r.tokens:,} · {r.share:g}%</span></div>'
            for r in shown
        )
        if rest:
            body += f'<p class="note">and {len(rest):,} more, {sum(r.tokens for r in rest):,} tokens</p>'
        if not rows:
            body = '<p class="note">nothing</p>'
        parts.append(f'<div class="breakdown" data-by="{by}"><h3>by {by}</h3>{body}</div>')
    switch = (
        '<div id="breakdown-switch" hidden role="group" aria-label="breakdown">'
        + "".join(f'<button type="button" data-by="{by}" aria-pressed="false">by {by}</button>' for by in BREAKDOWN_KINDS)
        + "</div>"
    )
    return switch + "".join(parts)


def _largest(report: SessionReport) -> str:
    rows = report.largest[:TABLE_ROWS]
    if not rows:
        return '<p class="note">No entries in the active context.</p>'
    body = "".join(
        f'<tr class="largest" data-line="{"" if r.line is None else r.line}" data-tokens="{r.tokens}"><td class="num">{_int(r.line)}</td>'
        f'<td>{_text(r.role)}</td><td>{_text(r.block)}</td><td>{_text(r.tool or "")}</td><td class="subject">{_text(r.subject or "")}</td>'
        f'<td class="num">{r.tokens:,}</td><td class="excerpt">{_text(_cut(r.excerpt))}</td></tr>'
        for r in rows
    )
    return _table("largest", '<th class="num">line</th><th>role</th><th>block</th><th>tool</th><th>on</th><th class="num">tokens</th><th>excerpt</th>', body)


def _cut(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


# --- cost and cache --------------------------------------------------------------------------------


def _cost(report: SessionReport) -> str:
    cost = report.cost
    tokens, dollars = _parts(cost.tokens), _parts(cost.usd_by_part)
    parts = "".join(
        f'<tr data-part="{p}"><td><i style="display:inline-block;width:.8em;height:.8em;background:{PART_COLOURS[p]}"></i> {PART_LABELS[p]}</td>'
        f'<td class="num" id="tokens-{p}" data-value="{tokens[p]}">{tokens[p]:,}</td>'
        f'<td class="num" id="usd-{p}" data-value="{dollars[p]!r}">{_usd(dollars[p])}</td></tr>'
        for p in PART_NAMES
    )
    prices = "".join(
        f'<tr data-model="{_text(model)}"><td>{_text(model)}</td>' + "".join(f'<td class="num">${_parts(price)[p]:,.2f}</td>' for p in PART_NAMES) + "</tr>"
        for model, price in cost.prices_per_mtok.items()
    )
    totals = (
        f"<p>Total {_figure('cost-usd', '' if cost.usd is None else repr(cost.usd), 'unknown' if cost.usd is None else _usd(cost.usd))} over {_figure('api-calls', cost.api_calls, _int(cost.api_calls))} "
        f"API call{'s' if cost.api_calls != 1 else ''} · cache hit rate {_figure('cache-hit-rate', '' if cost.cache_hit_rate is None else repr(cost.cache_hit_rate), _rate(cost.cache_hit_rate))}"
        f" · cache rebuilt {_figure('cache-rebuilds', cost.cache_rebuilds, _int(cost.cache_rebuilds))} {'time' if cost.cache_rebuilds == 1 else 'times'}"
        + (f" · {cost.long_context_calls:,} calls priced at the long-context rate" if cost.long_context_calls else "")
        + (
            f' · <span id="unpriced">no known price for {", ".join(_label(model) for model in cost.unpriced_models)}</span> (the parts below are the priced calls)'
            if cost.unpriced_models
            else ""
        )
        + "</p>"
    )
    head = "".join(f'<th class="num">{PART_LABELS[p]}</th>' for p in PART_NAMES)
    return (
        totals
        + _table("cost-parts", '<th>part</th><th class="num">tokens</th><th class="num">USD</th>', parts)
        + "<h3>List prices, $ per million tokens</h3>"
        + _table("prices", f"<th>model</th>{head}", prices)
        + _cost_chart(report.calls, cost.prices_per_mtok)
        + _rate_chart(report.calls)
        + _rebuilt_table(report.calls)
    )


def _groups(calls: Sequence[CallRow]) -> list[list[CallRow]]:
    """Consecutive calls in at most MAX_BARS groups (one call each when they fit)."""
    if len(calls) <= MAX_BARS:
        return [[c] for c in calls]
    size = -(-len(calls) // MAX_BARS)
    return [list(calls[i : i + size]) for i in range(0, len(calls), size)]


def _cost_chart(calls: Sequence[CallRow], prices: Mapping[str, PricesReport]) -> str:
    if not calls:
        return '<p class="note">No billed API call.</p>'
    groups = _groups(calls)
    width, height, left, top, bottom = 1000, 240, 76, 14, 46
    plot_w, plot_h = width - left - 16, height - top - bottom
    sums = [dict(zip(PART_NAMES, (sum(column) for column in zip(*(_split(call, prices) for call in g))))) for g in groups]
    ceiling = max(sum(s.values()) for s in sums) * 1.05 or 1.0
    bar_w = plot_w / len(groups)
    out = [
        f'<svg id="cost-chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="cost per call"'
        f' data-bars="{len(groups)}" data-calls="{len(calls)}">',
        f'<line class="y-axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}" stroke="#888"/>',
        f'<text x="{left - 6}" y="{top + 8}" text-anchor="end">{_usd(ceiling / 1.05)}</text>',
        # Halfway up, a value a reader can measure the bars against.
        f'<line x1="{left}" x2="{left + plot_w}" y1="{top + plot_h / 2:.1f}" y2="{top + plot_h / 2:.1f}" stroke="#eee"/>',
        f'<text x="{left - 6}" y="{top + plot_h / 2 + 4:.1f}" text-anchor="end">{_usd(ceiling / 2)}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end">$0</text>',
    ]
    for i, (group, parts) in enumerate(zip(groups, sums)):
        base = float(top + plot_h)
        first, last = group[0], group[-1]
        total = sum((c.usd or 0.0 for c in group), 0.0)
        unpriced = sum(1 for c in group if c.usd is None)
        label = f"turn {first.turn:,}" if len(group) == 1 else f"turns {first.turn:,}–{last.turn:,}"
        tip = f"{label}: {_usd(total)}" + "".join(f"\n{PART_LABELS[p]} {_usd(parts[p])}" for p in PART_NAMES if parts[p])
        rebuilt = sum(1 for c in group if c.cache_rebuilt)
        if rebuilt:
            tip += f"\ncache rebuilt ({rebuilt:,})"
        if unpriced:
            tip += f"\n{unpriced:,} unpriced (model with no known price)"
        out.append(f'<g class="cost-bar" data-turn="{first.turn}" data-usd="{total!r}" data-tip="{_text(tip)}"><title>{_text(tip)}</title>')
        for p in PART_NAMES:
            h = plot_h * parts[p] / ceiling
            if h > 0:
                base -= h
                out.append(f'<rect x="{left + i * bar_w:.2f}" y="{base:.2f}" width="{max(bar_w - 0.3, 0.5):.2f}" height="{h:.2f}" fill="{PART_COLOURS[p]}"/>')
        if rebuilt:
            out.append(f'<path class="rebuilt" d="M{left + (i + 0.5) * bar_w:.1f},{base - 2:.1f} l-4,-7 h8 z" fill="{REBUILT_COLOUR}"/>')
        out.append("</g>")
    out.append(_turn_axis(groups, left, top + plot_h, plot_w))
    out.append(_axis_titles(left, top, plot_w, plot_h, height, "API call (turn, in file order)", "USD per bar"))
    out.append("</svg>")
    legend = "".join(f'<span><i style="background:{PART_COLOURS[p]}"></i>{PART_LABELS[p]}</span>' for p in PART_NAMES)
    per = "one bar per API call" if len(groups) == len(calls) else f"each bar sums {len(groups[0]):,} consecutive API calls ({len(calls):,} in all)"
    return (
        f'<h3>Cost per turn</h3><p class="legend">{legend}<span>▼ cache rebuilt</span></p>'
        + "\n".join(out)
        + f'<p class="note">{per}; every billed call, sidechains included.</p>'
    )


def _turn_axis(groups: Sequence[Sequence[CallRow]], left: float, base: float, plot_w: float) -> str:
    """An x axis of turns under bars or points drawn one per group: the line, and about six ticks
    labelled with the first turn of their group."""
    marks = sorted({round(k * (len(groups) - 1) / 5) for k in range(6)}) if len(groups) > 1 else [0]
    out = [f'<line class="x-axis" x1="{left}" x2="{left + plot_w}" y1="{base:.1f}" y2="{base:.1f}" stroke="#888"/>']
    for i in marks:
        x = left + plot_w * (i + 0.5) / len(groups)
        out.append(
            f'<g class="tick" data-turn="{groups[i][0].turn}"><line x1="{x:.1f}" x2="{x:.1f}" y1="{base:.1f}" y2="{base + 4:.1f}" stroke="#888"/>'
            f'<text x="{x:.1f}" y="{base + 15:.1f}" text-anchor="middle">{groups[i][0].turn:,}</text></g>'
        )
    return "".join(out)


# The relative prices of the parts when the call's model has none in the report (Anthropic's: cache
# writes 1.25x and 2x input, reads 0.1x, output 5x).
USUAL_RATIOS = {"input": 1.0, "cache_write_5m": 1.25, "cache_write_1h": 2.0, "cache_read": 0.1, "output": 5.0}


def _split(call: CallRow, prices: Mapping[str, PricesReport]) -> list[float]:
    """A call's dollars by part (PART_NAMES' order), in proportion to each part's tokens at the
    prices the report applied to its model (`prices`: the cost's prices_per_mtok, --prices FILE's
    when given), so the parts add up to the report's own figure for the call (its long-context rate
    included)."""
    tokens = _parts(call.tokens)
    price = prices.get(call.model) if call.model is not None else None
    rates = _parts(price) if price is not None else USUAL_RATIOS
    weights = [tokens[part] * rates[part] for part in PART_NAMES]
    total = sum(weights)
    usd = call.usd or 0.0  # a call with no known price draws no bar; its tooltip says so
    return [usd * w / total for w in weights] if total else [0.0] * len(weights)


def _rate_chart(calls: Sequence[CallRow]) -> str:
    rated = [c for c in calls if c.cache_hit_rate is not None]
    if not rated:
        return ""
    groups = _groups(rated)
    width, height, left, top, bottom = 1000, 180, 76, 10, 46
    plot_w, plot_h = width - left - 16, height - top - bottom
    out = [
        f'<svg id="hit-rate-chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="cache hit rate per call"'
        f' data-points="{len(groups)}">',
        f'<text x="{left - 6}" y="{top + 8}" text-anchor="end">100%</text><text x="{left - 6}" y="{top + plot_h}" text-anchor="end">0%</text>',
        _turn_axis(groups, left, top + plot_h, plot_w),
        _axis_titles(left, top, plot_w, plot_h, height, "API call (turn, in file order)", "cache hit rate"),
    ]
    points = []
    for i, group in enumerate(groups):
        prompt = sum(c.prompt_tokens for c in group)
        rate = sum(c.tokens.cache_read for c in group) / prompt if prompt else 0.0
        if len(group) == 1:
            rate = group[0].cache_hit_rate or 0.0
        px = left + plot_w * (i + 0.5) / len(groups)
        py = top + plot_h * (1 - rate)
        points.append(f"{px:.1f},{py:.1f}")
        rebuilt = any(c.cache_rebuilt for c in group)
        label = f"turn {group[0].turn:,}" if len(group) == 1 else f"turns {group[0].turn:,}–{group[-1].turn:,}"
        tip = _text(f"{label}: cache hit rate {_rate(rate)}" + (" · cache rebuilt" if rebuilt else ""))
        out.append(
            f'<circle class="rate{" rebuilt" if rebuilt else ""}" cx="{px:.1f}" cy="{py:.1f}" r="{3.5 if rebuilt else 1.6}"'
            f' fill="{REBUILT_COLOUR if rebuilt else "#2ca02c"}" data-turn="{group[0].turn}" data-tip="{tip}"><title>{tip}</title></circle>'
        )
    out.insert(4, f'<polyline points="{" ".join(points)}" fill="none" stroke="#2ca02c" stroke-width="1"/>')
    out.append("</svg>")
    return '<h3>Cache hit rate per call</h3><p class="note">Black points: calls that wrote most of their prompt to the cache again.</p>' + "\n".join(out)


def _rebuilt_table(calls: Sequence[CallRow]) -> str:
    rebuilt = [c for c in calls if c.cache_rebuilt]
    if not rebuilt:
        return '<p class="note">The cache was never rebuilt.</p>'
    rows = [
        f'<tr class="rebuilt-call" data-turn="{c.turn}"><td class="num">{c.turn:,}</td><td class="num">{_int(c.line)}</td>'
        f'<td>{_label(c.timestamp or "")}</td><td class="num">{c.prompt_tokens:,}</td>'
        f'<td class="num">{c.tokens.cache_write_5m + c.tokens.cache_write_1h:,}</td><td class="num">{_usd(c.usd)}</td></tr>'
        for c in rebuilt
    ]
    header = '<th class="num">turn</th><th class="num">line</th><th>time</th><th class="num">prompt</th><th class="num">written to cache</th><th class="num">USD</th>'
    return "<h3>Calls that rebuilt the cache</h3>" + _capped_table("rebuilt", header, rows, "more")


# --- the dry runs ----------------------------------------------------------------------------------


def _dry_runs(report: SessionReport) -> str:
    rows = []
    for run in report.dry_runs:
        cache = run.cache
        if cache is None:
            costs, verdict = '<td class="num">–</td><td class="num">–</td><td class="num">–</td>', "nothing to do"
        else:
            saving = cache.cost_keep_usd - cache.cost_clear_usd
            even = "–" if cache.break_even_turn is None else f"{cache.break_even_turn:,}"
            costs = (
                f'<td class="num">{_usd(cache.cost_keep_usd)}</td><td class="num">{_usd(cache.cost_clear_usd)}</td>'
                f'<td class="num" data-value="{saving!r}">{_usd(saving)} (even at turn {even})</td>'
            )
            verdict = ("yes: " if cache.clear else "no: ") + cache.reason  # the reason says "pays for itself…" or why not
        engine = f" ({_text(run.engine)})" if run.engine else ""
        rows.append(
            f'<tr class="dry-run" data-stage="{_text(run.stage)}" data-freed="{run.tokens_freed}" data-pays="{"" if cache is None else str(cache.clear).lower()}">'
            f'<td>{_text(run.stage)}{engine}</td><td class="num">{run.tokens_before:,}</td><td class="num">{run.tokens_after:,}</td>'
            f'<td class="num freed">{run.tokens_freed:,}</td>{costs}<td>{_text(verdict)}</td><td class="note">{_text(run.note)}</td></tr>'
        )
    if not rows:
        return '<p class="note">No stage dry run in this report.</p>'
    return (
        f'<p class="note">Nothing was written: each stage ran on a copy. Costs are over the next {_figure("horizon", report.horizon, _int(report.horizon))}'
        " turns: keeping the context as it is, against clearing it (one cache rebuild, then smaller prompts).</p>"
        + _table(
            "dry-runs",
            '<th>stage</th><th class="num">tokens now</th><th class="num">after</th><th class="num">freed</th>'
            '<th class="num">cost if kept</th><th class="num">cost if cleared</th><th class="num">saving</th><th>does the break pay?</th><th>note</th>',
            "".join(rows),
        )
    )


# --- the pages -------------------------------------------------------------------------------------


def _level_badge(level: str | None, element_id: str | None = None, kind: str | None = None) -> str:
    """warn's level as a badge; a compaction side-call's is "not a session", never a level."""
    ident = f' id="{element_id}"' if element_id else ""
    if kind == "compaction":
        return f'<span{ident} class="level level-unknown side-call" data-value="{SIDE_CALL}">{SIDE_CALL}</span>'
    known = level if level in LEVELS else "unknown"
    return f'<span{ident} class="level level-{known}" data-value="{_text(level or "")}">{_text(level or "–")}</span>'


def _advice(report: SessionReport) -> str:
    """The advice: why, then the command to copy (as code, on its own line)."""
    advice = report.advice
    command = f'<code id="command">{_text(advice.command)}</code>' if advice.command else ""
    stage = f' data-stage="{_text(advice.stage)}"' if advice.stage else ' data-stage=""'
    return f'<div id="recommendation"{stage}><span id="why">{_text(advice.why)}</span>{command}</div>'


def session_page(report: SessionReport, *, title: str | None = None) -> str:
    """One session's page: header, timeline, what fills the window, cost and cache, the dry runs."""
    count, warn = report.count, report.warn
    percent = count.percent_of_window
    side_call = report.kind == "compaction"
    left = (
        f" · {warn.percent_left}% left before {'autocompact' if warn.thresholds.autocompact is not None else 'blocking'}"
        if not side_call
        else f' · <span id="side-call">{_text(COMPACTION_NOTE)}</span>'
    )
    heading = title or report.title or report.file
    header = (
        f'<h1 id="title">{_text(heading)}</h1>'
        f'<p class="meta"><span class="k">file</span> <span id="file">{_text(report.file)}</span> · <span class="k">model</span> '
        f'<span id="model">{_label(report.model or "unknown")}</span> · <span class="k">format</span> {_text(report.format)}'
        + (f" · {'compaction side-call' if side_call else _text(report.kind)}" if report.kind else "")
        + (f' · <span class="k">session</span> {_label(report.session_id)}' if report.session_id else "")
        + "</p>"
        f'<p class="meta">{_text(report.first_activity or "?")} → {_text(report.last_activity or "?")}</p>'
        f'<p style="font-size:1.2em">{_level_badge(warn.level, "level", report.kind)} '
        f"{_figure('total-tokens', count.tokens, _int(count.tokens))} / {_figure('context-window', count.context_window, _int(count.context_window))}"
        f" tokens · {_figure('percent', '' if percent is None else percent, '–' if percent is None else f'{percent}%')} of the window{left}</p>"
    )
    body = (
        f"{header}\n<h2>What to do now</h2>\n{_advice(report)}\n"
        f"<h2>Timeline: prompt size at each API call</h2>\n{_timeline(report)}\n"
        f"<h2>What fills the window now</h2>\n{_window(report)}\n<h3>The messages by tool, role or block (each block's estimate)</h3>\n{_breakdown(report)}\n"
        f"<h3>Largest entries</h3>\n{_largest(report)}\n"
        f"<h2>Cost and cache</h2>\n{_cost(report)}\n"
        f"<h2>What each stage would do now</h2>\n{_dry_runs(report)}\n"
        '<p class="note">Made by ctxpipe report. This page loads nothing from the network.</p>'
    )
    return _document(f"ctxpipe report: {title or report.file}", body)


def _page_href(page: str) -> str:
    """A relative link to a session page: every character that could make it absolute or a scheme
    (':' of `javascript:`, a leading '/') is percent-encoded, so it only ever names a file here."""
    path = page.lstrip("/")
    try:  # a file name that is not UTF-8 reaches us surrogate-escaped: its link is its own bytes
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate of another kind: no file has it, any escape will do
        raw = path.encode("utf-8", "backslashreplace")
    return "./" + quote(raw, safe="/")


def _newest_first(rows: Iterable[IndexRow]) -> list[IndexRow]:
    """Newest activity first, rows with none last: the order the script's default gives."""
    rows = list(rows)
    ordered = sorted((r for r in rows if r.last_activity is not None), key=lambda r: r.last_activity or "", reverse=True)
    return ordered + [r for r in rows if r.last_activity is None]


def _total(rows: Sequence[IndexRow]) -> tuple[float, int]:
    """(dollars of the rows with a price, how many rows have none)."""
    return sum(r.usd for r in rows if r.usd is not None), sum(1 for r in rows if r.usd is None)


def _index_row(row: IndexRow, errors: bool) -> str:
    name = _text(row.name)
    shown = _text(row.title or row.name)
    link = f'<a href="{_text(_page_href(row.page))}">{shown}</a>' if row.page else shown
    under = f'<div class="path">{name}</div>' if row.title else ""
    side_call = row.kind == "compaction"
    level_rank = LEVELS.index(row.level) if row.level in LEVELS and not side_call else ""
    pct = row.percent_of_window
    return (
        f'<tr class="session{" side-call" if side_call else ""}"><td data-col="file" data-value="{name}">{link}{under}</td><td>{_label(row.model or "")}</td>'
        f'<td class="num" data-col="tokens" data-value="{"" if row.tokens is None else row.tokens}">{_int(row.tokens)}</td>'
        f'<td class="num" data-col="percent" data-value="{"" if pct is None else pct}">{"–" if pct is None else f"{pct}%"}</td>'
        f'<td data-col="level" data-value="{level_rank}">{_level_badge(row.level, kind=row.kind) if row.level else "–"}</td>'
        f'<td class="num" data-col="usd" data-value="{"" if row.usd is None else repr(row.usd)}">{_usd(row.usd)}</td>'
        f'<td class="when" data-col="last_activity" data-value="{_text(row.last_activity or "")}" title="{_text(row.last_activity or "")}">{_minute(row.last_activity)}</td>'
        + (f'<td class="error">{_text(row.error or "")}</td>' if errors else "")
        + "</tr>"
    )


def _minute(stamp: str | None) -> str:
    """An ISO time as far as the minute, for a column (the whole one is its title and sort value), as
    HTML: the date and the time each kept whole, the line free to break between them in a narrow window."""
    if not stamp:
        return "–"
    if re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d", stamp):
        return f"<span>{_text(stamp[:10])}</span> <span>{_text(stamp[11:16])}</span>"
    return _text(stamp)


def _cost_of(rows: Sequence[IndexRow]) -> str:
    usd, unpriced = _total(rows)
    return _usd(usd) + (f" ({unpriced:,} without a price)" if unpriced else "")


def index_page(rows: Sequence[IndexRow], *, title: str) -> str:
    """A folder's sessions as one sortable table, grouped by project (the project with the newest
    activity first), newest activity first in each, each linking to its page, with the total cost."""
    failed = sum(1 for r in rows if r.error)  # the error column only when a file has one: a narrow window keeps the figures
    projects: dict[str, list[IndexRow]] = {}
    for row in _newest_first(rows):
        projects.setdefault(row.project, []).append(row)
    groups = []
    for project, members in projects.items():
        heading = (
            f'<tr class="project" data-project="{_text(project)}"><th colspan="{8 if failed else 7}">{_text(project or "files given by name")} · '
            f"{len(members):,} session{'s' if len(members) != 1 else ''} · {_cost_of(members)}</th></tr>"
            if len(projects) > 1 or project
            else ""
        )
        groups.append(f"<tbody>{heading}{''.join(_index_row(row, bool(failed)) for row in members)}</tbody>")

    def sortable(key: str, label: str, cls: str = "") -> str:
        aria = "descending" if key == "last_activity" else "none"
        return f'<th{cls} data-sort="{key}" aria-sort="{aria}"><button type="button">{label}</button></th>'

    head = (
        "<tr><th>session</th><th>model</th>"
        + sortable("tokens", "tokens", ' class="num"')
        + sortable("percent", "% of window", ' class="num"')
        + sortable("level", "level")
        + sortable("usd", "cost", ' class="num"')
        + sortable("last_activity", "last activity")
        + ("<th>error</th>" if failed else "")
        + "</tr>"
    )
    usd, unpriced = _total(rows)
    body = (
        f"<h1>{_text(title)}</h1>"
        f'<p class="meta"><span id="session-count" data-value="{len(rows)}">{len(rows):,}</span> session{"s" if len(rows) != 1 else ""}'
        f' in <span id="project-count" data-value="{len(projects)}">{len(projects):,}</span> project{"s" if len(projects) != 1 else ""}'
        + (f", {failed:,} without a page" if failed else "")
        + f" · total cost {_figure('total-usd', repr(usd), _usd(usd))}"
        + (f" ({unpriced:,} session{'s' if unpriced != 1 else ''} without a price)" if unpriced else "")
        + ". Click a header to sort (within each project).</p>"
        f'<div class="table-wrap"><table id="sessions" data-sorted-by="last_activity" data-sorted-desc="true"><thead>{head}</thead>{"".join(groups)}</table></div>'
    )
    return _document(title, body)
