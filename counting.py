"""Counting files: the I/O around core.count, shared by `count`, `warn` and the library.

A file is memory-mapped and, in the default mode, read from its end back to the start of the
active context only; `full` parses every line (for breakdowns, the largest entries, timelines).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .core.budget import ONE_MILLION, BudgetSettings, Thresholds, model_window, thresholds, truthy
from .core.count import CALIBRATION_WINDOW, UNCALIBRATED, Calibration, ContextCount, Estimates, calibrate, count_context, usage_prompt
from .core.errors import InputError
from .core.jsonl import Entry, OnError, ReadStats, iter_buffer_entries, iter_entries
from .core.model import Message
from .core.tokens import TextCounter, block_texts, counter_named, estimate_each
from .formats import claim, detect, get

DEFAULT_TOKENIZER = "calibrated"
SMALL_FILE = 64 << 10  # bytes: read whole even when only the end is needed
CALIBRATED_BASE = "pieces"


@dataclass(frozen=True)
class CountOptions:
    tokenizer: str = DEFAULT_TOKENIZER
    calibrate: bool | None = None  # None: only the "calibrated" tokenizer calibrates
    as_claude_code: bool = False
    model: str | None = None
    window: int | None = None
    format: str | None = None
    on_error: OnError = "fail"
    by: str | None = None  # role | block | tool
    top: int = 0
    timeline: bool = False
    whole: bool = False  # parse every line, for an exact message count
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    threads: int = 1  # tokenizer threads (tiktoken only)

    @property
    def full(self) -> bool:
        return bool(self.whole or self.by or self.top or self.timeline)

    def counter(self) -> TextCounter:
        if self.as_claude_code:
            return counter_named("rough")
        return counter_named(CALIBRATED_BASE if self.tokenizer == DEFAULT_TOKENIZER else self.tokenizer, self.threads)

    @property
    def calibrating(self) -> bool:
        if self.as_claude_code:
            return False
        return self.tokenizer == DEFAULT_TOKENIZER if self.calibrate is None else self.calibrate


@dataclass
class FileCount:
    file: str
    format: str
    kind: str | None
    count: ContextCount
    window: int
    window_reason: str
    thresholds: Thresholds
    tokenizer: str
    anchor_uuid: str | None
    skipped_lines: int = 0
    breakdown: list[dict[str, Any]] | None = None
    top: list[dict[str, Any]] | None = None
    timeline: list[dict[str, Any]] | None = None

    def as_dict(self) -> dict[str, Any]:
        count = self.count
        data: dict[str, Any] = {
            "file": self.file,
            "format": self.format,
            "kind": self.kind,
            "model": count.model,
            "context_window": self.window,
            "tokens": count.tokens,
            "exact_tokens": count.exact_tokens,
            "estimated_tokens": count.estimated_tokens,
            "messages": count.messages,
            "estimated_messages": count.estimated_messages,
            "percent_of_window": round(100 * count.tokens / self.window, 1) if self.window else None,
            "tokenizer": self.tokenizer,
            "calibration": count.calibration.as_dict(),
            "anchor_uuid": self.anchor_uuid,
            "window_source": self.window_reason,
            "adjustments": [adjustment.as_dict() for adjustment in count.adjustments],
            "skipped_lines": self.skipped_lines,
        }
        for key in ("breakdown", "top", "timeline"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data


@contextlib.contextmanager
def mapped(path: str | None) -> Iterator[Any]:
    """The whole input as a bytes-like object: an mmap for files, bytes for stdin."""
    if path in (None, "-"):
        yield sys.stdin.buffer.read()
        return
    target = Path(path)
    if target.is_dir():
        raise InputError(str(path), None, "is a directory, expected a transcript file")
    try:
        handle = open(target, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise InputError(str(path), None, "no such file") from None
    except OSError as exc:
        raise InputError(str(path), None, exc.strerror or str(exc)) from None
    with handle:
        if os.fstat(handle.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
            yield buffer


def _first_line_format(buffer: Any, source: str) -> str:
    """Detect the format from the first parseable lines without reading the rest."""
    head_end = 0
    sample: list[Entry] = []
    for _ in range(50):
        next_end = buffer.find(b"\n", head_end)
        chunk = bytes(buffer[head_end : len(buffer) if next_end < 0 else next_end + 1])
        if not chunk:
            break
        sample += list(iter_entries([chunk], source, "skip"))
        if sample and claim(sample[-1].obj) is not None:
            break
        if next_end < 0:
            break
        head_end = next_end + 1
    return detect(sample, source).name


def _window(options: CountOptions, model: str | None, largest_prompt: int, budget: BudgetSettings) -> tuple[int, str]:
    if options.window:
        return options.window, "--window"
    window, reason = model_window(model, truthy(budget.disable_1m))
    if window < ONE_MILLION and largest_prompt > window:
        return ONE_MILLION, f"a recorded prompt of {largest_prompt:,} tokens does not fit {window:,}"
    return window, reason


def count_buffer(buffer: Any, source: str, options: CountOptions, kind: str | None = None) -> FileCount:
    """Count one transcript held in `buffer` (bytes or an mmap)."""
    format_name = options.format or _first_line_format(buffer, source)
    transcript_format = get(format_name)
    stats = ReadStats()

    def read(responses: int) -> tuple[list[Entry], bool]:
        if options.full or len(buffer) <= SMALL_FILE:
            # A small file costs little to read whole, and gets an exact message count for it.
            return list(iter_buffer_entries(buffer, source, options.on_error, stats)), True
        return transcript_format.read_context(buffer, source, options.on_error, stats, responses)

    # First only the last response: when nothing follows it there is nothing to estimate, and the
    # calibration (the costly part) is not needed at all.
    entries, complete = read(1)
    messages = transcript_format.messages(entries)
    counter = options.counter()
    estimates = Estimates(messages, counter)
    counted = count_context(estimates, UNCALIBRATED, transcript_format.markers(entries), as_claude_code=options.as_claude_code)
    calibration = UNCALIBRATED
    if options.calibrating and counted.estimated_messages > 0:
        if not complete:
            # The calibration window, and the response before it for its first gap.
            stats.skipped, stats.problems = 0, []
            entries, complete = read(CALIBRATION_WINDOW + 1)
            messages = transcript_format.messages(entries)
            estimates = Estimates(messages, counter)
        calibration = calibrate(estimates)
        counted = count_context(estimates, calibration, transcript_format.markers(entries), as_claude_code=options.as_claude_code)
    model = options.model or counted.model
    counted.model = model
    largest = max((usage_prompt(m.usage) for m in messages if m.usage), default=0)
    window, reason = _window(options, model, largest, options.budget)
    levels = thresholds(model, options.budget, window, reason, window_flag=bool(options.window))
    anchor_uuid = None
    if counted.anchor is not None and messages[counted.anchor].entries:
        anchor_uuid = entries[messages[counted.anchor].entries[-1]].obj.get("uuid")
    if not complete:
        counted.messages = None
    result = FileCount(source, format_name, kind, counted, levels.window, reason, levels, _tokenizer_label(options, calibration), anchor_uuid, stats.skipped)
    if options.by or options.top:
        # The views price every block, so they want the fit even when the count did not need it.
        views = calibrate(estimates) if options.calibrating and calibration is UNCALIBRATED else calibration
        if options.by:
            result.breakdown = breakdown(messages, estimates, views, options.by)
        if options.top:
            result.top = largest_entries(messages, entries, counter, views, options.top)
    if options.timeline:
        result.timeline = timeline(transcript_format.messages(entries, history=True), entries)
    return result


def _tokenizer_label(options: CountOptions, calibration: Calibration) -> str:
    if options.as_claude_code:
        return "rough (as Claude Code)"
    base = options.counter().name
    if not options.calibrating:
        return base
    if calibration is UNCALIBRATED:
        return f"{base} calibrated (not needed: nothing follows the last response)"
    return f"{base} calibrated ({calibration.source})"


def count_file(path: str | None, options: CountOptions = CountOptions(), kind: str | None = None, shown: str | None = None) -> FileCount:
    source = shown or ("-" if path in (None, "-") else str(path))
    with mapped(path) as buffer:
        return count_buffer(buffer, source, options, kind)


def _block_key(block: dict[str, Any], by: str, tool_names: dict[str, str], role: str) -> str:
    kind = str(block.get("type"))
    if by == "role":
        return "tool results" if kind == "tool_result" else role
    if by == "block":
        return kind
    if kind == "tool_use":
        return str(block.get("name"))
    if kind == "tool_result":
        return tool_names.get(str(block.get("tool_use_id")), "(unknown tool)")
    return "(conversation)"


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
    return {
        str(block.get("id")): str(block.get("name"))
        for message in messages
        for block in message.content
        if block.get("type") == "tool_use"
    }


def _block_tokens(messages: Sequence[Message], counter: TextCounter, calibration: Calibration) -> list[int]:
    """Calibrated tokens of every block of `messages`, in order (one tokenizer batch)."""
    blocks = [block for message in messages for block in message.content]
    flat = [block_texts(block)[1] for block in blocks]
    return [round(calibration.slope * (tokens - image)) + image for tokens, image in zip(estimate_each(blocks, counter), flat)]


def breakdown(messages: Sequence[Message], estimates: Estimates, calibration: Calibration, by: str) -> list[dict[str, Any]]:
    """Estimated tokens of the active context grouped by role, block type or tool, largest first."""
    names = _tool_names(messages)
    totals: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    tokens = iter(_block_tokens(messages, estimates.counter, calibration))
    for message in messages:
        for block in message.content:
            key = _block_key(block, by, names, message.role)
            totals[key] += next(tokens)
            counts[key] += 1
    grand = sum(totals.values()) or 1
    return [
        {"key": key, "tokens": tokens, "blocks": counts[key], "share": round(100 * tokens / grand, 1)}
        for key, tokens in sorted(totals.items(), key=lambda item: -item[1])
    ]


def largest_entries(messages: Sequence[Message], entries: Sequence[Entry], counter: TextCounter, calibration: Calibration, limit: int) -> list[dict[str, Any]]:
    """The `limit` lines of the active context that cost the most, with what they hold."""
    names = _tool_names(messages)
    rows: list[dict[str, Any]] = []
    tokens = iter(_block_tokens(messages, counter, calibration))
    for message in messages:
        per_line = len(message.entries) == len(message.content)
        for number, block in enumerate(message.content):
            position = message.entries[number] if per_line else message.entries[0]
            kind = str(block.get("type"))
            tool = block.get("name") if kind == "tool_use" else names.get(str(block.get("tool_use_id"))) if kind == "tool_result" else None
            rows.append({
                "line": entries[position].line or None,
                "role": message.role,
                "block": kind,
                "tool": tool,
                "tokens": next(tokens),
            })
    rows.sort(key=lambda row: -row["tokens"])
    return rows[:limit]


def timeline(messages: Sequence[Message], entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """The prompt size of every recorded API call on the main chain, history included."""
    points = []
    for message in messages:
        if message.role == "assistant" and message.usage and message.model != "<synthetic>":
            last = entries[message.entries[-1]]
            points.append({
                "line": last.line or None,
                "timestamp": last.obj.get("timestamp"),
                "tokens": usage_prompt(message.usage),
                "output_tokens": int(message.usage.get("output_tokens") or 0),
            })
        elif message.compact_summary and points:
            points[-1]["compacted_after"] = True
    return points
