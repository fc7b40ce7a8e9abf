"""count's rows (schemas/count.report.schema.json); the parts each holds are in count_parts.py and
count_views.py, rollup's rows in rollup.py, warn's in warn.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..wire import Absent, Wire, sometimes, sometimes_null

if TYPE_CHECKING:  # annotations only
    from .cost import CostReport
    from .count_parts import Adjustment, BaselineReport, CalibrationReport, ReinjectedReport
    from .count_views import BreakdownRow, TimelinePoint, TopLine


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
