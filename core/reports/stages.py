"""What every stage's --report-json shares (schemas/<stage>.report.schema.json): StageReport, which
spreads a stage's own keys (its extras, in stage_<name>.py: each loaded with its stage only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from ..wire import Wire, spread

Engine = Literal["session-memory", "llm", "offline"]


FactKind = Literal["instruction", "last-request", "file", "error", "fixed-error", "task", "current-work"]


CandidateKind = Literal["file", "plan", "plan-mode", "skill", "todos"]


StageName = str  # a stage of pipeline.PIPELINE (not listed here: adding a stage changes no type)


# What a stage's Outcome.report holds is its extras (every key present only sometimes: a stage that
# changed nothing has none, or only what it decided with); run_stage adds `file` and the figures.
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
