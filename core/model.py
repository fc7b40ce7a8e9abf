"""The format-neutral transcript model that stages and reports work on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .jsonl import Entry

if TYPE_CHECKING:  # loaded when a finding is listed: the status line reads transcripts without it
    from .reports import FindingRow

Role = Literal["user", "assistant"]
Severity = Literal["error", "warning"]


@dataclass
class Transcript:
    """All entries of one input, in file order, and the format they are in."""

    entries: list[Entry]
    format: str
    source: str = "-"


@dataclass
class Message:
    """One API-level message, assembled from one or more entries.

    `content` holds blocks in the Anthropic Messages form (a Claude Code response split over
    several lines is one Message here). `entries` are indices into Transcript.entries.
    """

    role: Role
    content: list[dict[str, Any]]
    entries: list[int] = field(default_factory=list)
    message_id: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    meta: bool = False
    compact_summary: bool = False
    text_content: str | None = None  # set when the source held a plain string, to write it back as one
    refs: list[tuple[int, int]] = field(default_factory=list)
    usage_stale: bool = (
        False  # recorded before a compaction that this message survived  # per block: (entry index, index in that entry's content; -1 for a string)
    )

    @property
    def first_line(self) -> int | None:
        return self.entries[0] if self.entries else None


@dataclass(frozen=True)
class Finding:
    """One problem `validate` reports, located at a line when it has one."""

    severity: Severity
    code: str
    message: str
    line: int | None = None

    def row(self) -> FindingRow:
        """The finding as `validate --json` lists it."""
        from .reports import FindingRow

        return FindingRow(severity=self.severity, code=self.code, line=self.line, message=self.message)
