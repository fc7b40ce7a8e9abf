"""The library API: read, convert, validate and write transcripts from Python.

import ctxpipe
transcript = ctxpipe.read_transcript("session.jsonl")          # format detected
messages = ctxpipe.convert(transcript, "anthropic")            # a new Transcript
ctxpipe.write_transcript(messages, "messages.jsonl")           # atomic
for finding in ctxpipe.validate_transcript(transcript):
    print(finding.line, finding.severity, finding.message)
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import Any

from .atomic import atomic_file
from .core.convert import ConvertReport, to_api_messages
from .core.jsonl import OnError, ReadStats, iter_entries, write_entries
from .core.model import Finding, Transcript
from .formats import WriteOptions, detect, get
from .inputs import opened, source_name


def read_transcript(source: str | os.PathLike[str] | bytes, format: str | None = None, on_error: OnError = "fail") -> Transcript:
    """A transcript from a path ("-" is stdin; a pipe or a FIFO is read as a stream) or from raw
    JSONL bytes; raises InputError on bad input."""
    name = "<bytes>" if isinstance(source, bytes) else source_name(source)
    with contextlib.nullcontext(io.BytesIO(source)) if isinstance(source, bytes) else opened(source) as stream:
        entries = list(iter_entries(stream, name, on_error, ReadStats()))
    chosen = get(format) if format else detect(entries, name)
    return Transcript(entries, chosen.name, name)


def convert(transcript: Transcript, to: str, repair: bool = False, history: bool = False, options: WriteOptions | None = None) -> Transcript:
    """`transcript` in format `to`; the same format (without repair) returns it unchanged."""
    return convert_with_report(transcript, to, repair, history, options)[0]


def convert_with_report(
    transcript: Transcript, to: str, repair: bool = False, history: bool = False, options: WriteOptions | None = None
) -> tuple[Transcript, ConvertReport]:
    source_format, target = get(transcript.format), get(to)
    if source_format is target and not repair and not history:
        return transcript, ConvertReport()
    messages = source_format.messages(transcript.entries, history=history)
    api_messages, report = to_api_messages(messages, transcript.entries, repair=repair)
    entries = target.from_messages(api_messages, options or WriteOptions())
    return Transcript(entries, target.name, transcript.source), report


def api_messages(transcript: Transcript, history: bool = False, repair: bool = False) -> list[dict[str, Any]]:
    """The Messages API conversation of the active context (the whole main chain with history)."""
    messages = get(transcript.format).messages(transcript.entries, history=history)
    return to_api_messages(messages, transcript.entries, repair=repair)[0]


def validate_transcript(transcript: Transcript) -> list[Finding]:
    """Schema and structural findings, sorted by line."""
    from .core.validate import schema_findings, sort_findings

    chosen = get(transcript.format)
    return sort_findings(schema_findings(transcript.entries, chosen.schema) + chosen.check(transcript.entries))


def write_transcript(transcript: Transcript, path: str | os.PathLike[str]) -> None:
    """Write atomically: a temporary file in the same folder, fsync, then rename over `path`."""
    with atomic_file(path) as out:
        write_entries(transcript.entries, out)
