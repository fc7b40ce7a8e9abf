"""The JSON reports ctxpipe prints, as types: one dataclass per object of schemas/*.report.schema.json.

Each is a `Wire` (core/wire.py): the library returns it, and `to_wire()` gives the JSON object the
command prints, keys in field order. A key the schema requires is a field without a default; a key
present only sometimes (a stage that changed nothing has no `stage`, `cleared`, …) is declared
with `sometimes()` (or `sometimes_null()` when it may be null when present), and a stage's own keys
stand in its report's wire form through `spread()`. tests/test_report_schemas.py checks that each
type's keys are exactly its schema's properties, and that every key the type promises is one the
schema requires, so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar, Union

from .wire import Absent, Wire, sometimes, sometimes_null, spread

Engine = Literal["session-memory", "llm", "offline"]
FactKind = Literal["instruction", "last-request", "file", "error", "fixed-error", "task", "current-work"]
CandidateKind = Literal["file", "plan", "plan-mode", "skill", "todos"]
StageName = str  # a stage of pipeline.PIPELINE (not listed here: adding a stage changes no type)


# --- parts shared by several reports (schemas/report-defs.schema.json) -----------------------------


@dataclass(kw_only=True, slots=True)
class ToolFigures(Wire):
    """One tool's row of `by_tool`: results cleared or folded, and their estimated tokens (a stage adds them up)."""

    results: int
    tokens: int


@dataclass(kw_only=True, slots=True)
class PricesReport(Wire):
    """Dollars per million tokens."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float


@dataclass(kw_only=True, slots=True)
class CacheDecisionReport(Wire):
    """microcompact --cache-aware: whether clearing pays for the cache break (core.cache.CacheDecision)."""

    clear: bool
    reason: str
    tokens_freed: int
    prompt_tokens: int
    kept_prefix_tokens: int
    cache_warm: bool
    ttl_minutes: int
    horizon: int
    cost_keep_usd: float
    cost_clear_usd: float
    break_even_turn: int | None
    prices_per_mtok: PricesReport


@dataclass(kw_only=True, slots=True)
class KindRecall(Wire):
    facts: int
    carried: int
    recall: float


@dataclass(kw_only=True, slots=True)
class MissingFact(Wire):
    kind: FactKind
    text: str  # at most 300 characters


@dataclass(kw_only=True, slots=True)
class VerificationReport(Wire):
    """summarize's verifier (core.summarize.Verification)."""

    facts: int
    carried: int
    recall: float
    kinds: dict[str, KindRecall]  # keyed by FactKind
    missing: list[MissingFact]


@dataclass(kw_only=True, slots=True)
class PlanRow(Wire):
    """A restore candidate (core.restore.Candidate): a row of `restore --plan`, an item of restore's report."""

    kind: CandidateKind
    name: str
    tokens: int
    chosen: bool
    reason: str


@dataclass(kw_only=True, slots=True)
class Fold(Wire):
    """One result collapse folded into a pointer to a later identical one."""

    tool_use_id: str
    tool: str
    survivor: str
    tokens: int


@dataclass(kw_only=True, slots=True)
class LlmUsage(Wire):
    """The usage the API reported for the summary request (neither key when it reported none)."""

    input_tokens: int | None = sometimes()
    output_tokens: int | None = sometimes()


# --- the stages' --report-json (schemas/<stage>.report.schema.json) ------------------------------
#
# What a stage's Outcome.report holds is its extras (every key present only sometimes: a stage that
# changed nothing has none, or only what it decided with); run_stage adds `file` and the figures.


@dataclass(kw_only=True, slots=True)
class MicrocompactExtras(Wire):
    stage: Literal["microcompact"] | None = sometimes()
    cleared: int | None = sometimes()
    removed_estimate: int | None = sometimes()
    tokens_saved: int | None = sometimes()
    by_tool: dict[str, ToolFigures] | None = sometimes()
    cache: CacheDecisionReport | None = sometimes()  # --cache-aware, also when it decided not to clear


@dataclass(kw_only=True, slots=True)
class CollapseExtras(Wire):
    stage: Literal["collapse"] | None = sometimes()
    folded: int | None = sometimes()
    removed_estimate: int | None = sometimes()
    tokens_saved: int | None = sometimes()
    by_tool: dict[str, ToolFigures] | None = sometimes()
    folds: list[Fold] | None = sometimes()


@dataclass(kw_only=True, slots=True)
class SnipExtras(Wire):
    stage: Literal["snip"] | None = sometimes()
    removed_messages: int | None = sometimes()
    removed_lines: int | None = sometimes()
    removed_estimate: int | None = sometimes()
    tokens_saved: int | None = sometimes()


@dataclass(kw_only=True, slots=True)
class SummarizeExtras(Wire):
    stage: Literal["summarize"] | None = sometimes()
    engine: Engine | None = sometimes()
    engine_reason: str | None = sometimes()
    history_messages: int | None = sometimes()
    tail_messages: int | None = sometimes()
    fallback_reason: str | None = sometimes()  # before the model's keys: an engine that fell back to the model
    llm_attempts: int | None = sometimes()
    dropped_api_rounds: int | None = sometimes()
    llm_usage: LlmUsage | None = sometimes()
    verification_before_repair: VerificationReport | None = sometimes()
    repaired: Literal[True] | None = sometimes()
    repair_error: str | None = sometimes()
    facts_to_keep: int | None = sometimes()
    verification: VerificationReport | None = sometimes()
    pre_tokens: int | None = sometimes()
    post_tokens: int | None = sometimes()
    reduction: float | None = sometimes()
    over_threshold: Literal[True] | None = sometimes()


