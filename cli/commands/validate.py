"""`ctxpipe validate`: check transcripts against the line schemas and the structural rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import streams
from ..flags import with_options
from ..options import Batch, Json, Reading
from ..status import ExitStatus
from ..tables import Column

if TYPE_CHECKING:  # types only
    from ...core.reports import FailedFile, ValidateReport


@with_options(reading=Reading, batch=Batch)
def validate(
    reading: Reading,
    batch: Batch,
    json_output: Json = False,
) -> None:
    """Check each line against its format's JSON Schema and the transcript's structure.

    Structure: every tool_result follows a tool_use with its id, pairs are whole in the active
    context, the lines of one API response (message.id) agree, and parent links name a line and
    never loop back. Bad lines are listed as errors; with --on-error=skip they are only counted.
    Folders (and store prefixes) are searched for session files, as count does; one
    file of 32 MiB or more has its schema check shared with a second process (the
    same report; --jobs 1 keeps it to one). Errors exit 1; warnings alone exit 0.

    Example:  ctxpipe validate ~/.claude/projects/my-project/
    """
    from ...core.jsonl import no_cycle_collection
    from .. import declare

    with no_cycle_collection():  # a row for each finding, held until written (what it holds is freed before)
        failed = _validated(reading, batch, json_output)
    if failed:
        raise declare.Exit(ExitStatus.ERROR)


def _validated(reading: Reading, batch: Batch, json_output: bool) -> bool:
    """Validate and print what was found; whether anything was wrong (an error, an unreadable file)."""
    from ... import api
    from ...core.reports import FailedFile
    from ..batch import find_inputs

    if batch.from_stdin:
        # stdin is read here (a worker has none); files where the batch runs, results in order.
        results = api.validate_many([streams.STDIN], reading.format, reading.errors)
    else:
        files = find_inputs(batch.paths or [], batch.subagents)
        results = api.validate_many(
            batch.paths or [], reading.format, reading.errors, files=files, progress=streams.batch_progress("validating"), **batch.run_on
        )
    # A file that cannot be read at all (or a path that names nothing): one error line and a failed
    # row in its place; the other files are still checked.
    rows = results.rows_in_order(lambda validated: [validated.report])
    for error in results.failures:
        streams.error(str(error))
    for validated in results.done:
        if reading.errors != "fail":
            streams.report_skipped(validated.stats, validated.source)
    failed = any(isinstance(row, FailedFile) or not row.valid for row in rows)
    if batch.one_transcript:  # one file that failed is its error line alone, as for every filter
        rows = [row for row in rows if not isinstance(row, FailedFile)]
    if json_output or not streams.stdout_is_terminal():
        streams.write_json_lines([row.to_wire() for row in rows])
    else:
        _print_tables(rows, batch.paths or [])
    return failed


# A finding's columns; a narrow terminal leaves out the largest priority number first (0: always shown).
FINDING_COLUMNS = [Column("line", "number", 0), Column("severity", "label", 2), Column("code", "label", 1), Column("message", "text", 0)]


def _print_tables(reports: Sequence[ValidateReport | FailedFile], given: list[str]) -> None:
    from ...core.reports import FailedFile
    from ..tables import display_names, fitted_name, print_failed, print_table
    from ..terminal import shown_text

    console = streams.stdout_console()
    names = display_names([report.file for report in reports], given)
    for report in reports:
        if isinstance(report, FailedFile):  # why is on stderr, just above
            print_failed(console, names[report.file], "bold")
            continue
        verdict = shown_text("valid", "green") if report.valid else shown_text("invalid", "red")
        rest = shown_text(f" ({report.format}, {report.entries} entries): ") + verdict + f", {report.errors} errors, {report.warnings} warnings"
        if report.note is not None:
            rest += shown_text(f" ({report.note})")
        console.print(fitted_name(console, names[report.file], rest.cell_len, "bold") + rest)
        if report.findings:
            # Messages quote the transcript's values (ids, types, schema errors): shown, never markup.
            rows = []
            for finding in report.findings:
                style = "red" if finding.severity == "error" else "yellow"
                rows.append([str(finding.line or ""), shown_text(finding.severity, style), shown_text(finding.code), shown_text(finding.message)])
            print_table(console, FINDING_COLUMNS, rows)
