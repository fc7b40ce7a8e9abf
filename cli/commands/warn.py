"""`ctxpipe warn`: the warning level of a transcript's active context, as an exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from .. import declare, streams
from ..budget_options import Budget
from ..flags import with_options
from ..options import Explain, InputPath, Json, Reading

if TYPE_CHECKING:  # types only
    from ...core.reports import WarnReport

LEVEL_EXIT = {"normal": 0, "warning": 3, "autocompact": 4, "blocking": 5}
LEVEL_STYLE = {"normal": "green", "warning": "yellow", "autocompact": "magenta", "blocking": "bold red"}


@with_options(reading=Reading, budget=Budget)
def warn(
    reading: Reading,
    budget: Budget,
    path: InputPath = None,
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

    A file written by Claude Code's compaction side-call (agent-acompact-*.jsonl, or lines whose
    agentId starts with acompact-) is not a session: its level is reported, marked as such, and the
    exit code is 0 whatever the level.

    Example:  ctxpipe warn session.jsonl || ctxpipe compact --in-place session.jsonl
    """
    from ...api import warn_count

    def copy_on(buffer: Any) -> None:
        with streams.open_output(None) as out:
            out.write(buffer)

    source = streams.source_name(path)
    result = warn_count(path, budget.count_options(reading), copy_on if pass_through else None)
    streams.skipped_lines(source, result.skipped_lines)
    report = result.warn_report()
    if pass_through:
        _print_brief(report, to_stderr=True)
    elif json_output or not streams.stdout_is_terminal():
        streams.write_json_lines([report.to_wire()])
    else:
        _print_brief(report, to_stderr=False)
    if explain and (pass_through or not (json_output or not streams.stdout_is_terminal())):
        _print_explanation(result, to_stderr=pass_through)  # the JSON report carries it already
    raise declare.Exit(0 if report.kind == "compaction" else LEVEL_EXIT[report.level])


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


def _print_explanation(result: Any, to_stderr: bool) -> None:
    from ..terminal import shown_text

    # The lines quote the model name and the environment's values as given.
    console = streams.stderr_console() if to_stderr else streams.stdout_console()
    for line in result.thresholds.explanations:
        console.print(shown_text(f"  {line}"))
    for line in result.thresholds.ignored:
        console.print(shown_text(f"  {line}", "yellow"))
