"""`ctxpipe api-edits`: the `context_management` request parameter that clears a transcript's context server-side."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.api_edits import ApiEditsOptions
from .. import declare, streams
from ..budget_options import Threshold
from ..flags import with_options
from ..options import Explain, InputPath, Json, Reading


@dataclass(frozen=True)
class GivenEdits(ApiEditsOptions):
    """ApiEditsOptions as the command line gives them, checked in the command's order: a flag given
    without the one it needs is a usage error first (the library takes it and ignores it, or notes it
    does nothing), then the library's own checks are usage errors too."""

    def __post_init__(self) -> None:
        compact_only = [
            flag
            for flag, given in (
                ("--compact-trigger", self.compact_trigger is not None),
                ("--compact-instructions", self.compact_instructions is not None),
                ("--pause-after-compaction", self.pause_after_compaction),
            )
            if given
        ]
        if compact_only and not self.compact:
            raise declare.BadParameter(f"{', '.join(compact_only)} only apply with --compact", param_hint="--compact")
        if self.thinking is False and self.thinking_keep != "all":
            raise declare.BadParameter("--thinking-keep cannot apply with --no-thinking", param_hint="--thinking-keep")
        try:
            super().__post_init__()
        except ValueError as exc:
            raise declare.BadParameter(str(exc)) from None


@with_options(reading=Reading, threshold=Threshold, options=GivenEdits)
def api_edits(
    reading: Reading,
    threshold: Threshold,
    options: ApiEditsOptions,
    path: InputPath = None,
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

    source = streams.source_name(path)
    with streams.one_transcript(path, "api-edits"):
        found = context_management(path, options, threshold.counted(reading))
    streams.report_skipped(found.stats, source)
    result, counted = found.edits, found.counted
    # Pretty-printed for a person at a terminal, one line for a program.
    streams.write_json_lines([result.request], indent=not (json_output or not streams.stdout_is_terminal()))
    if explain:
        streams.explain(_explanation(source, result.explanations, counted.thresholds.explanations, options))


def _explanation(source: str, lines: tuple[str, ...], threshold_lines: tuple[str, ...], options: ApiEditsOptions) -> list[str]:
    explained = [f"{source}:", *(f"  {line}" for line in lines)]
    if options.trigger_tokens is None and options.trigger_tool_uses is None:
        explained += ["  where the autocompact threshold comes from:", *(f"    {line}" for line in threshold_lines)]
    return explained
