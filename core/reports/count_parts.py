"""What every count makes beside its figure (core.count): the baseline, the calibration, what
Claude Code re-injected, and the adjustments (schemas/count.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..wire import Wire, sometimes

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
