"""Pictures of a session's context size over time: a terminal chart and an SVG file."""

from __future__ import annotations

from html import escape
from typing import Any

from ..core.reports import TimelinePoint
from .terminal import shown

BARS = " ▁▂▃▄▅▆▇█"
HEIGHT = 12


def _lines(result: Any) -> list[tuple[str, int, str]]:
    levels = result.thresholds
    found = [("warning", levels.warning, "yellow"), ("blocking", levels.blocking, "red")]
    if levels.autocompact is not None:
        found.insert(1, ("autocompact", levels.autocompact, "magenta"))
    return found


def _short(tokens: float) -> str:
    return f"{tokens / 1_000_000:.2f}M" if tokens >= 1_000_000 else f"{tokens / 1000:.0f}K"


def _columns(values: list[int], width: int) -> list[int]:
    """At most `width` columns: each the largest value of its share of the calls."""
    if len(values) <= width:
        return values
    step = len(values) / width
    return [max(values[int(i * step) : max(int(i * step) + 1, int((i + 1) * step))]) for i in range(width)]


def timeline_text(result: Any, width: int, name: str | None = None, ellipsis: str = "…") -> Any:
    """A bar chart of the prompt size at each API call, with the threshold lines drawn across, in
    `width` cells (the threshold labels beside it included). `name`: the file as the table names it."""
    from rich.text import Text

    from .tables import NAME_MIN, shortened

    points: list[TimelinePoint] = result.timeline or []
    text = Text()
    title = shown(result.file if name is None else name)
    if not points:
        text.append(f"{shortened(title, max(NAME_MIN, width - 34), ellipsis)}: no recorded API usage to chart\n", style="dim")
        return text
    lines = _lines(result)
    top = max(max(p.tokens for p in points), lines[-1][1]) * 1.05
    rows = HEIGHT
    # Several thresholds can fall in one row (on a 1M window they are 10K apart): name them all.
    bands = [[line for line in lines if (row - 1) / rows * top <= line[1] < row / rows * top] for row in range(rows, 0, -1)]
    labels = max(sum(len(f" {label} {_short(value)}") for label, value, _ in here) for here in bands)
    # The bars take what the axis (8 cells) and the longest row of labels leave: no label wraps.
    columns = _columns([p.tokens for p in points], max(10, width - 8 - labels))
    heading = f": context size at each of {len(points)} API calls"
    text.append(f"{shortened(title, max(NAME_MIN, width - len(heading)), ellipsis)}{heading}\n", style="bold")
    for row, here in zip(range(rows, 0, -1), bands):
        low, high = (row - 1) / rows * top, row / rows * top
        text.append(f"{_short(high):>6} │", style="dim")
        for value in columns:
            if value >= high:
                text.append("█", style="cyan")
            elif value > low:
                text.append(BARS[max(1, round((value - low) / (high - low) * 8))], style="cyan")
            elif here:
                text.append("─", style=here[-1][2])
            else:
                text.append(" ")
        for label, value, style in here:
            text.append(f" {label} {_short(value)}", style=style)
        text.append("\n")
    text.append(" " * 7 + "└" + "─" * len(columns) + "\n", style="dim")
    # Timestamps come from the transcript: escaped before they are cut to 16 characters.
    first, last = (shown(point.timestamp or "") for point in (points[0], points[-1]))
    text.append(f"{' ' * 8}{first[:16]}{' ' * max(1, len(columns) - 32)}{last[:16]}\n", style="dim")
    return text


def timeline_svg(result: Any, width: int = 900, height: int = 360) -> str:
    """The same chart as a standalone SVG document."""
    points: list[TimelinePoint] = result.timeline or []
    left, right, top_pad, bottom = 70, 150, 40, 40
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    lines = _lines(result)
    ceiling = max([p.tokens for p in points] + [lines[-1][1]]) * 1.05 or 1

    def x(index: int) -> float:
        return left + (plot_w * index / max(1, len(points) - 1))

    def y(tokens: float) -> float:
        return top_pad + plot_h * (1 - tokens / ceiling)

    colors = {"yellow": "#d4a017", "magenta": "#b03aa3", "red": "#d62728"}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="14" font-weight="bold">{escape(shown(result.file))}: context size at each API call</text>',
        f'<line x1="{left}" y1="{top_pad + plot_h}" x2="{left + plot_w}" y2="{top_pad + plot_h}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + plot_h}" stroke="#888"/>',
    ]
    for fraction in (0, 0.25, 0.5, 0.75, 1):
        value = ceiling * fraction
        parts.append(f'<text x="{left - 8}" y="{y(value) + 4:.1f}" text-anchor="end" fill="#555">{_short(value)}</text>')
    for name, value, color in lines:
        parts.append(f'<line x1="{left}" y1="{y(value):.1f}" x2="{left + plot_w}" y2="{y(value):.1f}" stroke="{colors[color]}" stroke-dasharray="6 4"/>')
        parts.append(f'<text x="{left + plot_w + 6}" y="{y(value) + 4:.1f}" fill="{colors[color]}">{name} {_short(value)}</text>')
    for index, point in enumerate(points):
        if point.compacted_after:
            parts.append(f'<line x1="{x(index):.1f}" y1="{top_pad}" x2="{x(index):.1f}" y2="{top_pad + plot_h}" stroke="#999" stroke-dasharray="2 3"/>')
    if points:
        path = " ".join(f"{x(i):.1f},{y(p.tokens):.1f}" for i, p in enumerate(points))
        parts.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
        for i, p in enumerate(points):
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(p.tokens):.1f}" r="2.5" fill="#1f77b4"><title>line {p.line}: {p.tokens:,} tokens</title></circle>')
    parts.append(f'<text x="{left}" y="{height - 12}" fill="#555">{len(points)} API calls</text>')
    parts.append("</svg>\n")
    return "\n".join(parts)
