"""report's page and index (schemas/report.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..wire import Absent, Wire, sometimes, sometimes_null

if TYPE_CHECKING:  # annotations only
    from .cost import CallRow, CostReport
    from .count import CountReport
    from .count_views import BreakdownRow
    from .parts import CacheDecisionReport
    from .stage_summarize import MissingFact
    from .warn import WarnReport


@dataclass(kw_only=True, slots=True)
class TimelineEvent(Wire):
    """Something that changed the context between two calls: a compaction or a stage's marker."""

    kind: str  # "compact_boundary", "microcompact", "collapse", "snip", …
    line: int | None
    after_turn: int | None  # the last main call before it (None: before the first)
    tokens_saved: int | None
    label: str
    # A compaction's audit (core/audit.py): the facts of the history before it, those it carried, the lost.
    facts: int | None = sometimes()
    carried: int | None = sometimes()
    recall: float | None | Absent = sometimes_null()
    lost: list[MissingFact] | None = sometimes()


@dataclass(kw_only=True, slots=True)
class ExcerptLine(Wire):
    """One of the largest lines of the active context, with a short excerpt of what it holds."""

    line: int | None
    role: Literal["user", "assistant"]
    block: str
    tool: str | None
    subject: str | None  # what the tool acted on: a Read's file_path, a Bash command, a Grep pattern, …
    tokens: int
    excerpt: str  # a tool call's input as JSON


@dataclass(kw_only=True, slots=True)
class StageDryRun(Wire):
    """What one stage would do now (nothing written), and whether its cache break pays."""

    stage: str
    engine: str | None  # summarize: the offline engine (a dry run calls no model)
    tokens_before: int
    tokens_after: int
    tokens_freed: int
    changed: bool
    cache: CacheDecisionReport | None  # None when the stage changes nothing
    note: str


WindowPartName = Literal["baseline", "messages", "free", "autocompact_buffer"]


@dataclass(kw_only=True, slots=True)
class WindowPart(Wire):
    """One part of the context window, as Claude Code's `/context` splits it: the baseline (system
    prompt and tools), the messages, the free space and the autocompact buffer; they add up to the
    window (to the count, when the count is over it)."""

    part: WindowPartName
    tokens: int
    percent: float  # of the window


@dataclass(kw_only=True, slots=True)
class Advice(Wire):
    """What to do now: the stage that saves the most for the cache it breaks, and its command for
    this file; no stage when nothing is worth doing (or the file is not a session)."""

    stage: str | None
    command: str | None  # for a POSIX shell, the path as given
    why: str  # one sentence


@dataclass(kw_only=True, slots=True)
class SessionReport(Wire):
    """`report --json`: everything one session's page shows."""

    file: str
    format: str
    kind: Literal["main", "subagent", "compaction"] | None  # "compaction": a compaction side-call, not a session
    model: str | None
    title: str | None  # as Claude Code's /resume picker shows it (core.titles)
    session_id: str | None
    first_activity: str | None
    last_activity: str | None
    count: CountReport
    warn: WarnReport
    calls: list[CallRow]
    events: list[TimelineEvent]
    window: list[WindowPart]
    breakdown: dict[str, list[BreakdownRow]]  # by "tool", "role" and "block"
    largest: list[ExcerptLine]
    cost: CostReport
    horizon: int
    dry_runs: list[StageDryRun]
    advice: Advice
    recommendation: str  # the advice as one line of text


@dataclass(kw_only=True, slots=True)
class IndexRow(Wire):
    """One session of a folder's index page (`report DIR --out-dir OUT`)."""

    file: str  # as found under the folder
    page: str | None  # the session page's file name, relative to the index; None when it failed
    project: str  # the folder holding the session, relative to the folder given ("" for a file given by name)
    name: str  # the file's path below its project
    title: str | None
    kind: str | None  # "compaction": a compaction side-call, not a session
    model: str | None
    tokens: int | None
    percent_of_window: float | None
    level: str | None
    usd: float | None
    last_activity: str | None
    error: str | None  # why the file has no page
