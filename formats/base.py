"""The one contract every transcript format implements.

All formats here are JSONL, so reading lines and writing them back is shared (core.jsonl); a
format decides only what its lines mean: whether a line looks like its own (sniff), how its
entries form API messages (messages), how API messages become its entries (from_messages), and
which structural rules its files must keep (check).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.count import Compaction, Marker
from ..core.jsonl import Entry, OnError, ReadStats
from ..core.model import Finding, Message


@dataclass(frozen=True)
class WriteOptions:
    """What a format needs to invent when it builds entries the source did not have."""

    session_id: str | None = None
    cwd: str = "."
    start_time: str | None = None  # ISO 8601; None means now
    model: str | None = None


class TranscriptFormat(Protocol):
    name: str
    summary: str
    schema: str  # file name in schemas/ that one line must validate against

    def sniff(self, obj: dict[str, Any]) -> bool | None:
        """True: this line is ours; False: it cannot be ours; None: cannot tell from this line."""

    def messages(self, entries: Sequence[Entry], history: bool = False) -> list[Message]:
        """The API messages of the active context (or of the whole main chain with history=True)."""

    def context_positions(self, entries: Sequence[Entry]) -> list[int]:
        """Positions of the entries that make up the active context."""

    def from_messages(self, messages: Sequence[dict[str, Any]], options: WriteOptions) -> list[Entry]:
        """Entries in this format holding the given Messages-API messages."""

    def read_context(self, buffer: Any, source: str, on_error: OnError, stats: ReadStats, responses: int | None = None) -> tuple[list[Entry], bool]:
        """The entries a count needs from a whole file's bytes (an mmap): at least the last
        `responses` API responses of the active context and all after them (all of it when None),
        and whether they reach the start of the active context."""

    def read_region(self, buffer: Any, source: str, on_error: OnError, stats: ReadStats) -> tuple[int, list[Entry]]:
        """Where the active context starts (byte offset) and every entry from there on, bytes kept."""

    def replace_blocks(self, entry: Entry, blocks: dict[int, dict[str, Any]]) -> Entry:
        """A changed copy of `entry` with content blocks replaced by index."""

    def compacted(self, entries: Sequence[Entry], tail: Sequence[int], summary: str, metadata: dict[str, Any], when: str) -> list[Entry]:
        """The entries a summary adds: its record(s) in this format, then the kept tail."""

    def marker(self, entries: Sequence[Entry], subtype: str, text: str, metadata_key: str, metadata: dict[str, Any], when: str) -> Entry | None:
        """A line recording what a stage did, in this format's vocabulary (None: it has none)."""

    def markers(self, entries: Sequence[Entry]) -> list[Marker]:
        """Stage records (microcompact, collapse, …) saying how many tokens they removed."""

    def opening(self, entries: Sequence[Entry]) -> Compaction | None:
        """The compaction the active context starts from (None: it starts at the session's start)."""

    def typed_elsewhere(self, entries: Sequence[Entry]) -> list[tuple[int, Any]]:
        """(position, content) of what the user typed in the active context outside its messages
        (Claude Code's prompts queued while the agent was busy), for the summary and its verifier."""

    def check(self, entries: Sequence[Entry]) -> list[Finding]:
        """Structural problems beyond what the line schema sees."""
