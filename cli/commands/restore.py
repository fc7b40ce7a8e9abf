"""`ctxpipe restore`: the restore stage's command, with what only it has: --from and --plan."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, Optional

from ...core.restore import STAGE, RestoreSettings
from .. import declare
from ..flags import with_options
from ..options import Json
from ..stages import StageIO, checked, run_command, stage_context


@with_options(given=StageIO, settings=RestoreSettings)
def restore(
    given: StageIO,
    settings: RestoreSettings,
    from_: Annotated[
        Optional[str], declare.Option("--from", help="The transcript from before the summary, when the input no longer holds its history.", show_default=False)
    ] = None,
    plan: Annotated[bool, declare.Option("--plan", help="List every candidate, chosen or not and why, with its tokens; write no transcript.")] = False,
    json_output: Json = False,
) -> None:
    from .. import streams

    with streams.one_transcript(given.path, STAGE.name, STAGE.in_compact):
        _restore(given, settings, from_, plan, json_output)


def _restore(given: StageIO, settings: RestoreSettings, from_: str | None, plan: bool, json_output: bool) -> None:
    from ... import api
    from .. import streams

    checked(STAGE, settings)
    streams.stdin_twice(given.path, from_, "--from")
    context = stage_context(given.path, given.now)
    if from_ is not None:
        before = api.read_transcript(from_)
        context = replace(context, earlier=(api.get(before.format).messages(before.entries), before.entries))
    if plan:
        _plan(given, settings, context, json_output)
        return
    run_command(STAGE, given, settings, context)


restore.__doc__ = STAGE.help


def _plan(given: StageIO, settings: RestoreSettings, context: Any, json_output: bool) -> None:
    """Every candidate, chosen or not and why; no transcript is written."""
    import io

    from ...api import detect_format, mapped
    from ...core.fields import iso
    from ...core.jsonl import ReadStats, iter_entries
    from ...core.restore import restore as plan_restore
    from .. import streams

    source_name = streams.source_name(given.path)
    with mapped(given.path, on_error=given.errors) as buffer:
        transcript_format = detect_format(buffer, source_name, given.format)
        entries = list(iter_entries(io.BytesIO(buffer), source_name, given.errors, ReadStats()))
    outcome, candidates = plan_restore(entries, transcript_format, settings, iso(context.now), context.earlier, context.workspace)
    if not candidates:  # nothing to plan: why, as restore itself says it
        from ..stages import stage_note

        streams.note(stage_note("restore", source_name, outcome.note, 0, 0, False))
    rows = [c.row() for c in candidates]
    if json_output or not streams.stdout_is_terminal():
        streams.write_json_lines(row.to_wire() for row in rows)
        return
    from ..tables import Column, print_table
    from ..terminal import shown_text

    # A narrow terminal leaves out the largest priority number first (0: always shown).
    columns = [Column("kind", "label", 3), Column("name", "name", 0), Column("tokens", "number", 0), Column("chosen", "label", 1), Column("why", "text", 2)]
    # Names are the transcript's file paths, skills and plans: shown, never markup.
    cells = [[shown_text(row.kind), shown_text(row.name), f"{row.tokens:,}", "yes" if row.chosen else "no", shown_text(row.reason)] for row in rows]
    print_table(streams.stdout_console(), columns, cells)
