"""`ctxpipe snip`: remove a range of history on request."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..options import Format, InputPath, OnError, Output, Unbuffered
from ..stages import Ledger, Now, Report, ReportJson, parse_now, run_stage


def snip(
    path: InputPath = None,
    input_format: Format = None,
    output: Output = None,
    before: Annotated[
        Optional[str], typer.Option("--before", help="Remove what lies between the opening message and the message holding this uuid.", show_default=False)
    ] = None,
    range_: Annotated[Optional[str], typer.Option("--range", help="Remove A..B (uuids or line numbers), inclusive.", show_default=False)] = None,
    keep_last: Annotated[
        Optional[int], typer.Option("--keep-last", help="Keep the opening message and the last N messages of the active context.", min=1, show_default=False)
    ] = None,
    no_marker: Annotated[bool, typer.Option("--no-marker", help="Do not append the snip_boundary record.")] = False,
    now: Now = None,
    report: Report = False,
    report_json: ReportJson = None,
    ledger: Ledger = None,
    unbuffered: Unbuffered = False,
    on_error: OnError = "fail",  # type: ignore[assignment]
) -> None:
    """Remove a range of the active context, widened so no tool pair or response is split.

    Give exactly one of --before, --range, --keep-last. The opening message of the active context
    (the task, or the compact summary) stays with --before and --keep-last, so the context still
    starts with a user turn; a tail that would begin inside a tool pair keeps a little more. Lines
    whose parent was removed are
    re-parented to the nearest line that stays; a snip_boundary record lists the removed uuids
    and the tokens they held (which `count` subtracts). Line numbers count from 1 in the input.

    Example:  ctxpipe snip --keep-last 40 --ledger undo.jsonl session.jsonl > shorter.jsonl
    """
    from ...core.snip import SnipConfig
    from ...core.snip import snip as run

    chosen = [name for name, value in (("--before", before), ("--range", range_), ("--keep-last", keep_last)) if value is not None]
    if len(chosen) != 1:
        raise typer.BadParameter("give exactly one of --before, --range, --keep-last", param_hint="snip")
    span = None
    if range_ is not None:
        if ".." not in range_:
            raise typer.BadParameter("expected A..B", param_hint="--range")
        start, end = range_.split("..", 1)
        span = (start.strip(), end.strip())
    config = SnipConfig(before, span, keep_last, not no_marker, parse_now(now))

    def transform(entries: list, fmt: object, _measure: object) -> object:
        return run(entries, fmt, config, _snipped_before(entries))

    # Line numbers need every line counted; uuids and --keep-last need only the active context.
    by_line = span is not None and any(part.isdigit() for part in span)
    outcome = run_stage("snip", path, input_format, on_error, output, ledger, report_json, transform, unbuffered, whole=by_line)
    if report:
        from .. import io

        io.note(f"snip: {outcome.report}")


def _snipped_before(entries: list) -> set[str]:
    """uuids earlier snip records removed, so a repeated snip is a quiet no-op, not an error."""
    found: set[str] = set()
    for entry in entries:
        metadata = entry.obj.get("snipMetadata")
        if entry.obj.get("subtype") == "snip_boundary" and isinstance(metadata, dict):
            found.update(str(u) for u in metadata.get("removedUuids", []))
    return found
