"""`ctxpipe warn`: the warning level of a transcript's active context, as an exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from .. import declare, streams
from ..budget_options import Budget
from ..flags import with_options
from ..options import Batch, Explain, Json, Reading
from ..status import ExitStatus

if TYPE_CHECKING:  # types only
    from ...core.reports import WarnReport

LEVEL_EXIT = {"normal": 0, "warning": 3, "autocompact": 4, "blocking": 5}
LEVEL_STYLE = {"normal": "green", "warning": "yellow", "autocompact": "magenta", "blocking": "bold red"}


@with_options(batch=Batch, reading=Reading, budget=Budget)
def warn(
    batch: Batch,
    reading: Reading,
    budget: Budget,
    json_output: Json = False,
    explain: Explain = False,
    pass_through: Annotated[
        bool, declare.Option("--pass-through", help="Copy the input to stdout unchanged and report on stderr, to sit inside a pipe.")
    ] = False,
) -> None:
    """Report the context's level and exit with it: 0 normal, 3 warning, 4 autocompact, 5 blocking.

    Thresholds follow Claude Code: effective window = window − min(max output, 20,000);
    autocompact = effective − 13,000; warning = autocompact − 20,000; blocking = effective − 3,000.
    The environment variables Claude Code reads (CLAUDE_CODE_AUTO_COMPACT_WINDOW,
    CLAUDE_AUTOCOMPACT_PCT_OVERRIDE, CLAUDE_CODE_MAX_OUTPUT_TOKENS,
    CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE, DISABLE_AUTO_COMPACT, DISABLE_COMPACT) apply; flags win.
    A Gemini CLI chat follows Gemini CLI instead: it compresses at half the window (autocompact and
    warning), and the window blocks; of the flags only --window applies.

    A file written by Claude Code's compaction side-call (agent-acompact-*.jsonl, or lines whose
    agentId starts with acompact-) is not a session: its level is reported, marked as such, and the
    exit code is 0 whatever the level. Over several files or folders, each file's level is reported
    and the exit code is the highest level's (1 when a file could not be read).

    Example:  ctxpipe warn session.jsonl || ctxpipe compact --in-place session.jsonl
    """
    from ... import api

    options = budget.count_options(reading)
    as_json = json_output or not streams.stdout_is_terminal()
    if batch.one_transcript:
        # A filter: one transcript, whose failure is its one error line (no row), as every stage's.
        def copy_on(buffer: Any) -> None:
            with streams.open_output(None) as out:
                out.write(buffer)

        path = None if batch.from_stdin or not batch.paths else batch.paths[0]
        result = api.warn_count(path, options, copy_on if pass_through else None)
        results = api.CountBatch([api.FileResult(streams.source_name(path), result)])
    elif pass_through:
        raise declare.BadParameter("copies one transcript: give one file, or stdin", param_hint="--pass-through")
    else:
        from ..batch import find_inputs

        files = find_inputs(batch.paths or [], batch.subagents)
        results = api.count_many(batch.paths or [], options, files=files, progress=streams.batch_progress("checking"), **batch.run_on)
    raise declare.Exit(_report(results, as_json and not pass_through, explain, to_stderr=pass_through))


def _exit_code(report: WarnReport) -> int:
    return 0 if report.kind == "compaction" else LEVEL_EXIT[report.level]


def _report(results: Any, as_json: bool, explain: bool, to_stderr: bool) -> int:
    """Each file's level, in the order found (a file that failed: its row), and the exit code: the
    highest level's, or 1 when a file failed. `--explain` goes to stderr under each level shown;
    the JSON rows carry it already."""
    from ...core.reports import FailedFile
    from ..tables import print_failed

    for failure in results.failures:
        streams.error(str(failure))
    for result in results.done:
        streams.skipped_lines(result.file, result.skipped_lines)
    rows = results.rows_in_order(lambda result: [result.warn_report()])
    if as_json:
        streams.write_json_lines([row.to_wire() for row in rows])
    else:
        for result, row in zip(results.files, rows):
            if isinstance(row, FailedFile):
                print_failed(streams.stdout_console(), row.file)
                continue
            _print_brief(row, to_stderr)
            if explain:
                _print_explanation(result.result)
    reports = [row for row in rows if not isinstance(row, FailedFile)]
    return ExitStatus.ERROR if results.failures else max((_exit_code(report) for report in reports), default=0)


def _print_brief(report: WarnReport, to_stderr: bool) -> None:
    from ..tables import fitted_name
    from ..terminal import shown_text

    console = streams.stderr_console() if to_stderr else streams.stdout_console()
    level = report.level
    autocompact = report.thresholds.autocompact
    target = f"autocompact at {autocompact:,}" if autocompact is not None else "autocompact off"
    # The file as given, shortened in the middle to leave its level and size on the line; the rest wraps.
    console.print(
        fitted_name(console, report.file, len(f": {level} — {report.tokens:,} tokens "))
        + ": "
        + shown_text(level, LEVEL_STYLE[level])
        + f" — {report.tokens:,} tokens "
        f"({report.percent_used}% of {report.context_window:,}; {report.percent_left}% left before {target})"
        + (f" — {report.note}" if report.note is not None else "")
    )


def _print_explanation(result: Any) -> None:
    from ..terminal import shown_text

    # On stderr, as --explain's help says: stdout keeps only the level. The lines quote the model
    # name and the environment's values as given.
    console = streams.stderr_console()
    for line in result.thresholds.explanations:
        console.print(shown_text(f"  {line}"))
    for line in result.thresholds.ignored:
        console.print(shown_text(f"  {line}", "yellow"))
