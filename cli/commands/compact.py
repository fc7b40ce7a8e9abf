"""`ctxpipe compact`: the main job — microcompact, collapse, summarize when needed, restore."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any, Optional

from ...api import GIVEN_BY_COMPACT, PIPELINE, CompactOptions, model_access
from ...core.summarize import SummarizeSettings
from .. import declare, streams
from ..budget_options import Baseline, Threshold
from ..flags import Merged, with_options
from ..metavars import PATHS
from ..options import Batch, Json, Ledger, Now, OutDir, Output, Reading, ReportJson, parse_now
from ..stages import checked
from ..status import ExitStatus

if TYPE_CHECKING:  # types only
    from ...core.reports import CompactReport


@with_options(batch=Batch, reading=Reading, threshold=Threshold, stages=Merged(tuple(stage.settings for stage in PIPELINE), GIVEN_BY_COMPACT))
def compact(
    batch: Batch,
    reading: Reading,
    threshold: Threshold,
    stages: dict[type, Any],
    out_dir: OutDir = None,
    output: Output = None,
    ledger: Ledger = None,
    in_place: Annotated[bool, declare.Option("--in-place", help="Replace each file atomically (temp file in the same folder, fsync, rename).")] = False,
    backup: Annotated[
        Optional[str],
        declare.Option(
            "--backup",
            help="With --in-place: keep each original that changes as FILE+SUFFIX (FILE+SUFFIX.1, .2, … when that exists; never overwritten), "
            "written and synced before FILE is replaced.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[bool, declare.Option("--force", help="Summarize even below the autocompact threshold (microcompact is forced too).")] = False,
    target_tokens: Annotated[
        Optional[int], declare.Option("--target-tokens", help="Summarize when the context is above this many tokens.", min=0, show_default=False)
    ] = None,
    baseline: Baseline = None,
    now: Now = None,
    json_output: Json = False,
    report_json: ReportJson = None,
) -> None:
    """Compact transcripts: microcompact → collapse → summarize (when needed) → restore.

    Summarizes only when the active context is at or above the autocompact threshold, above
    --target-tokens, or with --force; the boundary's compactMetadata.trigger is "auto" when the
    threshold was reached without --force, "manual" otherwise. Every option of the stages it
    runs is here under the same name, help and limits (--model also picks the price table and the
    llm engine's model; --force also forces microcompact; --no-marker applies to microcompact and
    collapse). One input without --out-dir/--in-place goes to stdout, like any stage; folders are
    searched for session files and processed on --jobs workers with a progress bar, each written
    atomically; a bad file is listed at the end (exit 1) and the rest go on. A run killed at any
    moment leaves every file old or new, never half-written.

    A file written by Claude Code's compaction side-call (agent-acompact-*.jsonl, or lines whose
    agentId starts with acompact-) is not a session: a batch skips it with one warning line (in
    --json, a row with "skipped"); given alone, it is refused with exit 6 and nothing is written.

    Example:  ctxpipe compact --out-dir compacted/ ~/.claude/projects/
    """

    if in_place and out_dir:
        raise declare.BadParameter("give --in-place or --out-dir, not both", param_hint="--in-place")
    if output is not None and (in_place or out_dir):
        raise declare.BadParameter("writes one transcript: give -o, --out-dir or --in-place", param_hint="--output")
    if backup is not None and not in_place:
        raise declare.BadParameter("--backup goes with --in-place", param_hint="--backup")
    if backup is not None and (not backup or "/" in backup or os.sep in backup):
        raise declare.BadParameter("expected a suffix for the file name, such as .bak", param_hint="--backup")
    for stage in PIPELINE:
        checked(stage, stages[stage.settings])
    settings = {stage.name: stages[stage.settings] for stage in PIPELINE}
    api_key, base_url = model_access()
    stages[SummarizeSettings].check_key(api_key)  # once, not once per file of a batch
    options = CompactOptions(
        settings=settings,
        force_summary=force,
        target_tokens=target_tokens,
        budget=threshold.settings(),
        model=threshold.model,
        window=threshold.window,
        baseline=baseline,
        format=reading.format,
        on_error=reading.errors,
        now=parse_now(now),
        api_key=api_key,
        base_url=base_url,
    )
    paths = batch.paths or []  # [] or ["-"]: stdin (batch.from_stdin)
    single = batch.one_transcript
    if single and not out_dir and not in_place:
        if json_output:  # stdout holds the transcript
            raise declare.BadParameter(
                "one transcript written to stdout has its report in --report-json FILE (--json lists a batch's reports)", param_hint="--json"
            )
        _to_stdout(paths[0] if paths else None, options, report_json, output, ledger)
        return
    if output is not None or ledger is not None:
        raise declare.BadParameter(
            "one transcript only (several files or a folder are written with --out-dir or --in-place)", param_hint="--output" if output else "--ledger"
        )
    if batch.from_stdin:
        raise declare.BadParameter("--out-dir and --in-place need files or folders, not stdin", param_hint=PATHS)
    if stages[SummarizeSettings].session_memory is not None and not single:
        raise declare.BadParameter("the notes of one session go with one transcript, not several files or a folder", param_hint="--session-memory")
    if not out_dir and not in_place:
        raise declare.BadParameter("several files or a folder need --out-dir DIR or --in-place (one file alone goes to stdout)", param_hint=PATHS)
    _batch(batch, options, out_dir, in_place, backup, json_output, report_json)


def _to_stdout(path: str | None, options: CompactOptions, report_json: str | None, output: str | None, ledger: str | None) -> None:
    from ...api import NotASession, compact_to
    from ..stages import ledger_kept

    keep = None if ledger is None else lambda record: ledger_kept(ledger, record)
    streams.refuse_clashing_outputs(path, output, {"--report-json": report_json, "--ledger": ledger})
    guard = streams.rewrite_guard(output, path)
    try:
        report = compact_to(streams.source_name(path), lambda: streams.open_output(output, like=path, if_version=guard), options, keep)
    except NotASession as exc:  # given alone: there is no session to compact, and nothing is written
        streams.error(str(exc))
        raise declare.Exit(ExitStatus.NOT_A_SESSION) from None
    _say(report)
    if report_json:
        with streams.open_output(report_json) as out:
            out.write(streams.json_bytes(report.to_wire(), indent=True))


def _say(report: CompactReport) -> None:
    from ..stages import stage_note

    for stage in report.stages:
        streams.note(stage_note(stage.stage, report.file, stage.note, stage.tokens_before or 0, stage.tokens_after or 0, stage.changed))
    streams.skipped_lines(report.file, report.skipped_lines)  # --on-error skip: said as every other reader does
    streams.note(f"compact: {report.file}: {report.tokens_before:,} → {report.tokens_after:,} tokens")


def _batch(
    batch: Batch,
    options: CompactOptions,
    out_dir: str | None,
    in_place: bool,
    backup: str | None,
    json_output: bool,
    report_json: str | None,
) -> None:
    from ...api import compact_many
    from ...core.errors import SettingsError
    from ..batch import find_inputs

    paths = batch.paths or []
    files = find_inputs(paths, batch.subagents)
    try:
        done = compact_many(
            paths,
            out_dir,
            options,
            in_place=in_place,
            backup=backup,
            files=files,
            before_write=streams.warn_hard_links,
            progress=streams.batch_progress("compacting"),
            **batch.run_on,
        )
    except SettingsError as exc:  # the plan: two results for one path, a result over an input
        raise declare.BadParameter(exc.what, param_hint=exc.flag) from None
    reports = done.reports
    rows = [row.to_wire() for row in done.rows()]
    if json_output or not streams.stdout_is_terminal():
        streams.write_json_lines(rows)
    else:
        _table(done.rows(), paths)
    if report_json:
        with streams.open_output(report_json) as out:
            for row in rows:
                out.write(streams.json_bytes(row))
    for skipped in done.skipped:
        streams.warn(f"{skipped.file}: skipped: {skipped.skipped}")
    _say_fallbacks(reports)
    numbered = [r.backup for r in reports if r.backup and r.backup != f"{r.output}{backup}"]
    if numbered:
        streams.note(
            f"compact: {len(numbered)} {'backup names were' if len(numbered) > 1 else 'backup name was'} taken: "
            f"kept the original as {numbered[0]}{' (and so on)' if len(numbered) > 1 else ''}"
        )
    for failure in done.failures:
        streams.error(str(failure))
    if done.failures:
        streams.note(f"compact: {len(done.failures)} of {len(done.files)} files failed")
        raise declare.Exit(ExitStatus.ERROR)


def _say_fallbacks(reports: list[CompactReport]) -> None:
    """In a batch, a failed model summary is said on stderr too (one compact prints its stage notes):
    which file, why, and that the offline engine stood in; the files the model was no longer asked
    for, once the breaker opened, in one line."""
    from ...api import NOT_ASKED_AGAIN

    unasked = 0
    for report in reports:
        for stage in report.stages:
            if stage.fallback_reason:
                failed = "the llm engine" if "the model failed (" in stage.note else "the session notes"
                streams.warn(
                    f"{report.file}: {failed} failed ({stage.fallback_reason}); the {stage.engine if isinstance(stage.engine, str) else 'offline'} engine stood in"
                )
            elif stage.engine == "offline" and NOT_ASKED_AGAIN in stage.note:
                unasked += 1
    if unasked:
        streams.warn(f"compact: the model failed on too many files in a row, so the offline engine summarized {unasked} more without asking it")


def _table(done: list[Any], given: list[str]) -> None:
    """The batch's table: a row per file compacted or failed (why is on stderr), in the order found, and the total."""
    from ...core.reports import CompactReport, FailedFile
    from ..tables import Column, display_names, print_table
    from ..terminal import shown_text

    # A narrow terminal leaves out the largest priority number first (0: always shown).
    columns = [Column("file", "name", 0), Column("before", "number", 0), Column("after", "number", 0), Column("summarized", "label", 1)]
    reports = [row for row in done if isinstance(row, CompactReport)]
    failed = [row for row in done if isinstance(row, FailedFile)]
    names = display_names([row.file for row in reports + failed], given)
    rows = []
    for report in done:
        if isinstance(report, FailedFile):
            rows.append([shown_text(names[report.file]), shown_text("failed", "red"), "", ""])
            continue
        if not isinstance(report, CompactReport):  # a compaction side-call left out: said on stderr
            continue
        summarized = next((s for s in report.stages if s.stage == "summarize"), None)
        # File names come from the folders searched: shown, never markup.
        rows.append(
            [
                shown_text(names[report.file]),
                f"{report.tokens_before:,}",
                f"{report.tokens_after:,}",
                "yes" if summarized and summarized.changed else "no",
            ]
        )
    before = sum(r.tokens_before for r in reports)
    after = sum(r.tokens_after for r in reports)
    rows.append([shown_text("total", "bold"), f"{before:,}", f"{after:,}", ""])
    print_table(streams.stdout_console(), columns, rows)
