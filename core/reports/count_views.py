"""The views of one active context count gives on request: --by role|block|tool, --top, --timeline
(schemas/count.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..wire import Wire, sometimes


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
