"""restore's --report-json (schemas/restore.report.schema.json) and `restore --plan`'s rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..wire import Wire, sometimes
from .stages import StageReport

if TYPE_CHECKING:  # annotations only
    from .stages import CandidateKind


@dataclass(kw_only=True, slots=True)
class PlanRow(Wire):
    """A restore candidate (core.restore.Candidate): a row of `restore --plan`, an item of restore's report."""

    kind: CandidateKind
    name: str
    tokens: int
    chosen: bool
    reason: str


@dataclass(kw_only=True, slots=True)
class RestoreExtras(Wire):
    stage: Literal["restore"] | None = sometimes()
    restored: list[PlanRow] | None = sometimes()
    tokens: int | None = sometimes()
    skipped: list[PlanRow] | None = sometimes()
    disk: str | None = sometimes()


RestoreReport = StageReport[RestoreExtras]
