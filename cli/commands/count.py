"""`ctxpipe count`: the active context's size, exact and estimated parts apart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from enum import Enum
from typing import Annotated, Any, Optional

from ...core.cache import Pricing
from ...core.reports import CountReport, CountTotal
from ...core.wire import ABSENT
from .. import declare, streams
from ..budget_options import Budget
from ..flags import with_options
from ..options import Batch, Cost, Json, Reading
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
    role = "role"
    block = "block"
    tool = "tool"


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
    by: Annotated[Optional[By], declare.Option("--by", help="Break the active context down by role, block type or tool.", show_default=False)] = None,
    top: Annotated[int, declare.Option("--top", help="List the N largest lines of the active context.", min=0)] = 0,
    timeline: Annotated[bool, declare.Option("--timeline", help="Chart the context size at every API call across the session.")] = False,
    full: Annotated[bool, declare.Option("--full", help="Parse every line (an exact message count; slower on big folders).")] = False,
    svg: Annotated[Optional[str], declare.Option("--svg", help="Save the timeline chart as an SVG picture.", show_default=False)] = None,
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
    start of the active context.

    Example:  ctxpipe count ~/.claude/projects/-home-me-app/
    """
    from ... import api
    from ..batch import find_inputs

    options = budget.count_options(
        reading,
        tokenizer=tokenizer.value,
        calibrate=calibrate,
        as_claude_code=as_claude_code,
        by=by.value if by else None,
        top=top,
        timeline=timeline or svg is not None,
        every_line=full,
        cost=cost,
        prices=pricing.prices,
    )
    paths = batch.paths or []  # [] or ["-"]: stdin (batch.from_stdin)
    if batch.from_stdin:
        # The tokenizer may use every core; a bad stdin is raised as it is, not as a batch's row.
        counted_stdin = api.count_file(None, replace(options, threads=batch.jobs or api.default_jobs()))
        results = api.CountBatch([api.FileResult(streams.STDIN, counted_stdin)])
    else:
        files = find_inputs(paths, batch.subagents)  # warns about what it leaves out (a FIFO, a broken link)
        results = api.count_many(paths, options, files=files, **batch.run_on)
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


def _print(counted: Sequence[Any], rows: Sequence[CountReport | CountTotal], timeline: bool, by: str | None, given: Sequence[str] = ()) -> None:
    """The table of `rows` (count_many's, in order: a row per file counted, then the total), and under
    it what each of `counted` (the files' FileCounts) shows beside."""
    from ...api import COMPACTION_NOTE
    from ..tables import display_names, ellipsis_for, fitted_name, print_table
    from ..terminal import shown_text

    # Every cell and line is a Text of shown(...): file, model, tool and path names come from the transcript.
    console = streams.stdout_console()
    files = [row for row in rows if isinstance(row, CountReport)]
    names = display_names([row.file for row in files], given)
    reinjected = any(row.reinjected_tokens for row in files)
    # The kind only where files differ in it (a folder with subagents or compaction side-calls).
    kinds = any(row.kind not in (None, "main") for row in files)
    cost = any(row.cost is not None for row in files)
    shown_columns = [column for column in COLUMNS if (column.header != "kind" or kinds) and (column.header != "re-injected" or reinjected)]
    shown_columns = [column for column in shown_columns if cost or column.header not in ("cost", "cache hit")]
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
