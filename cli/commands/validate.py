"""`ctxpipe validate`: check transcripts against the line schemas and the structural rules."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .. import streams
from ..flags import with_options
from ..options import Batch, Json, Reading
from ..status import ExitStatus
from ..tables import Column

if TYPE_CHECKING:
    from ...files.inputs import EntryStream


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
    Folders (and store prefixes) are searched for session files, as count does. Errors exit 1;
    warnings alone exit 0.

    Example:  ctxpipe validate ~/.claude/projects/my-project/
    """
    import functools

    import typer

    from ...jobs.batch import Runner, for_workers, run_all
    from ..batch import find_inputs

    missing: list[Any] = []  # a path that names nothing: one error line, the other files are still checked
    if batch.from_stdin:
        items = [(streams.STDIN, streams.STDIN)]
    else:
        items = [(for_workers(str(file.path), batch.runner), file.shown) for file in find_inputs(batch.paths or [], batch.subagents, missing.append)]
    job = functools.partial(validate_one, format_name=reading.format, errors=reading.errors)
    # stdin is read here (a worker has none); files where the batch runs, results in order.
    results = run_all(job, items, Runner() if batch.from_stdin else batch.runner, _sizes(items)) if items else []
    reports: list[dict[str, Any]] = []
    unreadable = 0
    for error in missing:
        streams.error(str(error))
        unreadable += 1
    for ok, value in results:
        if not ok:  # a file that cannot be read at all is one error line; the other files are still checked
            streams.error(str(value))
            unreadable += 1
            continue
        report, stats, source = value
        if reading.errors != "fail":
            streams.report_skipped(stats, source)
        reports.append(report)
    if json_output or not streams.stdout_is_terminal():
        streams.write_json_lines(reports)
    else:
        _print_tables(reports, batch.paths or [])
    if unreadable or any(not report["valid"] for report in reports):
        raise typer.Exit(ExitStatus.ERROR)


def _sizes(items: list[tuple[str, str]]) -> int:
    from ...files.storage import is_remote

    return sum(os.path.getsize(path) for path, _ in items if not is_remote(path) and os.path.isfile(path))


def validate_one(item: tuple[str, str], format_name: str | None, errors: str) -> tuple[dict[str, Any], Any, str]:
    """One file's report (the line --json prints), its read statistics and its name; a file that
    cannot be read raises. Runs where the batch runs (a worker process, a cluster)."""
    path, source = item
    with _no_cycle_collection(), streams.open_input(None if path == streams.STDIN else path) as stream:
        opened = streams.stream_entries(stream, source, format_name, "skip")
        report = _report(opened, source, errors)
    return report, opened.stats, source


def _report(opened: EntryStream, source: str, errors: str) -> dict[str, Any]:
    from ...core.model import Finding
    from ...core.validate import checked_entries, sort_findings

    schema: list[Finding] = []
    entries = []
    for entry in checked_entries(opened.entries, opened.format.schema, schema):  # each line checked as it is read
        entry.raw = None  # the structural check needs the objects only: the bytes' memory holds the next lines
        entries.append(entry)
    findings: list[Finding] = []
    if errors == "fail":
        findings += [Finding("error", "bad-line", what, line) for line, what in opened.stats.problems]
    findings += schema
    findings += opened.format.check(entries)
    findings = sort_findings(findings)
    count = sum(1 for finding in findings if finding.severity == "error")
    return {
        "file": source,
        "format": opened.format.name,
        "entries": len(entries),
        "valid": count == 0,
        "errors": count,
        "warnings": len(findings) - count,
        "findings": [finding.as_dict() for finding in findings],
    }


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cycle collector off while a file is read whole and checked (its entries are gone by the
    end). Parsed lines hold no reference cycles, so there is nothing for it to free; but as the
    entries pile up it walks all of them again and again (about a third of validate's time on
    200,000 lines, and as much again while the findings of as many failing lines are listed)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# A finding's columns; a narrow terminal leaves out the largest priority number first (0: always shown).
FINDING_COLUMNS = [Column("line", "number", 0), Column("severity", "label", 2), Column("code", "label", 1), Column("message", "text", 0)]


def _print_tables(reports: list[dict[str, Any]], given: list[str]) -> None:
    from ..tables import display_names, fitted_name, print_table
    from ..terminal import shown_text

    console = streams.stdout_console()
    names = display_names([report["file"] for report in reports], given)
    for report in reports:
        verdict = shown_text("valid", "green") if report["valid"] else shown_text("invalid", "red")
        rest = shown_text(f" ({report['format']}, {report['entries']} entries): ") + verdict + f", {report['errors']} errors, {report['warnings']} warnings"
        console.print(fitted_name(console, names[report["file"]], rest.cell_len, "bold") + rest)
        if report["findings"]:
            # Messages quote the transcript's values (ids, types, schema errors): shown, never markup.
            rows = []
            for finding in report["findings"]:
                style = "red" if finding["severity"] == "error" else "yellow"
                rows.append([str(finding["line"] or ""), shown_text(finding["severity"], style), shown_text(finding["code"]), shown_text(finding["message"])])
            print_table(console, FINDING_COLUMNS, rows)
