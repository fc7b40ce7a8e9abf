"""warn's report (schemas/warn.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..wire import Wire, sometimes


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
