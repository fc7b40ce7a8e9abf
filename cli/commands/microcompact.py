"""`ctxpipe microcompact`: clear old tool results, no model call."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..options import Format, InputPath, OnError, Output, Unbuffered
from ..stage_options import CacheAware, ClearAtLeast, GapMinutes, Horizon, KeepRecent, NoMarker, Prices, Tools, cache_policy, compactable_tools
from ..stages import Ledger, Now, Report, ReportJson, parse_now, print_report, run_stage


def microcompact(
    path: InputPath = None,
    input_format: Format = None,
    output: Output = None,
    keep_recent: KeepRecent = 5,
    tools: Tools = None,
    gap_minutes: GapMinutes = 60.0,
    now: Now = None,
    force: Annotated[bool, typer.Option("--force", help="Clear regardless of the time since the last response.")] = False,
    no_marker: NoMarker = False,
    cache_aware: CacheAware = False,
    clear_at_least: ClearAtLeast = 10_000,
    horizon: Horizon = 5,
    prices: Prices = None,
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
    from ...core.microcompact import MicrocompactConfig
    from ...core.microcompact import microcompact as run

    config = MicrocompactConfig(
        compactable_tools(tools),
        keep_recent,
        gap_minutes,
        parse_now(now),
        force,
        not no_marker,
        cache_policy(cache_aware, clear_at_least, horizon, prices, model),
    )
    outcome = run_stage(
        "microcompact", path, input_format, on_error, output, ledger, report_json, lambda entries, fmt, _measure: run(entries, fmt, config), unbuffered
    )
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
