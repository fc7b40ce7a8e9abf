"""What the formats share: the contract (declared in core.transcript_format, re-exported here so
`from ctxpipe.formats.base import TranscriptFormat` keeps working) and helpers more than one
format uses, written once.

A read-only format implements the reader (TranscriptFormat) alone: it writes no stub for the
editor's members, and core.transcript_format.editor_of refuses it.
"""

from __future__ import annotations

import io
import uuid as uuidlib
from typing import Any

from ..core.count import is_real_response
from ..core.folds import Fold
from ..core.jsonl import Entry, OnError, ParsedLines, ReadStats, iter_buffer_entries, iter_entries
from ..core.transcript_format import (
    CAPABILITIES,
    SUMMARY_MARKER,
    CompactionSpan,
    ContextReader,
    TranscriptEditor,
    TranscriptFormat,
    WritableFormat,
    WriteOptions,
    editor_of,
)

# The namespace of the uuids ctxpipe derives from what it writes (the same run gives the same bytes).
CTXPIPE_NAMESPACE = uuidlib.UUID("6f1d2c1e-7f3b-4c1a-9a51-0c7e1d2b9a10")


def lone_response(transcript_format: TranscriptFormat, entry: Entry) -> bool:
    """TranscriptFormat.is_lone_response for any format: the messages of the line read alone."""
    found = transcript_format.messages([entry])
    return bool(found) and is_real_response(found[-1])


class WholeFileContext:
    """Reads for a format whose active context is the whole file (no tree, no boundary to walk
    back to): every line is parsed, from the first byte."""

    line_folds: tuple[Fold[Any], ...] = ()  # its whole-file facts are read from lists: nothing to fold ahead

    def read_region(self, buffer: Any, source: str, on_error: OnError, stats: ReadStats) -> tuple[int, list[Entry]]:
        return 0, list(iter_entries(io.BytesIO(buffer), source, on_error, stats))

    def read_context(self, buffer: Any, source: str, on_error: OnError, stats: ReadStats, responses: int | None = None) -> tuple[list[Entry], bool]:
        return list(iter_buffer_entries(buffer, source, on_error, stats)), True

    def context_reader(
        self, buffer: Any, source: str, on_error: OnError, stats: ReadStats, parsed: ParsedLines | None = None, flat_images: bool = False
    ) -> ContextReader:
        return lambda responses: self.read_context(buffer, source, on_error, stats, responses)  # complete at the first read

    def checked_part(self, obj: dict[str, Any]) -> dict[str, Any]:
        return obj  # check() reads whole messages


__all__ = [
    "CAPABILITIES",
    "CTXPIPE_NAMESPACE",
    "SUMMARY_MARKER",
    "CompactionSpan",
    "TranscriptEditor",
    "TranscriptFormat",
    "WholeFileContext",
    "WritableFormat",
    "WriteOptions",
    "editor_of",
    "lone_response",
]
