"""Each stage's --report-json (schemas/<stage>.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar, Union

from ..wire import Wire, sometimes, spread

if TYPE_CHECKING:  # annotations only
    from .parts import CacheDecisionReport, ToolFigures


Engine = Literal["session-memory", "llm", "offline"]


FactKind = Literal["instruction", "last-request", "file", "error", "fixed-error", "task", "current-work"]


CandidateKind = Literal["file", "plan", "plan-mode", "skill", "todos"]


StageName = str  # a stage of pipeline.PIPELINE (not listed here: adding a stage changes no type)


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
