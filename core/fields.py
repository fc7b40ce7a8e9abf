"""Typed reads of the known fields of an untrusted line.

A transcript may hold anything where a known field should be: a number for `model`, a list for
`timestamp`, "NaN" or -13,909 for a usage figure, an object for a tool id, a value nested a
thousand levels deep. The rule, kept here once: a known field whose value has the wrong type reads
as absent (a usage figure as 0). The line itself is not touched: a stage that does not rewrite it
writes its bytes back as they came.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from .limits import MAX_COUNT

# Known block fields the core reads as text, and those it reads as an object.
BLOCK_TEXT_FIELDS = ("type", "id", "tool_use_id", "name", "text", "thinking", "signature", "data")
BLOCK_OBJECT_FIELDS = ("input",)
_TEXT_FIELDS, _OBJECT_FIELDS = frozenset(BLOCK_TEXT_FIELDS), frozenset(BLOCK_OBJECT_FIELDS)
# orjson parses at most this many levels; a value from a parsed line is never deeper.
MAX_DEPTH = 1024


def text(mapping: Mapping[str, Any], key: str) -> str | None:
    """The field when it is a string, else None."""
    value = mapping.get(key)
    return value if isinstance(value, str) else None


def count(mapping: Mapping[str, Any], key: str) -> int:
    """A recorded count (tokens): a non-negative number below MAX_COUNT, else 0."""
    value = mapping.get(key)
    if type(value) is int:  # what nearly every line holds, told at once
        return value if 0 <= value < MAX_COUNT else 0
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < MAX_COUNT:
        return int(value)  # NaN fails the comparison above
    return 0


def moment(value: Any) -> datetime | None:
    """An ISO 8601 time (a line's `timestamp`) in UTC (a time without a zone is taken as UTC);
    None when it is not one, or lies beyond what a datetime holds once in UTC."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return parsed.astimezone(timezone.utc) if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    except (ValueError, OverflowError):
        return None


def one_ms_after(when: datetime) -> datetime:
    """A millisecond later; the last moment a datetime holds stays itself (a hostile time may be it)."""
    return when + timedelta(milliseconds=1) if when < datetime.max.replace(tzinfo=timezone.utc) - timedelta(milliseconds=1) else when


def times_from(start: datetime | None) -> Iterator[str]:
    """Times as iso() writes them, one millisecond apart from `start` (now, when None): the stamps of
    lines a writer appends or builds."""
    current = start or datetime.now(timezone.utc)
    while True:
        yield iso(current)
        current = one_ms_after(current)


def aware(when: datetime | None) -> datetime:
    """`when` in UTC, or now when None; a datetime without a zone (datetime.now(), as a library
    caller may pass) is the local time, as Python takes one."""
    return datetime.now(timezone.utc) if when is None else when.astimezone(timezone.utc)


def iso(when: datetime) -> str:
    """A time as Claude Code writes one: UTC, milliseconds, a Z (the year always four digits)."""
    when = when.astimezone(timezone.utc)
    return f"{when.year:04d}-{when:%m-%dT%H:%M:%S}.{when.microsecond // 1000:03d}Z"


def read_block(value: Any) -> dict[str, Any] | None:
    """A content block as the core reads it: None when it is not an object; a copy without the
    known fields that have the wrong type (the block itself when none has), so that ids compare
    and hash as strings and a tool input is an object."""
    if not isinstance(value, dict):
        return None
    # The block's own few fields are walked (not every known name looked up), in a plain loop that
    # stops at the first wrong one: this runs on every block read, and nearly every block is right.
    for key, item in value.items():
        if (key in _TEXT_FIELDS and not isinstance(item, str)) or (key in _OBJECT_FIELDS and not isinstance(item, dict)):
            return _without_wrong_fields(value)
    return value


def _without_wrong_fields(value: dict[str, Any]) -> dict[str, Any]:
    wrong = {
        key for key, item in value.items() if (key in _TEXT_FIELDS and not isinstance(item, str)) or (key in _OBJECT_FIELDS and not isinstance(item, dict))
    }
    return {key: item for key, item in value.items() if key not in wrong}


def read_blocks(content: Any) -> tuple[list[int], list[dict[str, Any]]]:
    """The index in the content list and the block (read_block) of each readable block, as two
    lists; a plain string is one text block at index -1. One walk, for the readers that build
    messages from every line (a line may hold a hundred thousand blocks)."""
    if isinstance(content, str):
        return [-1], [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return [], []
    indices: list[int] = []
    blocks: list[dict[str, Any]] = []
    for index, value in enumerate(content):
        if not isinstance(value, dict):
            continue
        # read_block, inline: a function call per block is most of the walk's time.
        for key, item in value.items():
            if (key in _TEXT_FIELDS and not isinstance(item, str)) or (key in _OBJECT_FIELDS and not isinstance(item, dict)):
                value = _without_wrong_fields(value)
                break
        indices.append(index)
        blocks.append(value)
    return indices, blocks


@contextmanager
def depth_headroom() -> Iterator[None]:
    """Room on the interpreter's stack for a C routine (the standard library's JSON encoder, a
    comparison) to walk a value nested MAX_DEPTH levels deep, as any parsed line may be."""
    before = sys.getrecursionlimit()
    wanted = MAX_DEPTH * 2 + 1000
    if before >= wanted:
        yield
        return
    sys.setrecursionlimit(wanted)
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def rounded_down(share: float, places: int = 4) -> float:
    """`share` cut to `places` decimals: a figure never says more than was counted (0.99996 of the
    facts is not 1.0 of them)."""
    scale: int = 10**places
    return math.floor(share * scale) / scale


def rounded_percent(share: float) -> str:
    """A share as a percentage with one decimal, rounded down: 3 of 7 is "42.8%", 1.0 is "100%"."""
    return f"{math.floor(share * 1000) / 10:g}%"
