"""collapse's --report-json (schemas/collapse.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..wire import Wire, sometimes
from .stages import StageReport

if TYPE_CHECKING:  # annotations only
    from .parts import ToolFigures


@dataclass(kw_only=True, slots=True)
class Fold(Wire):
    """One result collapse folded into a pointer to a later identical one."""

    tool_use_id: str
    tool: str
    survivor: str
    tokens: int


@dataclass(kw_only=True, slots=True)
class CollapseExtras(Wire):
    stage: Literal["collapse"] | None = sometimes()
    folded: int | None = sometimes()
    removed_estimate: int | None = sometimes()
    tokens_saved: int | None = sometimes()
    by_tool: dict[str, ToolFigures] | None = sometimes()
    folds: list[Fold] | None = sometimes()


CollapseReport = StageReport[CollapseExtras]
