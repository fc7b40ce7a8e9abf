"""What report_many returns: each session's row of the index page (and its report, when asked for
instead of a page), and the index page over them (ctxpipe.api re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ..jobs.results import BatchResult

if TYPE_CHECKING:
    from ..core.reports import IndexRow, SessionReport

INDEX = "index.html"  # report's index page of a folder's sessions


class ReportedFile(NamedTuple):
    """One session of report_many: its row of the index page, its report (when asked for instead of
    a page) and how many bad lines were skipped reading it."""

    row: IndexRow
    report: SessionReport | None
    skipped_lines: int


@dataclass(frozen=True)
class ReportBatch(BatchResult[ReportedFile]):
    """report_many's answer, and its index page (`index`: where it goes, with out_dir)."""

    index: str | None = None

    def index_rows(self) -> list[IndexRow]:
        """The index page's rows: each session's, a file that failed with its error."""
        return [file.result.row if file.result is not None else index_row(file.file, None, None, str(file.error)) for file in self.files]

    def index_html(self) -> str:
        """The index page listing every session (written to `index` by `report --out-dir`)."""
        from .page import index_page

        sessions = len(self.files)
        return index_page(self.index_rows(), title=f"ctxpipe report: {sessions} session{'s' if sessions != 1 else ''}")


def index_row(shown: str, page: str | None, data: SessionReport | None, error: str | None) -> IndexRow:
    """A session's row of the index page: its page's link, a few figures, or the error that stopped it."""
    from ..core.reports import IndexRow

    if data is None:
        return IndexRow(file=shown, page=page, model=None, tokens=None, percent_of_window=None, level=None, usd=None, last_activity=None, error=error)
    return IndexRow(
        file=shown,
        page=page,
        model=data.model,
        tokens=data.count.tokens,
        percent_of_window=data.count.percent_of_window,
        level=data.warn.level,
        usd=data.cost.usd,
        last_activity=data.last_activity,
        error=error,
    )
