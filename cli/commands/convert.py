"""`ctxpipe convert`: change a transcript's format (an identity when the format stays)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Optional

from ...api import WRITABLE
from .. import declare, streams
from ..budget_options import RecordedModel
from ..flags import with_options
from ..options import InputPath, Output, Reading, Unbuffered, iso_time

MAX_LISTED = 5

# The formats ctxpipe writes; a read-only one is refused when the command line is parsed. (Its members
# come from the registry at run time; mypy reads only literal members, hence the ignore.)
Target = Enum("Target", {name.replace("-", "_"): name for name in WRITABLE}, type=str)  # type: ignore[misc]


@with_options(reading=Reading)
def convert(
    reading: Reading,
    to: Annotated[Target, declare.Option("--to", "-t", help="Output format.", show_default=False)],
    path: InputPath = None,
    output: Output = None,
    unbuffered: Unbuffered = False,
    repair: Annotated[
        bool, declare.Option("--repair", help="Answer each tool_use that has no result with a synthetic error result (and drop orphan results).")
    ] = False,
    history: Annotated[
        bool, declare.Option("--history", help="Follow the main chain across compact boundaries instead of converting only the active context.")
    ] = False,
    session_id: Annotated[
        Optional[str], declare.Option("--session-id", help="Session id of lines written as claude-code or codex (default: a new one).")
    ] = None,
    cwd: Annotated[
        Optional[str], declare.Option("--cwd", help="cwd recorded on lines written as claude-code or codex (default: the input's own, else .).")
    ] = None,
    start_time: Annotated[
        Optional[str],
        declare.Option(
            "--start-time",
            help="ISO time of the first line written as claude-code or codex, for messages the input records no time for (default: now).",
            callback=iso_time,
        ),
    ] = None,
    model: RecordedModel = None,
) -> None:
    """Convert a transcript to another format (--to: the formats ctxpipe writes).

    Converting to the format the input is already in copies it byte for byte. Claude Code to
    anthropic merges the lines of one API response, merges parallel tool results into one user
    message, drops lines that are not messages and keeps roles alternating. What the input records
    beside its messages is kept where the output format has a place for it: each message's time,
    each response's model and usage (so `count` of the result reads the same usage), the cwd.

    Example:  ctxpipe convert --to anthropic session.jsonl > messages.jsonl
    """
    from ...api import WriteOptions, editor_of, get, held_entries, rebuild_refused
    from ...core.convert import to_api_messages

    source = streams.source_name(path)
    with streams.one_transcript(path, "convert"), streams.open_input(path) as stream:
        opened = streams.stream_entries(stream, source, reading.format, reading.errors)
        target = get(to.value)
        refused = rebuild_refused(opened.format, target, repair, history)
        if refused is not None:
            raise declare.BadParameter(refused, param_hint="--to")
        if opened.format is target and not repair and not history:
            with streams.open_output(output) as out:
                streams.write_transcript(opened.entries, out, unbuffered)
            streams.report_skipped(opened.stats, source)
            return
        with held_entries(path, opened, reading.errors) as (entries, stats):  # a large file read in place
            messages = opened.format.messages(entries, history=history)
            api_messages, report = to_api_messages(messages, entries, repair=repair, recorded=True)
            recorded_cwd = opened.format.recorded_cwd(entries)
    options = WriteOptions(session_id=session_id, cwd=cwd or recorded_cwd or ".", start_time=start_time, model=model)
    written = editor_of(target, "write").from_messages(api_messages, options)  # --to offers only the formats ctxpipe writes
    with streams.open_output(output) as out:
        streams.write_transcript(written, out, unbuffered)
    streams.report_skipped(stats, source)
    _report_tool_problems(source, report.unanswered, "tool_use {} has no tool_result", repair, "answered with a synthetic error result")
    _report_tool_problems(source, report.orphans, "tool_result for {} {}", repair, "dropped")


def _report_tool_problems(source: str, problems: list[Any], template: str, repaired: bool, fix: str) -> None:
    for problem in problems[:MAX_LISTED]:
        where = f"{source}:{problem.line}" if problem.line is not None else source
        streams.warn(f"{where}: {template.format(problem.tool_use_id, problem.why)}" + (f" ({fix})" if repaired else ""))
    if len(problems) > MAX_LISTED:
        streams.warn(f"{source}: {len(problems) - MAX_LISTED} more like this")
    if problems and not repaired:
        streams.warn(f"{source}: the API rejects unpaired tool calls; --repair fixes them")
