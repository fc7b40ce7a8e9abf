"""`ctxpipe audit`: what every compaction in each session kept and lost, and what it cost after."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...core.prices import Pricing
from .. import streams
from ..flags import with_options
from ..options import Batch, Json, Reading
from ..status import ExitStatus
from ..tables import Column

if TYPE_CHECKING:  # types only
    from ...core.audit import CompactionAudit, SessionAudit
    from ...core.reports import FailedFile

# A compaction's columns; a narrow terminal leaves out the largest priority number first (0: always shown).
COLUMNS = [
    Column("line", "number", 0),
    Column("when", "label", 4),
    Column("trigger", "label", 2),
    Column("before", "number", 1),
    Column("after", "number", 1),
    Column("summary", "number", 3),
    Column("carried", "number", 0),
    Column("recall", "number", 0),
    Column("rebuild", "number", 3),
    Column("refill", "number", 2),
]
LOST_SHOWN = 12  # lost facts listed under a compaction on a terminal (--json has them all)


@with_options(batch=Batch, reading=Reading, pricing=Pricing)
def audit(batch: Batch, reading: Reading, pricing: Pricing, json_output: Json = False) -> None:
    """Audit every compaction in each session: what it kept and what it lost.

    For each compaction (Claude Code's compact boundaries, ctxpipe's own, Codex's compacted lines):
    when and why it ran, the tokens before (the boundary's preTokens) and after (the prompt of the
    first response after it), the summary's size, the facts of the history before it (every
    message the user typed, queued prompts delivered mid-turn included, the last request, files
    edited, errors met, open tasks, the current work) and which of them the summary and the kept
    messages still carry, the cache the first call after it wrote again and its cost, and how fast
    the context refilled (thrash: within 3 calls of the compaction before). A last row per session
    adds them up, with the files read again after a compaction. Folders and store prefixes are
    searched for session files, as count does.

    Example:  ctxpipe audit ~/.claude/projects/-home-me-app/
    """
    from ... import api
    from .. import declare
    from ..batch import find_inputs

    options = api.AuditOptions(format=reading.format, on_error=reading.errors, prices=pricing.prices)
    if batch.from_stdin:
        results = api.audit_many([streams.STDIN], options)
    else:
        files = find_inputs(batch.paths or [], batch.subagents)
        results = api.audit_many(batch.paths or [], options, files=files, progress=streams.batch_progress("auditing"), **batch.run_on)
    failures = results.failures
    if len(results.files) == 1 and failures:
        raise failures[0]
    for failure in failures:
        streams.error(str(failure))
    for audited in results.done:
        if reading.errors != "fail":
            streams.report_skipped(audited.stats, audited.file)
    if json_output or not streams.stdout_is_terminal():
        streams.write_json_lines([row.to_wire() for row in results.rows()])
    else:
        _print(results.rows_in_order(lambda audited: [(audited.compactions, audited.total)]), batch.paths or [])
    if failures:
        raise declare.Exit(ExitStatus.ERROR)


def _tokens(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _recall(value: float | None) -> str:
    from ...core.fields import rounded_percent  # rounded down: never more carried than was counted

    return "—" if value is None else rounded_percent(value)


def _usd(value: float | None) -> str:
    return "?" if value is None else f"${value:.4f}"


def _print(sessions: Sequence[tuple[Sequence[CompactionAudit], SessionAudit] | FailedFile], given: Sequence[str]) -> None:
    """Each session's compactions in the order found; a file that could not be read marked as failed, why on stderr."""
    from ...core.reports import FailedFile
    from ...core.summarize import FACT_LABELS
    from ..tables import display_names, fitted_name, print_failed, print_table
    from ..terminal import shown_text

    console = streams.stdout_console()
    names = display_names([session.file if isinstance(session, FailedFile) else session[1].file for session in sessions], given)
    for session in sessions:
        if isinstance(session, FailedFile):
            print_failed(console, names[session.file], "bold")
            continue
        compactions, total = session
        if not compactions:
            rest = shown_text(f": {total.note}" if total.note is not None else ": no compaction recorded")
            console.print(fitted_name(console, names[total.file], rest.cell_len, "bold") + rest)
            continue
        verdict = f": {total.compactions} compaction(s), {total.carried} of {total.facts} facts carried ({_recall(total.recall)})"
        verdict += f", cache rebuilt for {_usd(total.rebuild_usd)}"
        if total.rereads:
            verdict += f", {total.rereads} file(s) read again ({total.reread_tokens:,} tokens)"
        if total.thrash:
            verdict += f", {total.thrash} refilled within 3 calls" + (" (thrashing)" if total.thrashing else "")
        rest = shown_text(verdict)
        console.print(fitted_name(console, names[total.file], rest.cell_len, "bold") + rest)
        rows: list[list[Any]] = []
        for row in compactions:
            style = "green" if (row.recall or 0) >= 0.95 else "yellow" if (row.recall or 0) >= 0.8 else "red"
            rows.append(
                [
                    str(row.line or ""),
                    shown_text((row.timestamp or "")[:16].replace("T", " ")),
                    shown_text(f"{row.trigger or '?'} ({row.by})"),
                    _tokens(row.pre_tokens),
                    _tokens(row.post_tokens),
                    f"{row.summary_tokens:,}",
                    f"{row.carried}/{row.facts}",
                    shown_text(_recall(row.recall), style),
                    _usd(row.rebuild_usd),
                    shown_text(f"{row.refill_turns}" + (" thrash" if row.thrash else ""), "red" if row.thrash else ""),
                ]
            )
        print_table(console, COLUMNS, rows)
        for row in compactions:
            if not row.lost:
                continue
            console.print(shown_text(f"  lost at line {row.line}:", "dim"))
            for fact in row.lost[:LOST_SHOWN]:
                # Fact texts quote the transcript: shown, never markup.
                console.print(shown_text(f"    - {FACT_LABELS.get(fact.kind, fact.kind)}: {fact.text[:160]}"))
            if len(row.lost) > LOST_SHOWN:
                console.print(shown_text(f"    … and {len(row.lost) - LOST_SHOWN} more (--json lists them all)", "dim"))
