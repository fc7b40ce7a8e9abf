"""The contract of a transcript format, in two parts: a reader every format implements
(TranscriptFormat) and an editor only the formats ctxpipe writes implement (TranscriptEditor).

It lives in the core so that core code can type a format parameter without importing `formats`
(the formats build on the core, never the other way round). formats/base.py re-exports it.

All formats are JSONL, so reading lines and writing them back is shared (core.jsonl); a format
decides only what its lines mean. Its reader says whether a line looks like its own (sniff), how
its entries form API messages (messages), where its active context starts, and which structural
rules its files must keep (check). Its editor, when it has one, says how API messages become its
entries (from_messages) and how a stage's changes are written in its vocabulary.

A stage takes a WritableFormat (both parts), and a caller holding a mere TranscriptFormat gets one
from editor_of, which refuses a read-only format: the type checker proves that nothing calls an
editing member on a format that has none, and a read-only format declares no writing stubs.

Code never asks a format its name to decide what to do: it asks a capability (the `bool`
attributes below). A new format declares every one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .count import Compaction, Marker
from .errors import UnsupportedError
from .folds import Fold
from .jsonl import Entry, OnError, ParsedLines, ReadStats
from .model import Finding, Message

# The subtype of the record `summarize` writes below a kept tail (through `marker`): a format that
# reads markers back knows from it that every response above it was measured before the summary.
SUMMARY_MARKER = "ctxpipe_compact"

# read_context of one buffer for a number of responses (None: all of the active context).
ContextReader = Callable[[int | None], tuple[list[Entry], bool]]

# Every capability a format declares, so a test can hold each format to all of them.
CAPABILITIES = ("writable", "has_usage", "has_tree", "keeps_history", "lines_are_messages")


@dataclass(frozen=True)
class WriteOptions:
    """What a format needs to invent when it builds entries the source did not have."""

    session_id: str | None = None
    cwd: str = "."
    start_time: str | None = None  # ISO 8601; None means now
    model: str | None = None


@dataclass(frozen=True)
class CompactionSpan:
    """One compaction a session records, as the audit reads it.

    `before` is the context it replaced (since the compaction before it, whose summary opens it);
    `left` what it left in its place: the summary and the messages it kept; `after` the session's
    messages from there to the next compaction. `typed_before` is what the user typed outside the
    messages (queued prompts) in that stretch, as typed_elsewhere gives it."""

    position: int
    line: int | None
    timestamp: str | None
    trigger: str | None  # "auto", "manual" (Claude Code), what ctxpipe wrote, None when unrecorded
    pre_tokens: int | None  # what the writer recorded as the context before it
    by: str  # who compacted: "claude-code", "ctxpipe", "codex"
    before: list[Message]
    left: list[Message]
    after: list[Message]
    typed_before: list[tuple[int, Any]]


class TranscriptFormat(Protocol):
    """The reader: what every format implements, read-only or not."""

    name: str  # for the command line, reports and detection messages; never branched on
    summary: str
    schema: str  # file name in schemas/ that one line must validate against

    # Capabilities (see CAPABILITIES).
    writable: bool
    """ctxpipe writes this format: it implements TranscriptEditor too, so the stages edit it and
    `convert --to` produces it. False: read only (it has no editor; editor_of refuses it)."""
    has_usage: bool
    """Its lines can carry the API's recorded usage (prompt and output tokens of a response)."""
    has_tree: bool
    """Entries link to a parent, so the active context is a chain through the file, not all of it."""
    keeps_history: bool
    """A compaction is appended below the history, which stays in the file (the format marks where
    the active context starts). False: the compacted entries replace the file's entries."""
    lines_are_messages: bool
    """A line is one API message and nothing more, so rebuilding the file from its messages
    (convert --repair/--history to the same format) keeps what it means. False: lines carry
    fields a rebuild from messages would drop."""
    compacts_at: float | None
    """The fraction of the model's window at which the agent that writes this format compacts on its
    own (Gemini CLI: 0.5, Codex: 0.9), the compaction point warn judges against; None: Claude Code's
    thresholds (core.budget.thresholds)."""
    state_lines: tuple[str, ...]
    """The `type`s of the lines that record the session's state rather than its conversation (a Codex
    turn_context names the model and the folder of what follows): a cut of the messages around one
    (snip) leaves it. Other lines between removed messages go with them."""
    line_folds: tuple[Fold[Any], ...]
    """The facts of every line its readers ask a whole file for (markers, …) as core.jsonl.folded
    folds them: a file read in place (a LineIndex) folds them while its lines are checked, so that
    no reader parses every line again for them."""

    def sniff(self, obj: dict[str, Any]) -> bool | None:
        """True: this line is ours; False: it cannot be ours; None: cannot tell from this line."""

    def messages(self, entries: Sequence[Entry], history: bool = False) -> list[Message]:
        """The API messages of the active context (or of the whole main chain with history=True)."""

    def context_positions(self, entries: Sequence[Entry], history: bool = False) -> list[int]:
        """Positions of the entries that make up the active context (or the whole main chain with history=True)."""

    def api_calls(self, entries: Sequence[Entry]) -> list[Message]:
        """Every billed API response the file records, in file order: every branch and sidechain, a
        response written over several lines once (its usage from its last line), synthetic lines never."""

    def split_at_compaction(self, entries: Sequence[Entry]) -> tuple[list[Message], list[Message]] | None:
        """(the history's messages before the last compaction, the active context's messages);
        None when the file holds no history before one (restore and count's re-injection read it)."""

    def boundary_metadata(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The metadata of a line where an active context starts after a compaction whose history
        was dropped ({} when it records none); None: not such a line."""

    def read_context(self, buffer: Any, source: str, on_error: OnError, stats: ReadStats, responses: int | None = None) -> tuple[list[Entry], bool]:
        """The entries a count needs from a whole file's bytes (an mmap): at least the last
        `responses` API responses of the active context and all after them (all of it when None),
        and whether they reach the start of the active context."""

    def context_reader(
        self, buffer: Any, source: str, on_error: OnError, stats: ReadStats, parsed: ParsedLines | None = None, flat_images: bool = False
    ) -> ContextReader:
        """read_context(buffer, source, on_error, stats, responses) for one `responses` after another
        (more each time), each read going on from where the one before stopped. `parsed`: where the
        reads may keep the objects of the lines they parse, by where each line starts. `flat_images`:
        the reader needs no image's data (a count: an image costs a flat estimate), which may then
        read as jsonl.LEFT_OUT."""

    def read_region(self, buffer: Any, source: str, on_error: OnError, stats: ReadStats) -> tuple[int, list[Entry]]:
        """Where the active context starts (byte offset) and every entry from there on, bytes kept."""

    def markers(self, entries: Sequence[Entry]) -> list[Marker]:
        """Stage records (microcompact, collapse, …) saying how many tokens they removed."""

    def opening(self, entries: Sequence[Entry]) -> Compaction | None:
        """The compaction the active context starts from (None: it starts at the session's start)."""

    def compactions(self, entries: Sequence[Entry]) -> list[CompactionSpan]:
        """Every compaction the file records, in order, with the context it replaced and what it left
        ([] for a format whose summary leaves no history behind)."""

    def typed_elsewhere(self, entries: Sequence[Entry]) -> list[tuple[int, Any]]:
        """(position, content) of what the user typed in the active context outside its messages
        (Claude Code's prompts queued while the agent was busy), for the summary and its verifier."""

    def recorded_window(self, entries: Sequence[Entry]) -> int | None:
        """The context window the file itself records for its model (a Codex rollout's
        model_context_window, the newest one), or None: the model catalog decides then."""

    def recorded_cwd(self, entries: Sequence[Entry]) -> str | None:
        """The session's working folder as the file records it (None: it does not), which a
        conversion keeps."""

    def recorded_model(self, entries: Sequence[Entry]) -> str | None:
        """The model the file says the session runs on outside its responses (a Codex rollout's
        turn_context), or None: the count's model when no response names one yet."""

    def is_lone_response(self, entry: Entry) -> bool:
        """Whether the line on its own is a whole real API response (its messages read alone end in
        one): where the search for a session's first response may stop. formats.base.lone_response
        tells it for any format; a format whose lines are whole responses tells it without the read."""

    def continues_earlier(self, head: Sequence[Entry]) -> bool:
        """Whether a file's first lines (`head`, from line 1) continue a session whose start the file
        does not hold, so its first response was sent history that is not here."""

    def check(self, entries: Sequence[Entry]) -> list[Finding]:
        """Structural problems beyond what the line schema sees."""

    def checked_part(self, obj: dict[str, Any]) -> dict[str, Any]:
        """What check() reads of a line: the line itself, or a smaller copy that check() judges
        the same. validate holds this of every line until the file is read, not the whole line."""


class TranscriptEditor(Protocol):
    """The editor: how the formats ctxpipe writes (writable = True) build new lines. Only the stages
    and `convert --to` call these."""

    summary_preamble: str
    """How the agent that reads this format opens a summary of the history (Claude Code's preamble,
    Codex's prefix): the first words of the text `summarize` gives `compacted`."""

    def from_messages(self, messages: Sequence[dict[str, Any]], options: WriteOptions) -> list[Entry]:
        """Entries in this format holding the given Messages-API messages."""

    def replace_blocks(self, entry: Entry, blocks: dict[int, dict[str, Any]]) -> Entry:
        """A changed copy of `entry` with content blocks replaced by index."""

    def compacted(self, entries: Sequence[Entry], tail: Sequence[int], summary: str, metadata: dict[str, Any], when: str) -> list[Entry]:
        """The entries a summary adds: its record(s) in this format, then the kept tail."""

    def meta_entries(self, entries: Sequence[Entry], texts: Sequence[str], when: str) -> list[Entry]:
        """Entries to append holding injected text (restore's files, plan, skills) the model reads
        as context, not as something the user typed."""

    def marker(self, entries: Sequence[Entry], subtype: str, text: str, metadata_key: str, metadata: dict[str, Any], when: str) -> Entry | None:
        """A line recording what a stage did, in this format's vocabulary (None: it has none)."""


@runtime_checkable
class WritableFormat(TranscriptFormat, TranscriptEditor, Protocol):
    """A format ctxpipe writes: its reader and its editor, what a stage edits a transcript with."""


def editor_of(transcript_format: TranscriptFormat, doing: str = "edit") -> WritableFormat:
    """`transcript_format` as a format ctxpipe writes, or UnsupportedError for one it only reads
    (`doing`: what was asked of it, for the message)."""
    if isinstance(transcript_format, WritableFormat):  # the members themselves, not only the flag
        return transcript_format
    raise UnsupportedError(
        f"ctxpipe reads the {transcript_format.name} format but does not {doing} it; convert it first (ctxpipe convert --to, to a format it writes)"
    )
