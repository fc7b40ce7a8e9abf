"""The JSON reports ctxpipe prints, as types: one dataclass per object of schemas/*.report.schema.json.

Each is a `Wire` (core/wire.py): the library returns it, and `to_wire()` gives the JSON object the
command prints, keys in field order. A key the schema requires is a field without a default; a key
present only sometimes (a stage that changed nothing has no `stage`, `cleared`, …) is declared
with `sometimes()` (or `sometimes_null()` when it may be null when present), and a stage's own keys
stand in its report's wire form through `spread()`. tests/test_report_schemas.py checks that each
type's keys are exactly its schema's properties, and that every key the type promises is one the
schema requires, so the two cannot drift apart.

The types live in one module per command family (parts, stages and a stage_<name> per stage,
compact, count, count_parts, count_views, rollup, warn, validate, cost, session), each loaded when
one of its names is first asked for here: a command builds dozens of dataclasses at import
otherwise, and a small run's start-up is mostly that (each costs about half a millisecond).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compact import CompactReport as CompactReport
    from .compact import CompactRow as CompactRow
    from .compact import CompactSkipRow as CompactSkipRow
    from .compact import StageRecord as StageRecord
    from .cost import CallRow as CallRow
    from .cost import CostReport as CostReport
    from .cost import DollarParts as DollarParts
    from .cost import TokenParts as TokenParts
    from .count import CountReport as CountReport
    from .count import CountTotal as CountTotal
    from .count_parts import Adjustment as Adjustment
    from .count_parts import BaselineReport as BaselineReport
    from .count_parts import BaselineSource as BaselineSource
    from .count_parts import CalibrationReport as CalibrationReport
    from .count_parts import CalibrationSource as CalibrationSource
    from .count_parts import ReinjectedItem as ReinjectedItem
    from .count_parts import ReinjectedKind as ReinjectedKind
    from .count_parts import ReinjectedReport as ReinjectedReport
    from .count_views import BreakdownRow as BreakdownRow
    from .count_views import TimelinePoint as TimelinePoint
    from .count_views import TopLine as TopLine
    from .parts import CacheDecisionReport as CacheDecisionReport
    from .parts import FailedFile as FailedFile
    from .parts import PricesReport as PricesReport
    from .parts import ToolFigures as ToolFigures
    from .rollup import RollupBy as RollupBy
    from .rollup import RollupRow as RollupRow
    from .rollup import RollupTotal as RollupTotal
    from .session import Advice as Advice
    from .session import ExcerptLine as ExcerptLine
    from .session import IndexRow as IndexRow
    from .session import SessionReport as SessionReport
    from .session import StageDryRun as StageDryRun
    from .session import TimelineEvent as TimelineEvent
    from .session import WindowPart as WindowPart
    from .session import WindowPartName as WindowPartName
    from .stage_collapse import CollapseExtras as CollapseExtras
    from .stage_collapse import CollapseReport as CollapseReport
    from .stage_collapse import Fold as Fold
    from .stage_extras import StageExtras as StageExtras
    from .stage_microcompact import MicrocompactExtras as MicrocompactExtras
    from .stage_microcompact import MicrocompactReport as MicrocompactReport
    from .stage_restore import PlanRow as PlanRow
    from .stage_restore import RestoreExtras as RestoreExtras
    from .stage_restore import RestoreReport as RestoreReport
    from .stage_snip import SnipExtras as SnipExtras
    from .stage_snip import SnipReport as SnipReport
    from .stage_summarize import KindRecall as KindRecall
    from .stage_summarize import LlmUsage as LlmUsage
    from .stage_summarize import MissingFact as MissingFact
    from .stage_summarize import SummarizeExtras as SummarizeExtras
    from .stage_summarize import SummarizeReport as SummarizeReport
    from .stage_summarize import VerificationReport as VerificationReport
    from .stages import CandidateKind as CandidateKind
    from .stages import Engine as Engine
    from .stages import Extras as Extras
    from .stages import FactKind as FactKind
    from .stages import StageName as StageName
    from .stages import StageReport as StageReport
    from .validate import FindingRow as FindingRow
    from .validate import ValidateReport as ValidateReport
    from .warn import WarnReport as WarnReport
    from .warn import WarnThresholds as WarnThresholds

# Each name, and the module of this package that defines it.
WHERE: dict[str, str] = {
    "FailedFile": "parts",
    "ToolFigures": "parts",
    "PricesReport": "parts",
    "CacheDecisionReport": "parts",
    "Engine": "stages",
    "FactKind": "stages",
    "CandidateKind": "stages",
    "StageName": "stages",
    "KindRecall": "stage_summarize",
    "MissingFact": "stage_summarize",
    "VerificationReport": "stage_summarize",
    "PlanRow": "stage_restore",
    "Fold": "stage_collapse",
    "LlmUsage": "stage_summarize",
    "MicrocompactExtras": "stage_microcompact",
    "CollapseExtras": "stage_collapse",
    "SnipExtras": "stage_snip",
    "SummarizeExtras": "stage_summarize",
    "RestoreExtras": "stage_restore",
    "StageExtras": "stage_extras",
    "Extras": "stages",
    "StageReport": "stages",
    "MicrocompactReport": "stage_microcompact",
    "CollapseReport": "stage_collapse",
    "SnipReport": "stage_snip",
    "SummarizeReport": "stage_summarize",
    "RestoreReport": "stage_restore",
    "StageRecord": "compact",
    "CompactReport": "compact",
    "CompactSkipRow": "compact",
    "CompactRow": "compact",
    "BaselineSource": "count_parts",
    "CalibrationSource": "count_parts",
    "BaselineReport": "count_parts",
    "CalibrationReport": "count_parts",
    "ReinjectedKind": "count_parts",
    "ReinjectedItem": "count_parts",
    "ReinjectedReport": "count_parts",
    "Adjustment": "count_parts",
    "BreakdownRow": "count_views",
    "TopLine": "count_views",
    "TimelinePoint": "count_views",
    "CountReport": "count",
    "CountTotal": "count",
    "RollupBy": "rollup",
    "RollupRow": "rollup",
    "RollupTotal": "rollup",
    "WarnThresholds": "warn",
    "WarnReport": "warn",
    "FindingRow": "validate",
    "ValidateReport": "validate",
    "TokenParts": "cost",
    "DollarParts": "cost",
    "CostReport": "cost",
    "CallRow": "cost",
    "TimelineEvent": "session",
    "ExcerptLine": "session",
    "WindowPartName": "session",
    "WindowPart": "session",
    "Advice": "session",
    "StageDryRun": "session",
    "SessionReport": "session",
    "IndexRow": "session",
}


def __getattr__(name: str) -> Any:
    """A report type, its module loaded on first use (PEP 562)."""
    where = WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # found once: the next lookup is a plain one
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *WHERE})
