"""Transcript formats behind one contract (core.transcript_format: a reader every format implements,
TranscriptFormat, and an editor the formats ctxpipe writes implement too), and their registry.

Adding a format: its module here, one line in REGISTRY, its line schema in schemas/, its fixtures.
Nothing else names a format: the code asks a format's capabilities, never its name.

Files other agents write (other_agents.OTHER_AGENTS) are told apart before any of these formats is
detected, by the readers in files/inputs.py, and refused with `refuse_other_agent`. A format whose
files may be one JSON document (a Gemini CLI .json chat) turns it into the JSONL it stands for
(`document_lines`), which the line readers then read like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import InputError, SettingsError, UnsupportedError
from ..core.jsonl import Entry
from . import anthropic, claude_code, codex, gemini, other_agents
from .base import TranscriptFormat, WritableFormat, WriteOptions, editor_of

# Order matters for detection: the most specific signatures first.
REGISTRY: dict[str, TranscriptFormat] = {
    gemini.FORMAT.name: gemini.FORMAT,
    codex.FORMAT.name: codex.FORMAT,
    anthropic.FORMAT.name: anthropic.FORMAT,
    claude_code.FORMAT.name: claude_code.FORMAT,
}
NAMES = tuple(sorted(REGISTRY))
WRITABLE = tuple(name for name in NAMES if REGISTRY[name].writable)  # what the stages edit and `convert --to` writes
DEFAULT = claude_code.FORMAT.name
SNIFF_LINES = 50


def not_writable(source: str, command: str, name: str) -> UnsupportedError:
    """The error for a stage given a format it cannot write (convert it to one it can)."""
    *others, last = sorted(WRITABLE, reverse=True)
    return UnsupportedError(f"{source}: {command} edits {', '.join(others)}{' and ' if others else ''}{last} transcripts; convert a {name} transcript first")


def stage_editor(transcript_format: TranscriptFormat, source: str, command: str) -> WritableFormat:
    """`transcript_format` as the stage `command` edits it; a format ctxpipe only reads is refused
    with the stage's error (not_writable), before anything is read or counted."""
    if isinstance(transcript_format, WritableFormat):
        return transcript_format
    raise not_writable(source, command, transcript_format.name)


DOCUMENT_HEAD = 4096  # the bytes that tell a document: its first line and its first keys
# Per format whose files may be one JSON document: (does a head start one, the document as JSONL or None).
DOCUMENTS = ((gemini.is_document, gemini.document_lines),)


def is_document(head: bytes) -> bool:
    """Whether an input's first bytes start a document some format reads (cheap: every input is asked)."""
    return any(starts(head) for starts, _ in DOCUMENTS)


def document_lines(data: bytes, source: str) -> bytes | None:
    """The whole input `data`, a document a format reads, as the JSONL lines it stands for (each on
    the line of the file it comes from); None when no format reads it. InputError for one that is
    broken (cut off, not JSON)."""
    for starts, lines in DOCUMENTS:
        if starts(data[:DOCUMENT_HEAD]):
            found = lines(data, source)
            if found is not None:
                return found
    return None


def refuse_other_agent(source: str, found: other_agents.OtherAgent | None) -> None:
    """Raise the one-line refusal of another agent's file, when other_agents.examine* found one."""
    if found is not None:
        raise other_agents.refusal(source, found, NAMES)


def get(name: str) -> TranscriptFormat:
    """The format called `name`; SettingsError naming the known ones for any other name."""
    found = REGISTRY.get(name)
    if found is None:
        raise SettingsError("format", f"no format named {name!r} (one of {', '.join(REGISTRY)})")
    return found


def claim(obj: dict[str, Any]) -> TranscriptFormat | None:
    """The format that claims this line, if any."""
    for candidate in REGISTRY.values():
        if candidate.sniff(obj):
            return candidate
    return None


def detect(entries: Sequence[Entry], source: str) -> TranscriptFormat:
    """The format of the first line that some format claims; an empty input is Claude Code."""
    for entry in entries[:SNIFF_LINES]:
        found = claim(entry.obj)
        if found is not None:
            return found
    if not entries:
        return REGISTRY[DEFAULT]
    raise InputError(
        source,
        entries[0].line,
        f"cannot tell the transcript format from the first lines (known: {', '.join(NAMES)}); use --format",
    )


__all__ = [
    "REGISTRY",
    "NAMES",
    "WRITABLE",
    "DEFAULT",
    "DOCUMENT_HEAD",
    "TranscriptFormat",
    "WritableFormat",
    "WriteOptions",
    "claim",
    "detect",
    "document_lines",
    "editor_of",
    "is_document",
    "get",
    "other_agents",
    "refuse_other_agent",
    "stage_editor",
]
