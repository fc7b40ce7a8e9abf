"""What report_many returns: each session's row of the index page (and its report, when asked for
instead of a page), and the index page over them (ctxpipe.api re-exports them)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
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
    given: tuple[str, ...] = field(default=())  # the files and folders asked for: the index's rows are placed below them

    def index_rows(self) -> list[IndexRow]:
        """The index page's rows: each session's, a file that failed with its error."""
        return [
            file.result.row if file.result is not None else index_row(file.file, None, None, str(file.error), place(file.file, self.given))
            for file in self.files
        ]

    def index_html(self) -> str:
        """The index page listing every session (written to `index` by `report --out-dir`)."""
        from .page import index_page

        sessions = len(self.files)
        return index_page(self.index_rows(), title=f"ctxpipe report: {sessions} session{'s' if sessions != 1 else ''}")


def place(shown: str, given: Sequence[str]) -> tuple[str, str]:
    """(project, name) of a session found as `shown` below one of the folders `given`: the project is
    the folder holding it relative to the folder given (a subagent's, the one holding its session:
    Claude Code keeps them in PROJECT/SESSION/subagents/), else the folder's own name; the name is
    the rest. A file given by name is ("", the path as given)."""
    from ..files.storage import below, is_remote

    for root in given:
        relative = below(shown, root)
        if relative is None:
            continue
        parts = relative.split("/")
        holder = parts.index("subagents") - 1 if "subagents" in parts[1:-1] else len(parts) - 1
        folder = root.rstrip("/") if is_remote(root) else os.path.abspath(os.path.expanduser(root))
        project = "/".join(parts[:holder]) or os.path.basename(folder) or folder
        return project, "/".join(parts[holder:])
    return "", shown


def index_row(shown: str, page: str | None, data: SessionReport | None, error: str | None, placed: tuple[str, str] | None = None) -> IndexRow:
    """A session's row of the index page: its page's link, a few figures, or the error that stopped it."""
    from ..core.reports import IndexRow

    project, name = placed or ("", shown)
    if data is None:
        return IndexRow(
            file=shown,
            page=page,
            project=project,
            name=name,
            title=None,
            kind=None,
            model=None,
            tokens=None,
            percent_of_window=None,
            level=None,
            usd=None,
            last_activity=None,
            error=error,
        )
    return IndexRow(
        file=shown,
        page=page,
        project=project,
        name=name,
        title=data.title,
        kind=data.kind,
        model=data.model,
        tokens=data.count.tokens,
        percent_of_window=data.count.percent_of_window,
        level=data.warn.level,
        usd=data.cost.usd,
        last_activity=data.last_activity,
        error=error,
    )
