"""report's page and index (schemas/report.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..wire import Absent, Wire, sometimes, sometimes_null

if TYPE_CHECKING:  # annotations only
    from .cost import CallRow, CostReport
    from .count import BreakdownRow, CountReport, WarnReport
    from .parts import CacheDecisionReport
    from .stages import MissingFact


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
    tokens: int
    excerpt: str


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


@dataclass(kw_only=True, slots=True)
class SessionReport(Wire):
    """`report --json`: everything one session's page shows."""

    file: str
    format: str
    kind: Literal["main", "subagent", "compaction"] | None
    model: str | None
    session_id: str | None
    first_activity: str | None
    last_activity: str | None
    count: CountReport
    warn: WarnReport
    calls: list[CallRow]
    events: list[TimelineEvent]
    breakdown: dict[str, list[BreakdownRow]]  # by "tool", "role" and "block"
    largest: list[ExcerptLine]
    cost: CostReport
    horizon: int
    dry_runs: list[StageDryRun]
    recommendation: str


@dataclass(kw_only=True, slots=True)
class IndexRow(Wire):
    """One session of a folder's index page (`report DIR --out-dir OUT`)."""

    file: str  # as found under the folder
    page: str | None  # the session page's file name, relative to the index; None when it failed
    model: str | None
    tokens: int | None
    percent_of_window: float | None
    level: str | None
    usd: float | None
    last_activity: str | None
    error: str | None  # why the file has no page
