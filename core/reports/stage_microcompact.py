"""microcompact's --report-json (schemas/microcompact.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..wire import Wire, sometimes
from .stages import StageReport

if TYPE_CHECKING:  # annotations only
    from .parts import CacheDecisionReport, ToolFigures


@dataclass(kw_only=True, slots=True)
class MicrocompactExtras(Wire):
    stage: Literal["microcompact"] | None = sometimes()
    cleared: int | None = sometimes()
    removed_estimate: int | None = sometimes()
    tokens_saved: int | None = sometimes()
    by_tool: dict[str, ToolFigures] | None = sometimes()
    cache: CacheDecisionReport | None = sometimes()  # --cache-aware, also when it decided not to clear


MicrocompactReport = StageReport[MicrocompactExtras]