@dataclass(kw_only=True, slots=True)
class RestoreExtras(Wire):
    stage: Literal["restore"] | None = sometimes()
    restored: list[PlanRow] | None = sometimes()
    tokens: int | None = sometimes()
    skipped: list[PlanRow] | None = sometimes()
    disk: str | None = sometimes()


# What the stages of the registry add (Outcome.report is any report: a stage declared elsewhere has its own).
StageExtras = Union[MicrocompactExtras, CollapseExtras, SnipExtras, SummarizeExtras, RestoreExtras]
Extras = TypeVar("Extras", bound=Wire)


@dataclass(kw_only=True, slots=True)
class StageReport(Wire, Generic[Extras]):
    """A stage's --report-json: the file, the stage's own keys (its Outcome.report, none when it has
    none), and `count` of the input and of the output, as run_stage measures them."""

    file: str
    extras: Extras | None = spread()
    tokens_before: int
    tokens_after: int
    tokens_freed: int  # negative when the stage added more than it removed (restore)


MicrocompactReport = StageReport[MicrocompactExtras]
CollapseReport = StageReport[CollapseExtras]
SnipReport = StageReport[SnipExtras]
SummarizeReport = StageReport[SummarizeExtras]
RestoreReport = StageReport[RestoreExtras]


# --- compact (schemas/compact.report.schema.json) --------------------------------------------------


@dataclass(kw_only=True, slots=True)
class StageRecord(Wire):
    """One stage's line in compact's report. The figures are missing only from summarize's
    'not needed' record; why/engine/verification belong to summarize."""

    stage: StageName
    changed: bool
    note: str
    why: str | None = sometimes()
    engine: Engine | None | Absent = sometimes_null()
    verification: VerificationReport | None | Absent = sometimes_null()
    fallback_reason: str | None = sometimes()  # summarize: why the model's summary failed, when the offline engine stood in
    tokens_before: int | None = sometimes()
    tokens_after: int | None = sometimes()
    tokens_freed: int | None = sometimes()


@dataclass(kw_only=True, slots=True)
class CompactReport(Wire):
    """A compacted file: what compact_buffer returns, and (with output, and backup) a row of `compact --json`."""

    file: str
    format: str  # a registered format (formats.NAMES; not listed here: adding a format changes no type)
    tokens_before: int
    tokens_after: int
    changed: bool
    skipped_lines: int
    output: str | None = sometimes()  # set by the batch, which writes the file
    backup: str | None = sometimes()  # --in-place --backup, for a file that changed
    stages: list[StageRecord]  # last: the long part


@dataclass(kw_only=True, slots=True)
class CompactSkipRow(Wire):
    """A row of `compact --json` for a compaction side-call: not a session, not compacted."""

    file: str
    kind: Literal["compaction"] = "compaction"
    skipped: str
    changed: Literal[False] = False
    output: None = None


CompactRow = Union[CompactReport, CompactSkipRow]


# --- count, warn and validate (schemas/count|warn|validate.report.schema.json) ----------------------


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


@dataclass(kw_only=True, slots=True)
class CountFailure(Wire):
    """A row of `count --json` over several inputs for a file that could not be counted (the others were)."""

    file: str
    error: str  # the one-line message, as stderr gives it


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


@dataclass(kw_only=True, slots=True)
class FindingRow(Wire):
    severity: Literal["error", "warning"]
    code: str
    line: int | None
    message: str


@dataclass(kw_only=True, slots=True)
class ValidateReport(Wire):
    """A row of `validate --json`: one transcript."""

    file: str
    format: str  # a registered format (formats.NAMES)
    entries: int
    valid: bool
    errors: int
    warnings: int
    findings: list[FindingRow]


# --- cost and the session report (`count --cost`, `report --json`) ----------------------------------


@dataclass(kw_only=True, slots=True)
class TokenParts(Wire):
    """Tokens of the API calls by how they are billed."""

    input: int
    cache_write_5m: int
    cache_write_1h: int
    cache_read: int
    output: int


@dataclass(kw_only=True, slots=True)
class DollarParts(Wire):
    """US dollars by the same parts as TokenParts."""

    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float


@dataclass(kw_only=True, slots=True)
class CostReport(Wire):
    """What the API calls recorded in one transcript cost (`count --cost`; `report --json`'s cost).

    Every billed call counts once: every branch and sidechain the file holds, a response split over
    several lines once (its usage from its last line), synthetic error lines never."""

    usd: float | None  # None when a call's model has no known price (unpriced_models; --prices FILE adds one)
    usd_by_part: DollarParts  # the priced calls
    tokens: TokenParts
    api_calls: int
    cache_hit_rate: float | None  # cache reads / every prompt token; None with no prompt at all
    cache_rebuilds: int  # main-chain calls that wrote most of their prompt to the cache again
    models: list[str]
    prices_per_mtok: dict[str, PricesReport]  # by model: its list prices
    long_context_calls: int  # calls over the model's long-prompt threshold, priced at its long-context rate
    fast_calls: int  # fast-mode calls (usage.speed "fast"), priced at the model's fast rate
    unpriced_models: list[str]


@dataclass(kw_only=True, slots=True)
class CallRow(Wire):
    """One API call: a point of the timeline (when `main`) and a row of the cost per turn."""

    turn: int  # 1-based, in file order, over every billed call
    line: int | None
    timestamp: str | None
    model: str | None
    main: bool  # on the main chain (the timeline); False: a sidechain or an abandoned branch
    prompt_tokens: int  # input + cache writes + cache reads: the context size the call was sent
    output_tokens: int
    tokens: TokenParts
    usd: float | None  # None: no price is known for its model
    cache_hit_rate: float | None  # this call's cache reads / its prompt
    cache_rebuilt: bool


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
