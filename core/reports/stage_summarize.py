"""summarize's --report-json (schemas/summarize.report.schema.json), and its verifier's findings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..wire import Wire, sometimes
from .stages import StageReport

if TYPE_CHECKING:  # annotations only
    from .stages import Engine, FactKind


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
class LlmUsage(Wire):
    """The usage the API reported for the summary request (neither key when it reported none)."""

    input_tokens: int | None = sometimes()
    output_tokens: int | None = sometimes()


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


SummarizeReport = StageReport[SummarizeExtras]
