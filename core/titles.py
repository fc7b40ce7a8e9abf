"""A session's title, chosen as Claude Code chooses the one its `/resume` picker shows.

Claude Code 2.1.332 shows `customTitle ?? aiTitle ?? summary ?? firstPrompt`: the title set with
`/rename` (a `custom-title` line), else the one a model wrote (`ai-title`), else the summary of an
older session (`summary`, what 1.0.x wrote), else the first meaningful prompt. Each of the three
title types is "last wins" in its entry registry, so the last line of a type is the one that counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# (entry type, field holding the title), in the order Claude Code prefers them.
TITLE_ENTRIES: tuple[tuple[str, str], ...] = (("custom-title", "customTitle"), ("ai-title", "aiTitle"), ("summary", "summary"))
# A prompt is not a title when it is what the harness wrote: a command's echo, its output, a caveat.
HARNESS_PREFIXES = ("<command-", "<local-command-", "<bash-", "<system-reminder>", "Caveat:")
FIRST_PROMPT_CHARS = 200


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
    text = " ".join(text.split())
    if not text or text.startswith(HARNESS_PREFIXES):
        return None
    return text[:FIRST_PROMPT_CHARS]
