"""`ctxpipe count`: the active context's size, exact and estimated parts apart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from enum import Enum
from typing import Annotated, Any, Optional

from ...core.prices import Pricing
from ...core.reports import CountReport, CountTotal, FailedFile
from ...core.wire import ABSENT
from .. import declare, streams
from ..budget_options import Budget
from ..flags import with_options
from ..options import Batch, Cost, Json, Reading, rollup_bound, time_zone
from ..status import ExitStatus
from ..tables import Column

# Each table's columns, in order; a narrow terminal leaves out the largest priority number first (0: always shown).
COLUMNS = [
    Column("file", "name", 0),
    Column("kind", "label", 3),  # only where the files differ in kind
    Column("model", "label", 5),
    Column("window", "number", 4),
    Column("tokens", "number", 0),
    Column("exact", "number", 6),
    Column("estimated", "number", 7),
    Column("baseline", "number", 10),
    Column("re-injected", "number", 11),  # only where Claude Code re-injected files
    Column("used", "number", 2),
    Column("messages", "number", 9),
    Column("cost", "number", 1),  # with --cost, asked for
    Column("cache hit", "number", 8),
    Column("title", "label", 12),  # where every line was read and a file has one
]
BREAKDOWN_COLUMNS = [Column("group", "name", 0), Column("tokens", "number", 0), Column("share", "number", 1), Column("blocks", "number", 2)]
LARGEST_COLUMNS = [
    Column("line", "number", 0),
    Column("role", "label", 3),
    Column("block", "label", 2),
    Column("tool", "label", 1),
    Column("tokens", "number", 0),
]


class Tokenizer(str, Enum):
    calibrated = "calibrated"
    pieces = "pieces"
    rough = "rough"
    cl100k = "tiktoken:cl100k_base"
    o200k = "tiktoken:o200k_base"


class By(str, Enum):
    """--by: a view of one active context (role, block, tool), or a rollup of cost over files (day, project, session)."""

    role = "role"
    block = "block"
    tool = "tool"
    day = "day"
    project = "project"
    session = "session"


ROLLUPS = (By.day, By.project, By.session)
# A rollup's table: the group, then the figures that add up to the total row (tokens by kind, calls, cost).
ROLLUP_COLUMNS = [
    Column("group", "name", 0),  # headed by the --by value
    Column("title", "label", 9),  # --by session
    Column("project", "label", 10),  # --by session
    Column("calls", "number", 3),
    Column("input", "number", 5),
    Column("cache write 5m", "number", 6),
    Column("cache write 1h", "number", 7),
    Column("cache read", "number", 4),
    Column("output", "number", 2),
    Column("cost", "number", 0),
]


@with_options(batch=Batch, reading=Reading, budget=Budget, pricing=Pricing)
def count(
    batch: Batch,
    reading: Reading,
    budget: Budget,
    pricing: Pricing,
    tokenizer: Annotated[Tokenizer, declare.Option("--tokenizer", "-t", help="Estimator for what came after the last recorded usage.")] = Tokenizer.calibrated,
    calibrate: Annotated[
        Optional[bool],
        declare.Option(
            "--calibrate/--no-calibrate", help="Fit the estimator to the transcript's recorded usage (default: only for 'calibrated').", show_default=False
        ),
    ] = None,
    as_claude_code: Annotated[bool, declare.Option("--as-claude-code", help="Reproduce Claude Code's own figure (characters/4, no calibration).")] = False,
    by: Annotated[
        Optional[By],
        declare.Option(
            "--by",
            help="role, block or tool: break each active context down. day, project or session: roll up the cost of every API call over the files (implies --cost).",
            show_default=False,
        ),
    ] = None,
    top: Annotated[int, declare.Option("--top", help="List the N largest lines of the active context.", min=0)] = 0,
    timeline: Annotated[bool, declare.Option("--timeline", help="Chart the context size at every API call across the session.")] = False,
    full: Annotated[bool, declare.Option("--full", help="Parse every line (an exact message count; slower on big folders).")] = False,
    svg: Annotated[Optional[str], declare.Option("--svg", help="Save the timeline chart as an SVG picture.", show_default=False)] = None,
    since: Annotated[
        Optional[str],
        declare.Option(
            "--since",
            help="With --by day|project|session: calls from this date (20260504, 2026-05-04) or ISO 8601 time on.",
            show_default=False,
            metavar="DATE|ISO-TIME",
            callback=rollup_bound,
        ),
    ] = None,
    until: Annotated[
        Optional[str],
        declare.Option(
            "--until",
            help="With --by day|project|session: calls up to this date (the whole day) or ISO 8601 time.",
            show_default=False,
            metavar="DATE|ISO-TIME",
            callback=rollup_bound,
        ),
    ] = None,
    timezone: Annotated[
        Optional[str],
        declare.Option(
            "--timezone",
            help="The time zone of days and of dates and times given without an offset (default: this machine's local time).",
            show_default=False,
            metavar="ZONE",
            callback=time_zone,
        ),
    ] = None,
    cache: Annotated[
        bool,
        declare.Option(
            "--cache/--no-cache",
            help="Read back the counts of files unchanged since an earlier run, kept in $XDG_CACHE_HOME/ctxpipe/count (--no-cache: count every file).",
        ),
    ] = True,
    cost: Cost = False,
    json_output: Json = False,
) -> None:
    """Count the tokens of each transcript's active context.

    The figure is the last recorded API usage (exact: input + cache writes + cache reads + output
    of the last main-chain response) plus an estimate of everything after it, as Claude Code
    computes it. The estimate is calibrated on the usage recorded earlier in the same transcript.
    Folders are searched for session files (main sessions and subagents, every layout); a file
    written by Claude Code's compaction side-call (agent-acompact-*.jsonl, or lines whose agentId
    starts with acompact-) is counted with kind "compaction": it is not a session. Only the
    end of each file is read (back to the calibration window), unless --full, --by, --top or
    --timeline need it all; the message count is then given only where the read reached the
    start of the active context. Over several files, or where every line is read, a file
    unchanged since an earlier count with the same options (its size, times and inode as they
    were) is not read again: its count was kept (--no-cache counts every file).

    --by day|project|session rolls up what every API call cost over the files instead: one row per
    day (of each call's timestamp, in --timezone), project or session (a subagent's file goes with its
    session), and a total row the rows add up to; --since and --until keep the calls between
    (ctxpipe count --by day --since 20260501 ~/.claude/projects/).

    Example:  ctxpipe count ~/.claude/projects/-home-me-app/
    """
    from ... import api
    from ..batch import find_inputs

    rollup = by in ROLLUPS
    # A rollup is over the files, not of one active context: the views of one cannot go with it.
    view = next((flag for flag, given in (("--top", top > 0), ("--timeline", timeline), ("--svg", svg is not None)) if given), None)
    if rollup and by is not None and view is not None:
        raise declare.BadParameter(f"shows one active context; --by {by.value} rolls up cost over the files", param_hint=view)
    bound = next((flag for flag, value in (("--since", since), ("--until", until), ("--timezone", timezone)) if value is not None), None)
    if bound is not None and not rollup:
        raise declare.BadParameter("goes with --by day, project or session", param_hint=bound)

    options = budget.count_options(
        reading,
        tokenizer=tokenizer.value,
        calibrate=calibrate,
        as_claude_code=as_claude_code,
        by=by.value if by and not rollup else None,
        top=top,
        timeline=timeline or svg is not None,
        every_line=full,
        cost=cost or rollup,
        prices=pricing.prices,
    )
    paths = batch.paths or []  # [] or ["-"]: stdin (batch.from_stdin)
    if rollup and by is not None:
        _rollup(batch, options, by.value, since, until, timezone, json_output)
        return
    if batch.from_stdin:
        # The tokenizer may use every core; a bad stdin is raised as it is, not as a batch's row.
        counted_stdin = api.count_file(None, replace(options, threads=batch.jobs or api.default_jobs()))
        results = api.CountBatch([api.FileResult(streams.STDIN, counted_stdin)])
    else:
        files = find_inputs(paths, batch.subagents)  # warns about what it leaves out (a FIFO, a broken link)
        results = api.count_many(paths, options, files=files, progress=streams.batch_progress("counting"), cache=cache, **batch.run_on)
    counted = results.done
    failures = results.failures
    if len(results.files) == 1 and failures:
        raise failures[0]
    for failure in failures:
        streams.error(str(failure))
    for result in counted:
        streams.skipped_lines(result.file, result.skipped_lines)
    rows = results.rows()
    if svg is not None and counted:
        from ..chart import timeline_svg

        with streams.open_output(svg) as out:
            out.write(timeline_svg(counted[0]).encode())
    if json_output or not streams.stdout_is_terminal():
        streams.write_json_lines([row.to_wire() for row in rows])
    else:
        _print(counted, rows, timeline, options.by, paths)
    if failures:
        raise declare.Exit(ExitStatus.ERROR)


def _rollup(batch: Batch, options: Any, by: Any, since: str | None, until: str | None, timezone: str | None, json_output: bool) -> None:
    """count --by day|project|session: the calls of every file found, rolled up."""
    from ... import api
    from ...core.rollup import Window, parse_bound, zone_named
    from ..batch import find_inputs

    zone = zone_named(timezone) if timezone else None
    window = Window(parse_bound(since, zone) if since else None, parse_bound(until, zone, end=True) if until else None)
    paths = batch.paths or [streams.STDIN]
    files = None if batch.from_stdin else find_inputs(paths, batch.subagents)
    results = api.rollup_many(paths, options, files=files, progress=streams.batch_progress("reading"), **batch.run_on)
    if len(results.files) == 1 and results.failures:
        raise results.failures[0]
    for failure in results.failures:
        streams.error(str(failure))
    for read in results.done:
        streams.skipped_lines(read.file, read.skipped_lines)
    rows = results.rows(by, zone, window)
    if json_output or not streams.stdout_is_terminal():
        streams.write_json_lines([row.to_wire() for row in rows])
    else:
        _print_rollup(rows, by, paths)
    if results.failures:
        raise declare.Exit(ExitStatus.ERROR)


def _print_rollup(rows: Sequence[Any], by: str, given: Sequence[str]) -> None:
    from ...core.reports import FailedFile, RollupRow
    from ..tables import display_names, print_table
    from ..terminal import shown_text

    console = streams.stdout_console()
    columns = [column for column in ROLLUP_COLUMNS if by == "session" or column.header not in ("title", "project")]
    names = display_names([row.file for row in rows if isinstance(row, FailedFile)], given)
    cells: list[dict[str, Any]] = []
    for row in rows:
        if isinstance(row, FailedFile):  # why is on stderr, just above
            cells.append({"group": shown_text(names[row.file]), "cost": shown_text("failed", "red")})
            continue
        tokens = row.tokens
        cells.append(
            {
                "group": shown_text(row.group) if isinstance(row, RollupRow) else shown_text("total", "bold"),
                "title": shown_text(row.title or "") if isinstance(row, RollupRow) and isinstance(row.title, str) else "",
                "project": shown_text(row.project or "") if isinstance(row, RollupRow) else "",
                "calls": f"{row.api_calls:,}",
                "input": f"{tokens.input:,}",
                "cache write 5m": f"{tokens.cache_write_5m:,}",
                "cache write 1h": f"{tokens.cache_write_1h:,}",
                "cache read": f"{tokens.cache_read:,}",
                "output": f"{tokens.output:,}",
                "cost": shown_text(_usd(row.usd), "" if isinstance(row, RollupRow) else "bold"),
            }
        )
    headed = [replace(column, header=by) if column.header == "group" else column for column in columns]  # the group headed by what it is
    print_table(console, headed, [[row.get(column.header, "") for column in columns] for row in cells])
    if any(isinstance(row, RollupRow) and row.usd is None for row in rows):
        console.print(shown_text("a cost of ? holds a call of a model with no known price: give one with --prices FILE", "dim"))


def _usd(value: float | None) -> str:
    return "?" if value is None else f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _messages(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _parts(data: CountReport) -> str:
    if data.baseline_in_total:
        return f"no recorded usage describes this context: the baseline plus the estimate of its {data.estimated_messages} message(s)" + (
            ", plus what Claude Code re-injected" if data.reinjected_tokens else ""
        )
    return f"exact part from the last recorded usage (the baseline inside it), estimated part for the {data.estimated_messages} message(s) after it"


def _print(counted: Sequence[Any], rows: Sequence[CountReport | FailedFile | CountTotal], timeline: bool, by: str | None, given: Sequence[str] = ()) -> None:
    """The table of `rows` (count_many's, in order: a row per file counted, then the total), and under
    it what each of `counted` (the files' FileCounts) shows beside."""
    from ...api import COMPACTION_NOTE
    from ..tables import display_names, ellipsis_for, fitted_name, print_table
    from ..terminal import shown_text

    # Every cell and line is a Text of shown(...): file, model, tool and path names come from the transcript.
    console = streams.stdout_console()
    files = [row for row in rows if isinstance(row, CountReport)]
    failed = [row for row in rows if isinstance(row, FailedFile)]
    names = display_names([row.file for row in files] + [row.file for row in failed], given)
    titles = any(isinstance(row.title, str) for row in files)
    reinjected = any(row.reinjected_tokens for row in files)
    # The kind only where files differ in it (a folder with subagents or compaction side-calls).
    kinds = any(row.kind not in (None, "main") for row in files)
    cost = any(row.cost is not None for row in files)
    shown_columns = [column for column in COLUMNS if (column.header != "kind" or kinds) and (column.header != "re-injected" or reinjected)]
    shown_columns = [column for column in shown_columns if cost or column.header not in ("cost", "cache hit")]
    shown_columns = [column for column in shown_columns if titles or column.header != "title"]
    cells: list[dict[str, Any]] = []
    for row in rows:
        if isinstance(row, CountTotal):
            cells.append(
                {
                    "file": shown_text("total", "bold"),
                    "tokens": shown_text(f"{row.tokens:,}", "bold"),
                    "exact": f"{row.exact_tokens:,}",
                    "estimated": f"{row.estimated_tokens:,}",
                    "messages": _messages(row.messages),
                    "cost": _usd(None if row.usd is ABSENT else row.usd),
                }
            )
            continue
        if isinstance(row, FailedFile):  # the reason is on stderr too, with the file's whole name
            cells.append({"file": shown_text(names[row.file]), "model": shown_text(row.error, "red"), "tokens": shown_text("failed", "red")})
            continue
        # The baseline is part of the exact figure when a recorded usage anchors the count: shown in brackets.
        baseline = f"+{row.baseline_tokens:,}" if row.baseline_in_total else f"({row.baseline_tokens:,})"
        cells.append(
            {
                "file": shown_text(names[row.file]),
                "kind": row.kind or "-",
                "model": shown_text(row.model or "?"),
                "window": f"{row.context_window:,}",
                "tokens": shown_text(f"{row.tokens:,}", "bold"),
                "exact": f"{row.exact_tokens:,}",
                "estimated": f"{row.estimated_tokens:,}",
                "baseline": baseline,
                "re-injected": f"+{row.reinjected_tokens:,}",
                "used": f"{row.percent_of_window}%",
                "messages": _messages(row.messages),
                **({"cost": _usd(row.cost.usd), "cache hit": _rate(row.cost.cache_hit_rate)} if row.cost is not None else {}),
                "title": shown_text(row.title) if isinstance(row.title, str) else "",
            }
        )
    print_table(console, shown_columns, [[row.get(column.header, "") for column in shown_columns] for row in cells])
    if any(row.kind == "compaction" for row in files):
        console.print(shown_text(f"kind compaction: {COMPACTION_NOTE}", "dim"))
    for result, data in zip(counted, files):
        name = names[data.file]
        for adjustment in data.adjustments:
            console.print(shown_text(f"  {name}: {adjustment.tokens:+,} tokens ({adjustment.note}, line {adjustment.line})"))
        if len(counted) == 1:
            console.print(shown_text(f"estimator: {data.tokenizer}; " + _parts(data), "dim"))
            if data.baseline is not None:
                console.print(shown_text(f"baseline: {data.baseline.note} ({data.baseline.source})", "dim"))
            if data.reinjected and data.reinjected_tokens:
                items = ", ".join(f"{item.kind} {item.name} ({item.tokens:,})" for item in data.reinjected.items)
                console.print(shown_text(f"re-injected after Claude Code's compaction, assumed: {items}", "dim"))
        if data.cost is not None and len(counted) == 1:
            spent = data.cost
            parts = ", ".join(f"{part.replace('_', ' ')} {_usd(usd)}" for part, usd in spent.usd_by_part.to_wire().items())
            console.print(
                shown_text(f"cost: {_usd(spent.usd)} over {spent.api_calls:,} API calls ({parts}); cache rebuilt {spent.cache_rebuilds} time(s)", "dim")
            )
            if spent.unpriced_models:
                console.print(
                    shown_text(f"no price known for {', '.join(spent.unpriced_models)} (not in the model catalog): give one with --prices FILE", "dim")
                )
        if data.breakdown is not None:
            console.print(fitted_name(console, name, len(f": estimated tokens by {by}"), "bold") + f": estimated tokens by {by}")
            groups = [[shown_text(item.key), f"{item.tokens:,}", f"{item.share}%", str(item.blocks)] for item in data.breakdown]
            print_table(console, BREAKDOWN_COLUMNS, groups)
        if data.top is not None:
            console.print(fitted_name(console, name, len(": largest lines"), "bold") + ": largest lines")
            largest = [
                [str(item.line or ""), shown_text(item.role), shown_text(item.block), shown_text(item.tool or ""), f"{item.tokens:,}"] for item in data.top
            ]
            print_table(console, LARGEST_COLUMNS, largest)
        if timeline and data.timeline is not None:
            from ..chart import timeline_text

            console.print(timeline_text(result, console.width, name, ellipsis_for(console)))
