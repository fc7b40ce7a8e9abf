"""A session's title, chosen as Claude Code chooses the one its `/resume` picker shows.

Claude Code 2.1.332 shows `customTitle ?? aiTitle ?? summary ?? firstPrompt`: the title set with
`/rename` (a `custom-title` line), else the one a model wrote (`ai-title`), else the summary of an
older session (`summary`, what 1.0.x wrote), else the first meaningful prompt. Each of the three
title types is "last wins" in its entry registry, so the last line of a type is the one that counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from .jsonl import BOM

# (entry type, field holding the title), in the order Claude Code prefers them.
TITLE_ENTRIES: tuple[tuple[str, str], ...] = (("custom-title", "customTitle"), ("ai-title", "aiTitle"), ("summary", "summary"))
# A prompt is not a title when it is what the harness wrote: a command's echo, its output, a caveat.
HARNESS_PREFIXES = ("<command-", "<local-command-", "<bash-", "<system-reminder>", "Caveat:")
FIRST_PROMPT_CHARS = 200
# What an IDE extension puts before a prompt (the open file, the selection): context, not what was typed.
IDE_CONTEXT = re.compile(r"<(ide_[a-z_]+)>.*?</\1>", re.DOTALL)


def session_title(records: Iterable[Mapping[str, object]]) -> str | None:
    """The title of the session these records (parsed transcript lines, in file order) belong to."""
    titles: dict[str, str] = {}
    first_prompt: str | None = None
    fields = dict(TITLE_ENTRIES)
    for record in records:
        kind = record.get("type")
        if isinstance(kind, str) and kind in fields:
            value = record.get(fields[kind])
            if isinstance(value, str) and value.strip():
                titles[kind] = value.strip()
        elif kind == "user" and first_prompt is None:
            first_prompt = _meaningful_prompt(record)
    for kind, _field in TITLE_ENTRIES:
        if kind in titles:
            return titles[kind]
    return first_prompt


def _meaningful_prompt(record: Mapping[str, object]) -> str | None:
    """The text a person typed in this user line, or None when the line is not such a prompt."""
    if record.get("isMeta") or record.get("isSidechain") or record.get("isCompactSummary"):
        return None
    message = record.get("message")
    if not isinstance(message, Mapping):
        return None
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        # A tool result is the harness answering the model, never a prompt.
        texts = [b.get("text") for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        if any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content):
            return None
        text = "\n".join(t for t in texts if isinstance(t, str))
    else:
        return None
    text = " ".join(IDE_CONTEXT.sub(" ", text).split())
    if not text or text.startswith(HARNESS_PREFIXES):
        return None
    return text[:FIRST_PROMPT_CHARS]


# How far into a file the first prompt is looked for when titles are found in its bytes: a prompt past
# this is no session's opening.
HEAD_BYTES = 4 << 20


def buffer_title(buffer: Any) -> str | None:
    """`session_title` of a whole transcript's bytes (bytes or an mmap), without parsing every line: the
    last line of each title type is found by a byte search from the end for its quoted type name (a
    name inside a JSON string is escaped, so only keys and values match), and only the lines found are
    parsed; the first prompt is looked for among the head's lines that name a user."""
    for kind, field in TITLE_ENTRIES:
        marker = f'"{kind}"'.encode()
        end = len(buffer)
        while (hit := buffer.rfind(marker, 0, end)) >= 0:
            start = buffer.rfind(b"\n", 0, hit) + 1
            record = _record(buffer, start)
            value = record.get(field) if record is not None and record.get("type") == kind else None
            if isinstance(value, str) and value.strip():
                return value.strip()
            end = start
    start, limit = 0, min(len(buffer), HEAD_BYTES)
    while start < limit:
        stop = buffer.find(b"\n", start)
        stop = len(buffer) if stop < 0 else stop
        if buffer.find(b'"user"', start, stop) >= 0:
            record = _record(buffer, start, stop)
            if record is not None and record.get("type") == "user" and (prompt := _meaningful_prompt(record)) is not None:
                return prompt
        start = stop + 1
    return None


def _record(buffer: Any, start: int, stop: int | None = None) -> Mapping[str, object] | None:
    """The JSON object on the line that starts at `start` (None: not an object)."""
    if stop is None:
        stop = buffer.find(b"\n", start)
        stop = len(buffer) if stop < 0 else stop
    if start == 0 and buffer[:3] == BOM:  # a BOM before the first line is not part of it
        start = 3
    try:
        record = orjson.loads(bytes(buffer[start:stop]))
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None
