"""`ctxpipe api-edits`: the `context_management` request parameter that clears a transcript's context server-side."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from .. import streams
from ..budget_options import Threshold
from ..flags import with_options
from ..options import Explain, InputPath, Json, Reading


@with_options(reading=Reading, threshold=Threshold)
def api_edits(
    reading: Reading,
    threshold: Threshold,
    path: InputPath = None,
    trigger: Annotated[
        Optional[int],
        typer.Option(
            "--trigger",
            help="Clear tool uses once the prompt reaches N input tokens (default: the transcript's autocompact threshold).",
            min=1,
            show_default=False,
        ),
    ] = None,
    trigger_tool_uses: Annotated[
        Optional[int],
        typer.Option("--trigger-tool-uses", help="Clear once the prompt holds N tool uses, instead of a token trigger.", min=1, show_default=False),
    ] = None,
    keep: Annotated[
        Optional[int], typer.Option("--keep", help="Keep the N most recent tool uses (default 5, as microcompact).", min=1, show_default=False)
    ] = None,
    clear_at_least: Annotated[
        Optional[int], typer.Option("--clear-at-least", help="Clear only if at least N input tokens go (worth a cache break).", min=1, show_default=False)
    ] = None,
    exclude_tool: Annotated[
        Optional[list[str]],
        typer.Option(
            "--exclude-tool",
            help="Never clear this tool's uses (repeatable; Task/Agent and mcp__ tools in the transcript are excluded already).",
            metavar="NAME",
            show_default=False,
        ),
    ] = None,
    clear_tool_inputs: Annotated[bool, typer.Option("--clear-tool-inputs", help="Clear the inputs of cleared tool uses too.")] = False,
    clear_tool_inputs_for: Annotated[
        Optional[list[str]],
        typer.Option("--clear-tool-inputs-for", help="Clear the inputs of this tool's cleared uses (repeatable).", metavar="NAME", show_default=False),
    ] = None,
    thinking: Annotated[
        Optional[bool],
        typer.Option(
            "--thinking/--no-thinking", help="Add or leave out the thinking edit (default: when the transcript has thinking blocks).", show_default=False
        ),
    ] = None,
    thinking_keep: Annotated[
        str, typer.Option("--thinking-keep", help="Thinking to keep: 'all' (as Claude Code sends) or the N most recent assistant turns.", metavar="all|N")
    ] = "all",
    compact: Annotated[bool, typer.Option("--compact", help="Add the server-side compaction edit (beta compact-2026-01-12).")] = False,
    compact_trigger: Annotated[
        Optional[int], typer.Option("--compact-trigger", help="Compact once the prompt reaches N input tokens (default 150,000).", min=1, show_default=False)
    ] = None,
    compact_instructions: Annotated[
        Optional[str], typer.Option("--compact-instructions", help="Extra instructions for the server's summary.", metavar="TEXT", show_default=False)
    ] = None,
    pause_after_compaction: Annotated[bool, typer.Option("--pause-after-compaction", help="Stop the response after the compaction block.")] = False,
    json_output: Json = False,
    explain: Explain = False,
) -> None:
    """Print the context_management request parameter that makes the API clear this context itself.

    The object holds the beta headers (context-management-2025-06-27, plus compact-2026-01-12 with
    --compact) and the edits: clear_thinking_20251015 first when the transcript thinks (keep "all",
    as Claude Code sends), then clear_tool_uses_20250919 triggered at the transcript's autocompact
    threshold, keeping the 5 most recent tool uses and never clearing the Task/Agent and mcp__ tools
    it uses. Pretty-printed on a terminal, one JSON line otherwise.

    Example:  ctxpipe api-edits session.jsonl | jq '.context_management'
    """
    from ...api import context_management
    from ...core.api_edits import ApiEditsOptions, parse_thinking_keep

    compact_only = [
        flag
        for flag, given in (
            ("--compact-trigger", compact_trigger is not None),
            ("--compact-instructions", compact_instructions is not None),
            ("--pause-after-compaction", pause_after_compaction),
        )
        if given
    ]
    if compact_only and not compact:
        raise typer.BadParameter(f"{', '.join(compact_only)} only apply with --compact", param_hint="--compact")
    if thinking is False and thinking_keep.strip().lower() != "all":
        raise typer.BadParameter("--thinking-keep cannot apply with --no-thinking", param_hint="--thinking-keep")
    try:
        kept_thinking = parse_thinking_keep(thinking_keep)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--thinking-keep") from None
    try:
        options = ApiEditsOptions(
            trigger_tokens=trigger,
            trigger_tool_uses=trigger_tool_uses,
            keep=keep,
            clear_at_least=clear_at_least,
            exclude_tools=tuple(exclude_tool or ()),
            clear_tool_inputs=clear_tool_inputs,
            clear_tool_inputs_for=tuple(clear_tool_inputs_for or ()),
            thinking=thinking,
            thinking_keep=kept_thinking,
            compact=compact,
            compact_trigger=compact_trigger,
            compact_instructions=compact_instructions,
            pause_after_compaction=pause_after_compaction,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None

    source = streams.source_name(path)
    found = context_management(path, options, threshold.counted(reading))
    streams.report_skipped(found.stats, source)
    result, counted = found.edits, found.counted
    # Pretty-printed for a person at a terminal, one line for a program.
    streams.write_json_lines([result.request], indent=not (json_output or not streams.stdout_is_terminal()))
    if explain:
        streams.explain(_explanation(source, result.explanations, counted.thresholds.explanations, options))


def _explanation(source: str, lines: tuple[str, ...], threshold_lines: tuple[str, ...], options: Any) -> list[str]:
    explained = [f"{source}:", *(f"  {line}" for line in lines)]
    if options.trigger_tokens is None and options.trigger_tool_uses is None:
        explained += ["  where the autocompact threshold comes from:", *(f"    {line}" for line in threshold_lines)]
    return explained
