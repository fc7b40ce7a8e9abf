"""compact's rows (schemas/compact.report.schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Union

from ..wire import Absent, Wire, sometimes, sometimes_null

if TYPE_CHECKING:  # annotations only
    from .stage_summarize import VerificationReport
    from .stages import Engine, StageName


@dataclass(kw_only=True, slots=True)
class StageRecord(Wire):
    """One stage's line in compact's report. The figures are missing only from summarize's
    'not needed' record; why/engine/verification belong to summarize."""

    stage: StageName
    changed: bool
    note: str
    why: str | None = sometimes()
    engine: Engine | None | Absent = sometimes_null()
    verification: VerificationReport | None | Absent = sometimes_null()
    fallback_reason: str | None = sometimes()  # summarize: why the model's summary failed, when the offline engine stood in
    tokens_before: int | None = sometimes()
    tokens_after: int | None = sometimes()
    tokens_freed: int | None = sometimes()


@dataclass(kw_only=True, slots=True)
class CompactReport(Wire):
    """A compacted file: what compact_buffer returns, and (with output, and backup) a row of `compact --json`."""

    file: str
    format: str  # a registered format (formats.NAMES; not listed here: adding a format changes no type)
    tokens_before: int
    tokens_after: int
    changed: bool
    skipped_lines: int
    output: str | None = sometimes()  # set by the batch, which writes the file
    backup: str | None = sometimes()  # --in-place --backup, for a file that changed
    stages: list[StageRecord]  # last: the long part


@dataclass(kw_only=True, slots=True)
class CompactSkipRow(Wire):
    """A row of `compact --json` for a compaction side-call: not a session, not compacted."""

    file: str
    kind: Literal["compaction"] = "compaction"
    skipped: str
    changed: Literal[False] = False
    output: None = None


CompactRow = Union[CompactReport, CompactSkipRow]
