"""`ctxpipe validate`: check transcripts against the line schemas and the structural rules."""

from __future__ import annotations

from typing import Any

from .. import streams
from ..flags import with_options
from ..options import InputPaths, Json, Reading
from ..status import ExitStatus


@with_options(reading=Reading)
def validate(
    reading: Reading,
    paths: InputPaths = None,
    json_output: Json = False,
) -> None:
    """Check each line against its format's JSON Schema and the transcript's structure.

    Structure: every tool_result follows a tool_use with its id, pairs are whole in the active
    context, the lines of one API response (message.id) agree, and parent links name a line and
    never loop back. Bad lines are listed as errors; with --on-error=skip they are only counted.
    Errors exit 1; warnings alone exit 0.

    Example:  ctxpipe validate ~/.claude/projects/my-project/*.jsonl
    """
    import typer

    from ...core.errors import CtxpipeError
    from ...core.model import Finding
    from ...core.validate import schema_findings, sort_findings

    reports: list[dict[str, Any]] = []
    unreadable = 0
    for path in paths or [streams.STDIN]:
        source = streams.source_name(path)
        try:  # a file that cannot be read at all is one error line; the other files are still checked
            with streams.open_input(path) as stream:
                opened = streams.stream_entries(stream, source, reading.format, "skip")
                entries = list(opened.entries)
        except CtxpipeError as exc:
            streams.error(str(exc))
            unreadable += 1
            continue
        findings: list[Finding] = []
        if reading.errors == "fail":
            findings += [Finding("error", "bad-line", what, line) for line, what in opened.stats.problems]
        else:
            streams.report_skipped(opened.stats, source)
        findings += schema_findings(entries, opened.format.schema)
        findings += opened.format.check(entries)
        findings = sort_findings(findings)
        errors = sum(1 for finding in findings if finding.severity == "error")
        reports.append(
            {
                "file": source,
                "format": opened.format.name,
                "entries": len(entries),
                "valid": errors == 0,
                "errors": errors,
                "warnings": len(findings) - errors,
                "findings": [finding.as_dict() for finding in findings],
            }
        )
    if json_output or not streams.stdout_is_terminal():
        streams.write_json_lines(reports)
    else:
        _print_tables(reports)
    if unreadable or any(not report["valid"] for report in reports):
        raise typer.Exit(ExitStatus.ERROR)


def _print_tables(reports: list[dict[str, Any]]) -> None:
    from rich.table import Table

    from ..terminal import shown_text

    console = streams.stdout_console()
    for report in reports:
        verdict = shown_text("valid", "green") if report["valid"] else shown_text("invalid", "red")
        console.print(
            shown_text(report["file"], "bold")
            + shown_text(f" ({report['format']}, {report['entries']} entries): ")
            + verdict
            + f", {report['errors']} errors, {report['warnings']} warnings"
        )
        if report["findings"]:
            # Messages quote the transcript's values (ids, types, schema errors): shown, never markup.
            table = Table("line", "severity", "code", "message", show_edge=False)
            for finding in report["findings"]:
                style = "red" if finding["severity"] == "error" else "yellow"
                table.add_row(str(finding["line"] or ""), shown_text(finding["severity"], style), shown_text(finding["code"]), shown_text(finding["message"]))
            console.print(table)
