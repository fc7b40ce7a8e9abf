"""`ctxpipe restore`: re-inject recent files, the plan (and plan mode), skills and todos after a summary."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from ..options import Format, InputPath, Json, OnError, Output, SourceChoice, Unbuffered
from ..stage_options import AllowOutsideRoot, Root, Source
from ..stages import Ledger, Now, ReportJson, parse_now, run_stage


def restore(
    path: InputPath = None,
    input_format: Format = None,
    output: Output = None,
    from_: Annotated[
        Optional[str], typer.Option("--from", help="The transcript from before the summary, when the input no longer holds its history.", show_default=False)
    ] = None,
    root: Root = None,
    source: Source = SourceChoice.auto,
    allow_outside_root: AllowOutsideRoot = False,
    plan: Annotated[bool, typer.Option("--plan", help="List every candidate, chosen or not and why, with its tokens; write no transcript.")] = False,
    json_output: Json = False,
    now: Now = None,
    report_json: ReportJson = None,
    ledger: Ledger = None,
    unbuffered: Unbuffered = False,
    on_error: OnError = "fail",  # type: ignore[assignment]
) -> None:
    """Bring back, after the last summary, what the model needs to carry on.

    From the history before the last compact boundary (or --from ORIGINAL): the most recently used
    files (at most 5, 5,000 tokens each, 50,000 in all, newest first, none whose full read is still
    in the kept tail; a file over budget comes back as its path with a note; memory and rule files —
    CLAUDE.md, MEMORY.md, .claude/rules/*, ~/.claude/… — never take a slot, Claude Code reloads them),
    the latest plan (the plan file, or the last ExitPlanMode plan; its own item, at most 5,000
    tokens), a plan-mode reminder when the session ended in plan mode, the invoked skills (5,000
    tokens each, 25,000 in all) and the latest todo list. Each is its own
    isMeta user entry whose first line says what it is, e.g.
    "[restored file] src/app.py (lines 1-120, 1,850 tokens, from disk)". Files are read from disk
    only under --root (links resolved); without it, only under the current directory and only when
    the transcript's cwd is in it (a transcript is untrusted: it does not choose what is read).

    Example:  ctxpipe summarize session.jsonl | ctxpipe restore --root ~/src/app > resumed.jsonl
    """
    import ctxpipe

    from ...core.restore import RestoreConfig
    from ...core.restore import restore as run
    from .. import io

    config = RestoreConfig(source.value, root, allow_outside_root)
    original = None
    if from_ is not None:
        before = ctxpipe.read_transcript(from_)
        messages = ctxpipe.formats.get(before.format).messages(before.entries)
        original = (messages, before.entries)
    found: dict[str, Any] = {}

    def transform(entries: list, transcript_format: Any, _measure: Any = None) -> Any:
        outcome, candidates = run(entries, transcript_format, config, _iso(parse_now(now)), original)
        found["candidates"] = candidates
        if plan:
            outcome.changed = False  # the plan writes no transcript
        return outcome

    if plan:
        import io as io_module

        from ...core.jsonl import ReadStats, iter_entries
        from ...counting import _first_line_format, mapped
        from ...formats import get

        source_name = io.source_name(path)
        with mapped(path) as buffer:
            transcript_format = get(_first_line_format(buffer, source_name))
            entries = list(iter_entries(io_module.BytesIO(buffer), source_name, on_error.value, ReadStats()))
        transform(entries, transcript_format)
        rows = [c.as_dict() for c in found.get("candidates", [])]
        if json_output or not io.stdout_is_terminal():
            io.write_json_lines(rows)
        else:
            from rich.table import Table

            from ..terminal import shown_text

            # Names are the transcript's file paths, skills and plans: shown, never markup.
            table = Table("kind", "name", "tokens", "chosen", "why", show_edge=False)
            for row in rows:
                table.add_row(
                    shown_text(row["kind"]), shown_text(row["name"]), f"{row['tokens']:,}", "yes" if row["chosen"] else "no", shown_text(row["reason"])
                )
            io.stdout_console().print(table)
        return
    run_stage("restore", path, input_format, on_error, output, ledger, report_json, transform, unbuffered, whole=True)


def _iso(moment: Any) -> str:
    from ...core.fields import iso

    return iso(moment)
