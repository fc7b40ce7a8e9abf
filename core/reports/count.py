"""count's and warn's rows (schemas/count|warn.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..wire import Absent, Wire, sometimes, sometimes_null

if TYPE_CHECKING:  # annotations only
    from .cost import CostReport, TokenParts


BaselineSource = Literal["measured", "default", "--baseline"]


CalibrationSource = Literal["transcript", "default", "none"]


@dataclass(kw_only=True, slots=True)
class BaselineReport(Wire):
    tokens: int
    source: BaselineSource
    note: str


@dataclass(kw_only=True, slots=True)
class CalibrationReport(Wire):
    slope: float
    overhead: float
    source: CalibrationSource
    pairs: int
    note: str | None = sometimes()  # why the transcript's own fit was rejected


# What Claude Code re-injects after its compaction (core.restore.REINJECTED_KINDS). count.report.schema.json
# lists file, plan and skill only: a compaction in plan mode prints "plan-mode", which it rejects.


ReinjectedKind = Literal["file", "plan", "plan-mode", "skill"]


@dataclass(kw_only=True, slots=True)
class ReinjectedItem(Wire):
    kind: ReinjectedKind
    name: str
    tokens: int


@dataclass(kw_only=True, slots=True)
class ReinjectedReport(Wire):
    tokens: int
    items: list[ReinjectedItem]
    assumed: str


@dataclass(kw_only=True, slots=True)
class Adjustment(Wire):
    """A change the count made to a figure, and why (core.count: a stage's marker, content no message holds)."""

    kind: str
    tokens: int  # signed: a change, not a figure
    line: int | None
    note: str


@dataclass(kw_only=True, slots=True)
class BreakdownRow(Wire):
    key: str
    tokens: int
    blocks: int
    share: float


@dataclass(kw_only=True, slots=True)
class TopLine(Wire):
    line: int | None
    role: Literal["user", "assistant"]
    block: str
    tool: str | None
    tokens: int


@dataclass(kw_only=True, slots=True)
class TimelinePoint(Wire):
    line: int | None
    timestamp: str | None
    tokens: int
    output_tokens: int
    compacted_after: bool | None = sometimes()  # True when a compaction follows this call


@dataclass(kw_only=True, slots=True)
class CountReport(Wire):
    """A row of `count --json`: one transcript."""

    file: str
    format: str  # a registered format (formats.NAMES)
    kind: Literal["main", "subagent", "compaction"] | None
    model: str | None
    context_window: int
    tokens: int
    exact_tokens: int
    estimated_tokens: int
    messages: int | None
    estimated_messages: int
    percent_of_window: float | None
    tokenizer: str
    baseline_tokens: int
    baseline: BaselineReport | None
    baseline_in_total: bool
    reinjected_tokens: int
    reinjected: ReinjectedReport | None
    calibration: CalibrationReport
    anchor_uuid: str | None
    window_source: str
    rules: str  # the Claude Code release whose rules set the window and thresholds (core.rules)
    adjustments: list[Adjustment]
    skipped_lines: int
    breakdown: list[BreakdownRow] | None = sometimes()  # --by
    top: list[TopLine] | None = sometimes()  # --top
    timeline: list[TimelinePoint] | None = sometimes()  # --timeline
    cost: CostReport | None = sometimes()  # --cost
    title: str | None | Absent = sometimes_null()  # where every line is read (--cost, --full, …): the session's title (core.titles), null without one


@dataclass(kw_only=True, slots=True)
class CountTotal(Wire):
    """The last row of `count --json` over several inputs."""

    file: None = None
    total: Literal[True] = True
    files: int
    failed: int
    tokens: int
    exact_tokens: int
    estimated_tokens: int
    messages: int | None
    usd: float | None | Absent = sometimes_null()  # --cost: every file's cost; None when one is unknown


RollupBy = Literal["day", "project", "session"]


@dataclass(kw_only=True, slots=True)
class RollupRow(Wire):
    """A row of `count --by day|project|session --json`: the API calls of one group, each billed call once."""

    by: RollupBy
    group: str  # the day (YYYY-MM-DD in --timezone; "(no time)" for calls without a timestamp), the project, or the session id
    usd: float | None  # None when a call's model has no known price
    tokens: TokenParts
    api_calls: int
    files: int  # the files holding the group's calls
    models: list[str]
    project: str | None = sometimes()  # session rows: the session's project
    title: str | None | Absent = sometimes_null()  # session rows: the session's title (core.titles), null without one


@dataclass(kw_only=True, slots=True)
class RollupTotal(Wire):
    """The last row of `count --by day|project|session --json`: every row added up."""

    by: RollupBy
    group: None = None
    total: Literal[True] = True
    usd: float | None  # the rows' usd added up; None when one is unknown
    tokens: TokenParts
    api_calls: int
    files: int  # the files counted
    failed: int  # the files that could not be read
    groups: int


@dataclass(kw_only=True, slots=True)
class WarnThresholds(Wire):
    warning: int
    error: int
    autocompact: int | None  # None when autocompact is off
    blocking: int


@dataclass(kw_only=True, slots=True)
class WarnReport(Wire):
    """`warn --json`."""

    file: str
    model: str | None
    level: Literal["normal", "warning", "autocompact", "blocking"]
    tokens: int
    exact_tokens: int
    estimated_tokens: int
    context_window: int
    autocompact_window: int
    effective_window: int
    max_output_tokens: int
    thresholds: WarnThresholds
    percent_left: int
    percent_used: float
    explanations: list[str]
    ignored: list[str]
    rules: str
    kind: Literal["compaction"] | None = sometimes()  # with note: a compaction side-call, which raises no alarm
    note: str | None = sometimes()
