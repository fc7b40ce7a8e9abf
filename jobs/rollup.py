"""The I/O around core.rollup: one file's billed calls (`calls_file`, a batch's job) and the batch's rows.

Every line is read (the calls are all through the file), with the same calls and prices as
`count --cost` (core.cost.session_cost); the title, the cwd and a subagent's session id are found by
a byte search and only the lines found are parsed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any

from ..core.jsonl import LineIndex, ReadStats, iter_buffer_entries
from ..core.reports import FailedFile, RollupBy, RollupRow, RollupTotal
from ..core.rollup import FileCalls, RollupCall, Window, rollup
from ..core.titles import buffer_title
from ..files.inputs import detect_format, mapped, source_name
from ..files.sessions import Kind, decoded_project, first_recorded, kind_read, session_place
from .count import SMALL_FILE, CountOptions
from .results import BatchResult, failure_row


def calls_buffer(buffer: Any, source: str, options: CountOptions, kind: Kind | None = None, path: str | None = None) -> FileCalls:
    """The billed calls of the transcript in `buffer` (bytes or an mmap) and where they roll up;
    `path` is where the file lies (None: stdin), `kind` what its name says."""
    from ..core.cost import session_cost

    kind = kind_read(buffer, kind) or "main"
    transcript_format = detect_format(buffer, source, options.format)
    stats = ReadStats()
    # A big file is indexed, not held parsed: memory is the index, as count --cost reads it.
    entries = (
        list(iter_buffer_entries(buffer, source, options.on_error, stats)) if len(buffer) <= SMALL_FILE else LineIndex(buffer, source, options.on_error, stats)
    )
    calls = transcript_format.api_calls(entries)
    priced = session_cost(calls, entries, (), options.prices or ()).calls
    found = []
    for call, row in zip(calls, priced):
        last = entries[call.entries[-1]].obj if call.entries else {}
        message = last.get("message")
        message_id = message.get("id") if isinstance(message, dict) else None
        request = last.get("requestId")
        key = f"{message_id}:{request}" if isinstance(message_id, str) and isinstance(request, str) else None
        found.append(RollupCall(key, row.timestamp, row.model, row.tokens, row.usd))
    where = path or source
    session, folder = session_place(where, kind, first_recorded(buffer, "sessionId") if kind != "main" else None)
    cwd = first_recorded(buffer, "cwd")
    main = kind == "main"
    return FileCalls(
        file=source,
        session=session,
        session_key=f"{folder}/{session}",
        project=cwd or (decoded_project(folder) if path is not None else source),
        main=main,
        title=buffer_title(buffer) if main else None,
        calls=found,
        skipped_lines=stats.skipped,
    )


def calls_file(path: str | None, options: CountOptions = CountOptions(), kind: Kind | None = None, shown: str | None = None) -> FileCalls:
    with mapped(path, on_error=options.on_error) as buffer:
        return calls_buffer(buffer, shown or source_name(path), options, kind, path)


@dataclass(frozen=True)
class RollupBatch(BatchResult[FileCalls]):
    """rollup_many's answer: each file's calls, or the error that stopped it."""

    def rows(self, by: RollupBy, zone: tzinfo | None = None, window: Window = Window()) -> list[RollupRow | FailedFile | RollupTotal]:
        """What `count --by <by> --json` prints: a row per group, a row per file that failed, the total."""
        *groups, total = rollup(self.done, by, zone, window, len(self.failures))
        failures: Sequence[FailedFile] = [failure_row(file) for file in self.files if file.error is not None]
        return [*groups, *failures, total]
