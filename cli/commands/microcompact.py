"""`ctxpipe microcompact`: clear old tool results, no model call."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from ..options import Format, InputPath, OnError, Output, Unbuffered
from ..stages import Ledger, Now, Report, ReportJson, parse_now, print_report, run_stage


def load_prices(path: str) -> Any:
    """The price table in `path` before ours; a file that cannot be read or is not one is bad input."""
    import orjson

    from ...core.cache import prices_from
    from ...core.errors import InputError
    from ...inputs import open_file, read_all

    with open_file(path) as handle:
        data = read_all(handle, path)
    try:
        return prices_from(orjson.loads(data))
    except (ValueError, TypeError) as exc:
        raise InputError(path, None, f"not a price table: {exc}") from None


def microcompact(
    path: InputPath = None,
    input_format: Format = None,
    output: Output = None,
    keep_recent: Annotated[int, typer.Option("--keep-recent", help="Keep this many of the most recent compactable results (0 keeps 1, as Claude Code).", min=0)] = 5,
    tools: Annotated[Optional[str], typer.Option("--tools", help="Comma-separated tool names to clear (default: Read,Bash,PowerShell,Grep,Glob,WebSearch,WebFetch,Edit,Write,MultiEdit,NotebookEdit). Task, Agent and mcp__ tools are never cleared.", show_default=False)] = None,
    gap_minutes: Annotated[float, typer.Option("--gap-minutes", help="Clear only when the last response is at least this old (the prompt cache has expired).", min=0.0)] = 60.0,
    now: Now = None,
    force: Annotated[bool, typer.Option("--force", help="Clear regardless of the time since the last response.")] = False,
    no_marker: Annotated[bool, typer.Option("--no-marker", help="Do not append the microcompact_boundary record.")] = False,
    cache_aware: Annotated[bool, typer.Option("--cache-aware", help="Clear only when the tokens freed pay for the prompt-cache break within --horizon turns (replaces the time trigger).")] = False,
    clear_at_least: Annotated[int, typer.Option("--clear-at-least", help="With --cache-aware: the fewest tokens worth a cache break.", min=0)] = 10_000,
    horizon: Annotated[int, typer.Option("--horizon", help="With --cache-aware: the turns within which the break must pay for itself.", min=1)] = 5,
    prices: Annotated[Optional[str], typer.Option("--prices", help="With --cache-aware: a JSON price table {model fragment: {input, cache_write_5m, cache_write_1h, cache_read, output}} in $/MTok.", show_default=False)] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model for the price table (default: the transcript's).", show_default=False)] = None,
    report: Report = False,
    report_json: ReportJson = None,
    ledger: Ledger = None,
    unbuffered: Unbuffered = False,
    on_error: OnError = "fail",  # type: ignore[assignment]
) -> None:
    """Replace old tool results with "[Old tool result content cleared]", as Claude Code does.

    Only the active context is touched; results of Task/Agent and MCP tools are never cleared, and
    the last --keep-recent compactable results stay. By default it fires only when the last
    response is --gap-minutes old (the prompt cache has expired, so clearing costs nothing extra);
    otherwise the input passes through unchanged. A microcompact_boundary record with tokensSaved
    is appended, which `count` uses. Running it twice changes nothing more.

    Example:  ctxpipe microcompact --force --ledger undo.jsonl session.jsonl > smaller.jsonl
    """
    from ...core.cache import DEFAULT_PRICES, CachePolicy
    from ...core.microcompact import COMPACTABLE_TOOLS, MicrocompactConfig, microcompact as run, never_cleared
    from .. import io

    chosen = frozenset(name.strip() for name in tools.split(",") if name.strip()) if tools else COMPACTABLE_TOOLS
    for name in sorted(chosen):
        if never_cleared(name):
            io.warn(f"--tools: {name} results are never cleared (a subagent or MCP result cannot be reproduced)")
    policy = None
    if cache_aware:
        table = load_prices(prices) if prices else DEFAULT_PRICES
        policy = CachePolicy(clear_at_least, horizon, table, model)
    config = MicrocompactConfig(chosen, keep_recent, gap_minutes, parse_now(now), force, not no_marker, policy)
    outcome = run_stage("microcompact", path, input_format, on_error, output, ledger, report_json,
                        lambda entries, fmt, _measure: run(entries, fmt, config), unbuffered)
    if report:
        print_report(outcome.report)
    if "cache" in outcome.report:
        _print_costs(outcome.report["cache"])


def _print_costs(cache: dict) -> None:
    from .. import io

    io.note(
        f"microcompact: cache {'warm' if cache['cache_warm'] else 'expired'} (TTL {cache['ttl_minutes']} min); "
        f"over {cache['horizon']} turns keeping costs ${cache['cost_keep_usd']:.4f}, clearing ${cache['cost_clear_usd']:.4f}"
        + (f"; break-even at turn {cache['break_even_turn']}" if cache["break_even_turn"] else "")
    )
