"""What a batch returns: each file's result or the error that stopped it, in the order found, and the
answers of count_many, validate_many, compact_many and context_management (ctxpipe.api re-exports
them). Kept out of api.py, whose import the status line pays for after every message."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar, cast

from ..core.wire import ABSENT, Absent

if TYPE_CHECKING:
    from ..core.api_edits import ApiEdits
    from ..core.errors import CtxpipeError
    from ..core.jsonl import ReadStats
    from ..core.reports import CompactReport, CompactRow, CompactSkipRow, CountReport, CountTotal, FailedFile, ValidateReport
    from .count import FileCount

Result = TypeVar("Result")
Row = TypeVar("Row")


@dataclass(frozen=True)
class FileResult(Generic[Result]):
    """One file of a batch: what its job returned, or the error that stopped it (the others went on)."""

    file: str  # as the batch names it: the path as given, or as found below a folder given
    result: Result | None = None
    error: CtxpipeError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class BatchResult(Generic[Result]):
    """A batch's files in the order found, each with its result or its error."""

    files: list[FileResult[Result]] = field(default_factory=list)

    @property
    def done(self) -> list[Result]:
        return [cast("Result", file.result) for file in self.files if file.error is None]

    @property
    def failures(self) -> list[CtxpipeError]:
        return [file.error for file in self.files if file.error is not None]

    def rows_in_order(self, rows_of: Callable[[Result], Iterable[Row]]) -> list[Row | FailedFile]:
        """A batch's --json rows in the order found: each file's own (`rows_of` its result), or, for a
        file that could not be read, its FailedFile row."""
        found: list[Row | FailedFile] = []
        for file in self.files:
            found.extend(rows_of(cast("Result", file.result)) if file.error is None else [failure_row(file)])
        return found


def batch_of(kind: type[Any], names: Sequence[str], results: Sequence[tuple[bool, Any]]) -> Any:
    """run_all's (ok, result or error) pairs as a batch's FileResults."""
    return kind([FileResult(name, value, None) if ok else FileResult(name, None, value) for name, (ok, value) in zip(names, results)])


@dataclass(frozen=True)
class CountBatch(BatchResult["FileCount"]):
    """count_many's answer: each file's count (`FileCount`: `.count_report()` is its `count --json` row)."""

    def rows(self) -> list[CountReport | FailedFile | CountTotal]:
        """What `count --json` prints (each row's `.to_wire()`): a row per file in the order found (its
        count, or the error that stopped it), and the total over those counted after several inputs."""
        from ..core.reports import CountReport

        rows: list[CountReport | FailedFile | CountTotal] = list(self.rows_in_order(lambda counted: [counted.count_report()]))
        if len(self.files) > 1:
            rows.append(count_total([row for row in rows if isinstance(row, CountReport)], len(self.failures)))
        return rows


def failure_row(file: FileResult[Any]) -> FailedFile:
    """A batch's row for a file that could not be read: the file, and why (the line in it, when known)."""
    assert file.error is not None  # a file that failed
    from ..core.reports import FailedFile

    return FailedFile.of(file.file, file.error)


def count_total(rows: Sequence[CountReport], failed: int) -> CountTotal:
    """The last row of `count --json` over several inputs: the sums over the files counted."""
    from ..core.reports import CountTotal

    usd: float | None | Absent = ABSENT
    if rows and rows[0].cost is not None:  # --cost: every row has one
        figures = [row.cost.usd if row.cost is not None else None for row in rows]
        usd = None if None in figures else round(sum(figure for figure in figures if figure is not None), 6)
    return CountTotal(
        files=len(rows),
        failed=failed,
        tokens=sum(row.tokens for row in rows),
        exact_tokens=sum(row.exact_tokens for row in rows),
        estimated_tokens=sum(row.estimated_tokens for row in rows),
        messages=sum(row.messages or 0 for row in rows) if all(row.messages is not None for row in rows) else None,
        usd=usd,
    )


class ValidatedFile(NamedTuple):
    """One file validated: its report (`.to_wire()` is the row `validate --json` prints), how its lines
    were read, and its name."""

    report: ValidateReport
    stats: ReadStats
    source: str


@dataclass(frozen=True)
class CompactBatch(BatchResult["CompactRow"]):
    """compact_many's answer: each file's report (or the row of a compaction side-call it skipped)."""

    @property
    def reports(self) -> list[CompactReport]:
        """The files compacted (not those skipped)."""
        from ..core.reports import CompactReport

        return [row for row in self.done if isinstance(row, CompactReport)]

    @property
    def skipped(self) -> list[CompactSkipRow]:
        """The compaction side-calls left out: nothing was written for them (their rows say why)."""
        from ..core.reports import CompactSkipRow

        return [row for row in self.done if isinstance(row, CompactSkipRow)]

    def rows(self) -> list[CompactRow | FailedFile]:
        """What `compact --json` prints: a row per file in the order found (its stages last, the long
        part: CompactReport's field order), a FailedFile row for a file that could not be compacted."""
        return self.rows_in_order(lambda row: [row])


class ContextManagement(NamedTuple):
    """What `api-edits` finds for one transcript: the edits (`.request`: the object it prints), the
    count their trigger came from, and how the lines were read (bad ones skipped, with on_error "skip")."""

    edits: ApiEdits
    counted: FileCount
    stats: ReadStats
