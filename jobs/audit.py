"""`audit`: read a session and audit every compaction it records (core/audit.py does the checking)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..core.audit import CompactionAudit, SessionAudit, audit_session, session_total
from ..core.catalog import Prices
from ..core.jsonl import OnError, ReadStats, iter_buffer_entries
from ..core.reports import FailedFile
from ..files.inputs import detect_format, mapped, source_name
from ..files.sessions import COMPACTION_NOTE, is_compaction
from .results import BatchResult


@dataclass(frozen=True)
class AuditOptions:
    format: str | None = None
    on_error: OnError = "fail"
    tokenizer: str = "calibrated"  # what measures a summary and a re-read file (count's estimator)
    prices: tuple[tuple[str, Prices], ...] | None = None  # --prices FILE's table before the list prices


@dataclass
class FileAudit:
    """One session's audit: a row per compaction, then the session's total."""

    file: str
    format: str
    compactions: list[CompactionAudit]
    total: SessionAudit
    stats: ReadStats = field(default_factory=ReadStats)

    def rows(self) -> list[CompactionAudit | SessionAudit]:
        return [*self.compactions, self.total]


def audit_buffer(buffer: Any, source: str, options: AuditOptions = AuditOptions()) -> FileAudit:
    from .count import CountOptions

    transcript_format = detect_format(buffer, source, options.format)
    stats = ReadStats()
    entries = list(iter_buffer_entries(buffer, source, options.on_error, stats))
    counter = CountOptions(tokenizer=options.tokenizer).counter()
    rows = audit_session(transcript_format.compactions(entries), source, counter, options.prices or ())
    total = session_total(rows, source)
    if is_compaction(buffer, source):  # labelled as count and warn label it: it records no compaction of its own
        total = replace(total, kind="compaction", note=COMPACTION_NOTE)
    return FileAudit(source, transcript_format.name, rows, total, stats)


def audit_file(path: str | None, options: AuditOptions = AuditOptions(), shown: str | None = None) -> FileAudit:
    source = shown or source_name(path)
    with mapped(path, on_error=options.on_error) as buffer:
        return audit_buffer(buffer, source, options)


class AuditBatch(BatchResult[FileAudit]):
    def rows(self) -> list[CompactionAudit | SessionAudit | FailedFile]:
        """What `audit --json` prints: each session's compactions, then its total; a FailedFile row
        for a file that could not be read, in the order found."""
        return self.rows_in_order(FileAudit.rows)
