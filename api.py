"""The library API: every job the command line does, for a program as for the CLI.

import ctxpipe
transcript = ctxpipe.read_transcript("session.jsonl")          # format detected
messages = ctxpipe.convert(transcript, "anthropic")            # a new Transcript
ctxpipe.write_transcript(messages, "messages.jsonl")           # atomic
for finding in ctxpipe.validate_transcript(transcript):
    print(finding.line, finding.severity, finding.message)
counted = ctxpipe.count_many(["~/.claude/projects/"], jobs=4)  # a batch: local workers, or executor="dask"
for row in counted.rows():  # dataclasses (ctxpipe.core.reports); row.to_wire() is the line `count --json` prints
    print(row.to_wire())  # a file's count, a file that failed ({"file", "error"}), then the total

The command line (ctxpipe.cli) is one client of this module: it imports nothing below it but core's
types. The lower-level names it needs are re-exported here on purpose (EXPORTED); the heavier ones
load on first use, so importing the API stays as light as the command line's start-up.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, cast

from .core.errors import CtxpipeError, SettingsError, UnsupportedError
from .core.fields import aware
from .core.jsonl import OnError, ReadStats, check_on_error, write_entries
from .core.model import Finding, Transcript
from .core.setting import out_of_range
from .files.inputs import (
    STDIN,
    EntryStream,
    as_lines,
    detect_format,
    guard_truncation,
    held_entries,
    is_regular,
    mapped,
    open_file,
    opened,
    read_side_file,
    source_name,
    stream_entries,
    when_stdin_is_a_terminal,
)
from .files.storage import below, identity, is_remote, version
from .formats import NAMES, REGISTRY, WRITABLE, WriteOptions, editor_of, get

if TYPE_CHECKING:
    from .core.api_edits import ApiEditsOptions
    from .core.convert import ConvertReport
    from .core.reports import CompactReport, CompactRow, CompactSkipRow, CountReport, SessionReport, StageReport, WarnReport
    from .core.rollup import FileCalls
    from .core.statusline import Saving, StatusFigures
    from .core.transcript_format import TranscriptFormat
    from .core.wire import Wire
    from .files.atomic import atomic_file, make_folder, unwind_on_termination, write_error, writer
    from .files.sessions import COMPACTION_NOTE, Kind, SessionFile, is_compaction, kind_of
    from .jobs.audit import AuditBatch, AuditOptions, FileAudit
    from .jobs.batch import Progress, Runner, default_jobs
    from .jobs.breaker import breaker
    from .jobs.count import CountOptions, FileCount, count_buffer, count_file
    from .jobs.count_cache import CountCache
    from .jobs.hooks import HookAnswer, HookOptions, SettingsChange, settings_path
    from .jobs.pipeline import (
        GIVEN_BY_COMPACT,
        PIPELINE,
        STAGE_NAMES,
        STAGES,
        CompactOptions,
        CompactRun,
        StageRun,
        compact_buffer,
        model_access,
        ready,
        stage_context,
        stage_named,
    )
    from .jobs.pipeline import run_stage as run_stage_on_buffer
    from .jobs.results import BatchResult, CompactBatch, ContextManagement, CountBatch, FileResult, ValidatedFile, count_total
    from .jobs.rollup import RollupBatch, calls_file
    from .jobs.statusline import StatusOptions
    from .jobs.summary import NOT_ASKED_AGAIN
    from .report.batch import INDEX, ReportBatch, ReportedFile, index_row
    from .report.data import ReportOptions

# The names below the API that its clients (the command line first) use, each loaded when first asked
# for: name -> (module, its name there). mypy reads them from the imports under TYPE_CHECKING above.
_LOADED_ON_USE: dict[str, tuple[str, str]] = {
    # atomic writes: not at the top, where the status line (which writes nothing) would pay for them
    "atomic_file": ("files.atomic", "atomic_file"),
    "make_folder": ("files.atomic", "make_folder"),
    "unwind_on_termination": ("files.atomic", "unwind_on_termination"),
    "write_error": ("files.atomic", "write_error"),
    "writer": ("files.atomic", "writer"),
    # the answers of the jobs: defined beside them, so importing the API defines no class it may not need
    "BatchResult": ("jobs.results", "BatchResult"),
    "CompactBatch": ("jobs.results", "CompactBatch"),
    "ContextManagement": ("jobs.results", "ContextManagement"),
    "CountBatch": ("jobs.results", "CountBatch"),
    "FileResult": ("jobs.results", "FileResult"),
    "ValidatedFile": ("jobs.results", "ValidatedFile"),
    "count_total": ("jobs.results", "count_total"),
    "INDEX": ("report.batch", "INDEX"),
    "ReportBatch": ("report.batch", "ReportBatch"),
    "ReportedFile": ("report.batch", "ReportedFile"),
    "index_row": ("report.batch", "index_row"),
    "Saving": ("core.statusline", "Saving"),
    "StatusFigures": ("core.statusline", "StatusFigures"),
    "StatusOptions": ("jobs.statusline", "StatusOptions"),
    "COMPACTION_NOTE": ("files.sessions", "COMPACTION_NOTE"),
    "SessionFile": ("files.sessions", "SessionFile"),
    "is_compaction": ("files.sessions", "is_compaction"),
    "kind_of": ("files.sessions", "kind_of"),
    "AuditBatch": ("jobs.audit", "AuditBatch"),
    "AuditOptions": ("jobs.audit", "AuditOptions"),
    "FileAudit": ("jobs.audit", "FileAudit"),
    "HookAnswer": ("jobs.hooks", "HookAnswer"),
    "HookOptions": ("jobs.hooks", "HookOptions"),
    "SettingsChange": ("jobs.hooks", "SettingsChange"),
    "settings_path": ("jobs.hooks", "settings_path"),
    "Runner": ("jobs.batch", "Runner"),
    "default_jobs": ("jobs.batch", "default_jobs"),
    "breaker": ("jobs.breaker", "breaker"),
    "CountOptions": ("jobs.count", "CountOptions"),
    "FileCount": ("jobs.count", "FileCount"),
    "count_buffer": ("jobs.count", "count_buffer"),
    "count_file": ("jobs.count", "count_file"),
    "GIVEN_BY_COMPACT": ("jobs.pipeline", "GIVEN_BY_COMPACT"),
    "PIPELINE": ("jobs.pipeline", "PIPELINE"),
    "STAGES": ("jobs.pipeline", "STAGES"),
    "STAGE_NAMES": ("jobs.pipeline", "STAGE_NAMES"),
    "stage_named": ("jobs.pipeline", "stage_named"),
    "CompactOptions": ("jobs.pipeline", "CompactOptions"),
    "StageRun": ("jobs.pipeline", "StageRun"),
    "CompactRun": ("jobs.pipeline", "CompactRun"),
    "compact_buffer": ("jobs.pipeline", "compact_buffer"),
    "model_access": ("jobs.pipeline", "model_access"),
    "ready": ("jobs.pipeline", "ready"),
    "run_stage_on_buffer": ("jobs.pipeline", "run_stage"),
    "stage_context": ("jobs.pipeline", "stage_context"),
    "NOT_ASKED_AGAIN": ("jobs.summary", "NOT_ASKED_AGAIN"),
    "RollupBatch": ("jobs.rollup", "RollupBatch"),
    "calls_file": ("jobs.rollup", "calls_file"),
    "ReportOptions": ("report.data", "ReportOptions"),
}


def __getattr__(name: str) -> Any:
    if name not in _LOADED_ON_USE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, attribute = _LOADED_ON_USE[name]
    value = getattr(importlib.import_module(f".{module}", __package__), attribute)
    globals()[name] = value  # once: the next use is a plain lookup
    return value


# The API's names: its own jobs and types first, then what it re-exports from the rooms below it for
# its clients (the command line takes these from here, never from below).
__all__ = [
    # one transcript
    "api_messages",
    "audit_transcript",
    "compact",
    "compact_to",
    "compact_file",
    "NotASession",
    "ContextManagement",
    "context_management",
    "convert",
    "convert_with_report",
    "count_transcript",
    "expand",
    "read_transcript",
    "report_html",
    "run_stage",
    "session_report",
    "validate_transcript",
    "warn_count",
    "warn_transcript",
    "write_transcript",
    # inside a live session: Claude Code's hooks
    "HookAnswer",
    "HookOptions",
    "SettingsChange",
    "install_hooks",
    "run_hook",
    "settings_path",
    "uninstall_hooks",
    # many: batches on local workers or a Dask cluster
    "AuditBatch",
    "AuditOptions",
    "FileAudit",
    "audit_many",
    "audit_one",
    "BatchResult",
    "CompactBatch",
    "CountBatch",
    "Executor",
    "FileResult",
    "ReportBatch",
    "ReportedFile",
    "ValidatedFile",
    "compact_many",
    "compact_one",
    "count_many",
    "count_one",
    "count_total",
    "index_row",
    "RollupBatch",
    "calls_file",
    "rollup_many",
    "report_many",
    "report_one",
    "session_files",
    "validate_many",
    "validate_one",
    "INDEX",
    "INPUT_BUFFER",
    "is_folder",
    # re-exported: reading and writing files (files/)
    "STDIN",
    "EntryStream",
    "atomic_file",
    "below",
    "detect_format",
    "guard_truncation",
    "when_stdin_is_a_terminal",
    "identity",
    "held_entries",
    "is_regular",
    "is_remote",
    "make_folder",
    "mapped",
    "open_file",
    "opened",
    "read_side_file",
    "source_name",
    "stream_entries",
    "unwind_on_termination",
    "version",
    "write_error",
    "writer",
    # re-exported: the format registry (formats/)
    "NAMES",
    "REGISTRY",
    "WRITABLE",
    "WriteOptions",
    "editor_of",
    "get",
    # re-exported, loaded on first use (_LOADED_ON_USE: sessions, jobs, report)
    "COMPACTION_NOTE",
    "SessionFile",
    "is_compaction",
    "kind_of",
    "Runner",
    "default_jobs",
    "breaker",
    "CountOptions",
    "FileCount",
    "count_buffer",
    "count_file",
    "GIVEN_BY_COMPACT",
    "PIPELINE",
    "STAGES",
    "STAGE_NAMES",
    "stage_named",
    "CompactOptions",
    "StageRun",
    "CompactRun",
    "compact_buffer",
    "model_access",
    "ready",
    "run_stage_on_buffer",
    "stage_context",
    "NOT_ASKED_AGAIN",
    "ReportOptions",
    # the status line
    "status_line",
    "refresh_status_savings",
    "Saving",
    "StatusFigures",
    "StatusOptions",
]


def read_transcript(source: str | os.PathLike[str] | bytes, format: str | None = None, on_error: OnError = "fail") -> Transcript:
    """A transcript from a path ("-" is stdin; a pipe or a FIFO is read as a stream) or from raw
    JSONL bytes; raises InputError on bad input."""
    check_on_error(on_error)
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    name = "<bytes>" if isinstance(source, bytes) else source_name(source)
    with contextlib.nullcontext(io.BytesIO(source)) if isinstance(source, bytes) else opened(source) as stream:
        read = stream_entries(stream, name, format, on_error)  # the commands' detection: another agent's file is refused
        entries = list(read.entries)
    return Transcript(entries, read.format.name, name)


def convert(transcript: Transcript, to: str, repair: bool = False, history: bool = False, options: WriteOptions | None = None) -> Transcript:
    """`transcript` in format `to`; the same format (without repair) returns it unchanged."""
    return convert_with_report(transcript, to, repair, history, options)[0]


def convert_with_report(
    transcript: Transcript, to: str, repair: bool = False, history: bool = False, options: WriteOptions | None = None
) -> tuple[Transcript, ConvertReport]:
    from dataclasses import replace

    from .core.convert import ConvertReport, to_api_messages

    source_format, target = get(transcript.format), get(to)
    refused = rebuild_refused(source_format, target, repair, history)
    if refused is not None:
        raise SettingsError("to", refused)
    if source_format is target and not repair and not history:
        return transcript, ConvertReport()
    messages = source_format.messages(transcript.entries, history=history)
    api_messages, report = to_api_messages(messages, transcript.entries, repair=repair, recorded=True)
    recorded_cwd = source_format.recorded_cwd(transcript.entries)
    if options is None:
        options = WriteOptions(cwd=recorded_cwd or ".")
    elif options.cwd == WriteOptions().cwd and recorded_cwd:  # a cwd left as it was: the one the file records, as the command does
        options = replace(options, cwd=recorded_cwd)
    entries = editor_of(target, "write").from_messages(api_messages, options)  # a format ctxpipe only reads is refused here
    return Transcript(entries, target.name, transcript.source), report


def rebuild_refused(source: TranscriptFormat, target: TranscriptFormat, repair: bool, history: bool) -> str | None:
    """Why a conversion to the same format cannot rebuild its lines from messages (--repair, --history),
    or None: lines that carry more than a message (uuids, sessionId, fields of its own) would lose it."""
    if source is target and not target.lines_are_messages and (repair or history):
        rebuildable = [name for name in WRITABLE if REGISTRY[name].lines_are_messages]
        return f"--repair and --history rebuild messages; use them with --to {' or '.join(rebuildable)}"
    return None


def api_messages(transcript: Transcript, history: bool = False, repair: bool = False) -> list[dict[str, Any]]:
    """The Messages API conversation of the active context (the whole main chain with history)."""
    from .core.convert import to_api_messages

    messages = get(transcript.format).messages(transcript.entries, history=history)
    return to_api_messages(messages, transcript.entries, repair=repair)[0]


def validate_transcript(transcript: Transcript) -> list[Finding]:
    """Schema and structural findings, sorted by line."""
    from .jobs.validate import schema_findings, sort_findings

    chosen = get(transcript.format)
    return sort_findings(schema_findings(transcript.entries, chosen.schema) + chosen.check(transcript.entries))


def write_transcript(transcript: Transcript, path: str | os.PathLike[str]) -> None:
    """Write atomically: a temporary file in the same folder, fsync, then rename over `path`."""
    from .files.atomic import atomic_file  # here, not at the top: the status line imports this module and writes nothing

    with atomic_file(path) as out:
        write_entries(transcript.entries, out)


# --- the commands' own work, returning what they print ------------------------------------------------


@contextlib.contextmanager
def _bytes_of(source: str | os.PathLike[str] | bytes, ranged: bool = False, on_error: OnError = "fail") -> Iterator[tuple[Any, str]]:
    """(buffer, name) for a path ("-": stdin; an mmap for a regular file; a store URL) or raw bytes
    (`on_error`: what a line no reader can hold does to a stream read whole)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        yield as_lines(bytes(source), "<bytes>"), "<bytes>"  # a document a format reads, as mapped gives a file's
        return
    with mapped(os.fspath(source), ranged, on_error) as buffer:
        yield buffer, source_name(os.fspath(source))


def audit_transcript(source: str | os.PathLike[str] | bytes, options: AuditOptions | None = None) -> FileAudit:
    """What `audit` finds in one session: a row per compaction (what it kept and lost, its sizes, the
    cache it rebuilt, thrash, re-reads), and the session's total."""
    from .jobs.audit import AuditOptions, audit_buffer

    options = options or AuditOptions()
    with _bytes_of(source, on_error=options.on_error) as (buffer, name):
        return audit_buffer(buffer, name, options)


def run_hook(name: str, payload: Mapping[str, Any], options: HookOptions | None = None) -> HookAnswer:
    """Run `ctxpipe hook NAME` ("pre-compact", "session-start", "post-compact", "prompt") on the
    JSON a hook gets; what it prints and how it exits. Raises on bad input (the command turns any
    error into one line on stderr and exit 0)."""
    from .jobs.hooks import HOOKS, HookOptions

    if name not in HOOKS:
        raise SettingsError("hook", f"no hook named {name!r} (one of {', '.join(HOOKS)})")
    return HOOKS[name](payload, options or HookOptions())


def install_hooks(project: bool = False, dry_run: bool = False, settings: str | os.PathLike[str] | None = None, program: str | None = None) -> SettingsChange:
    """`hooks install`: ctxpipe's hooks merged into Claude Code's settings (the user's, the project's
    with `project`, or the file `settings`), every other key and hook kept, written atomically with a
    backup; a second run changes nothing. `program` is how the hooks start ctxpipe (default: this
    interpreter, `python -P -m ctxpipe`; with `project`, `ctxpipe` on PATH: a project's settings are
    shared, and this machine's interpreter is not another's)."""
    from pathlib import Path

    from .jobs.hooks import install, settings_path

    if program is None and project and not settings:
        program = "ctxpipe"
    return install(Path(settings) if settings else settings_path(project), program, dry_run=dry_run)


def uninstall_hooks(project: bool = False, dry_run: bool = False, settings: str | os.PathLike[str] | None = None) -> SettingsChange:
    """`hooks uninstall`: only what install added taken out (the settings' bytes back as they were
    when nothing else changed since)."""
    from pathlib import Path

    from .jobs.hooks import settings_path, uninstall

    return uninstall(Path(settings) if settings else settings_path(project), dry_run=dry_run)


def count_transcript(source: str | os.PathLike[str] | bytes, options: CountOptions | None = None) -> CountReport:
    """What `count --json` prints for one transcript: the same accounting, the same report (its
    `.to_wire()` is the object printed)."""

    from .files.sessions import kind_of
    from .jobs.count import CountOptions, count_buffer

    kind = None if isinstance(source, bytes) or os.fspath(source) == "-" else kind_of(source)  # as its name says, like count
    options = options or CountOptions()
    with _bytes_of(source, ranged=not options.reads_whole_file) as (buffer, name):  # a store's object: its ends only
        return count_buffer(buffer, name, options, kind).count_report()


def warn_count(
    source: str | os.PathLike[str] | bytes | None, options: CountOptions | None = None, pass_through: Callable[[Any], None] | None = None
) -> FileCount:
    """The count `warn` judges (`.warn_report()`: the level and the thresholds), of a path (None or
    "-": stdin) or raw bytes. With `pass_through`, the input is read whole and handed to it while it
    is held (`warn --pass-through` copies it on to stdout)."""
    from .files.sessions import kind_of
    from .jobs.count import CountOptions, count_buffer

    options = options or CountOptions()
    held: contextlib.AbstractContextManager[Any]
    if isinstance(source, bytes):
        name, kind, held = "<bytes>", None, contextlib.nullcontext(as_lines(source, "<bytes>"))
    else:
        name = source_name(source)
        kind = None if name == STDIN else kind_of(name)  # as its name says, like count
        # A store's object: its ends only, by ranges, as count reads it (pass_through needs it whole).
        held = mapped(source, ranged=pass_through is None and not options.reads_whole_file, on_error=options.on_error)
    with held as buffer:
        result = count_buffer(buffer, name, options, kind)
        if pass_through is not None:
            pass_through(buffer)
    return result


def warn_transcript(source: str | os.PathLike[str] | bytes, options: CountOptions | None = None) -> WarnReport:
    """What `warn --json` prints for one transcript (`.to_wire()` is the object printed): its level
    ("normal", "warning", "autocompact", "blocking"; `warn` exits 0, 3, 4, 5) and the thresholds it
    was judged by."""
    return warn_count(source, options).warn_report()


def context_management(
    source: str | os.PathLike[str] | None, options: ApiEditsOptions | None = None, count_options: CountOptions | None = None
) -> ContextManagement:
    """The `context_management` request parameter that makes the API clear this transcript's context
    itself (`api-edits`), triggered by default at its autocompact threshold (`count_options`' model,
    window and budget). `source` None or "-" is stdin."""
    from .core.api_edits import ApiEditsOptions, build_api_edits, transcript_facts
    from .core.jsonl import iter_buffer_entries
    from .jobs.count import CountOptions, count_buffer
    from .jobs.results import ContextManagement

    count_options = count_options or CountOptions()
    name = source_name(source)
    with mapped(source, on_error=count_options.on_error) as buffer:
        detect_format(buffer, name, count_options.format)  # another agent's file: refused before its lines are read
        stats = ReadStats()
        # Every line, from the start: the tools and thinking of the whole active context.
        entries = list(iter_buffer_entries(buffer, name, count_options.on_error, stats))
        counted = count_buffer(buffer, name, count_options)
    tool_names, thinking_blocks = transcript_facts(get(counted.format).messages(entries))
    edits = build_api_edits(
        options or ApiEditsOptions(),
        tool_names=tool_names,
        thinking_blocks=thinking_blocks,
        tokens=counted.count.tokens,
        model=counted.count.model,
        autocompact_threshold=counted.thresholds.autocompact,
    )
    return ContextManagement(edits, counted, stats)


def run_stage(
    name: str,
    source: str | os.PathLike[str] | bytes,
    settings: Any = None,
    now: datetime | None = None,
    format: str | None = None,
    on_error: OnError = "fail",
) -> tuple[bytes, StageReport[Wire]]:
    """One stage (`ctxpipe.jobs.pipeline.STAGES`: snip, microcompact, collapse, summarize, restore) on one
    transcript: its output and its report (`ctxpipe.core.reports.StageReport`: `.to_wire()` is what
    `--report-json` writes; `.extras` the stage's own part, e.g. a `MicrocompactExtras`). `settings` is the stage's settings
    (e.g. `MicrocompactSettings(force=True)`; default: the command's defaults). The summarize stage
    asks a model only with the `llm` engine and ANTHROPIC_API_KEY set."""

    from .jobs.pipeline import run_stage as run
    from .jobs.pipeline import stage_context, stage_named

    stage = stage_named(name)
    chosen = settings if settings is not None else stage.settings()
    if not isinstance(chosen, stage.settings):
        raise TypeError(f"{name} takes {stage.settings.__name__}, not {type(chosen).__name__}")
    refused = out_of_range(chosen)
    if refused is not None:
        raise SettingsError(*refused)
    stage.check(chosen)
    path = None if isinstance(source, bytes) else os.fspath(source)
    context = stage_context(aware(now), path)
    with _bytes_of(source) as (buffer, shown):
        result = run(stage, buffer, shown, chosen, context, format, on_error)
        return result.output(buffer), result.report


class NotASession(UnsupportedError):
    """A compaction side-call given to compact: the request Claude Code made to write a summary, not
    a session, so there is nothing to compact (`compact` exits 6; nothing is written)."""


def compact(source: str | os.PathLike[str] | bytes, options: CompactOptions | None = None) -> tuple[bytes, CompactReport]:
    """The whole pipeline on one transcript ("-": stdin), as `compact` runs it: the output and its
    report (`ctxpipe.core.reports.CompactReport`: `.to_wire()` is what `compact --report-json` writes;
    `ctxpipe.jobs.pipeline.CompactOptions` holds each stage's settings). A compaction side-call
    raises NotASession."""
    with _compacted(source, options) as (buffer, run):
        return b"".join(run.pieces(buffer)), run.report


def compact_to(
    source: str | os.PathLike[str] | bytes,
    output: Callable[[], contextlib.AbstractContextManager[BinaryIO]],
    options: CompactOptions | None = None,
    ledger: Callable[[dict[str, Any] | None], contextlib.AbstractContextManager[None]] | None = None,
) -> CompactReport:
    """compact() that writes its output to the stream `output()` opens, once the pipeline is done
    (nothing is opened when it fails), the untouched head straight from the input: what the output
    holds beyond the input is only what changed. With `ledger`, the run's ledger record (None when
    nothing changed) is handed to it around the writing, as a stage's --ledger keeps it."""
    with _compacted(source, options, ledger is not None) as (buffer, run):
        with ledger(run.ledger) if ledger is not None else contextlib.nullcontext(), output() as out:
            run.write(buffer, out)
    return run.report


@contextlib.contextmanager
def _compacted(source: str | os.PathLike[str] | bytes, options: CompactOptions | None, ledger: bool = False) -> Iterator[tuple[Any, CompactRun]]:
    """The input's buffer and compact's run on it, while the buffer is open."""
    from .files.sessions import COMPACTION_NOTE, is_compaction
    from .jobs.breaker import breaker
    from .jobs.pipeline import PIPELINE, compact_run, ready

    options = _as_the_command(options)
    path = None if isinstance(source, bytes) or os.fspath(source) == STDIN else os.fspath(source)
    ready(PIPELINE)  # what the stages load, loaded before the input is read
    with _bytes_of(source, on_error=options.on_error) as (buffer, shown):
        if is_compaction(buffer, path):
            raise NotASession(f"{shown}: {COMPACTION_NOTE}; nothing to compact (compact its session instead)")
        yield buffer, compact_run(buffer, shown, options, breaker(), path, ledger)


def compact_file(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str] | None = None,
    options: CompactOptions | None = None,
    backup: str | None = None,
    name: str | None = None,
    before_write: Callable[[str], None] | None = None,
) -> CompactReport | CompactSkipRow:
    """`compact --out-dir`'s work on one file, for mapping over many in a program of one's own (a
    Dask or Spark job): `source` compacted into `target`, written whole (a temporary file renamed
    over it; in a store, one object stored at the end). Without `target`, in place: the original is
    kept first as SOURCE+`backup` when given (never over another file), and it is replaced only if
    nothing wrote to it meanwhile. Either path may be a store URL (s3://…). Returns the file's
    report (`.to_wire()`: the row `compact --json` prints; a compaction side-call is skipped, nothing
    is written, and its CompactSkipRow says why); `name` is how it names the file (default: the
    path); `before_write(target)` is called just before it is written."""

    from dataclasses import replace

    from .core.errors import ChangedMeanwhile, InputError
    from .core.reports import CompactSkipRow
    from .files.atomic import atomic_file, keep_backup, make_folder
    from .files.sessions import COMPACTION_NOTE, is_compaction
    from .files.storage import version
    from .jobs.breaker import breaker
    from .jobs.pipeline import PIPELINE, compact_run, ready

    options = _as_the_command(options)
    path = os.fspath(source)
    shown = name or path
    output = path if target is None else os.fspath(target)
    in_place = output == path
    read = version(path) if in_place else None  # only a replacement in place asks whether it changed
    ready(PIPELINE)
    with mapped(path, on_error=options.on_error) as buffer:
        if is_compaction(buffer, path):
            return CompactSkipRow(file=shown, skipped=COMPACTION_NOTE)
        run = compact_run(buffer, shown, options, breaker(), path)
        compacted = run.report
        if in_place and not compacted.changed:
            return replace(compacted, output=output)
        kept = keep_backup(path, backup, buffer) if backup and compacted.changed else None  # the very bytes compacted
        report = replace(compacted, output=output, backup=kept)
        try:
            make_folder(os.path.dirname(output))
            if before_write:
                before_write(output)
            # Written while the input is still mapped: its untouched head goes out without a copy
            # (a file replaced in place keeps its mapped bytes until the map closes).
            with atomic_file(output, read, like=path) as out:
                run.write(buffer, out)
        except ChangedMeanwhile:  # e.g. a session still being written: its new lines would be lost
            _drop_backup(kept)  # refused before the replacement: the file is its own, grown
            raise InputError(shown, None, "changed while being compacted (is a program still writing it?); left as it was") from None
        except BaseException:  # a full disk, Ctrl-C: the original stays, so its backup goes (none is left beside it)
            if read is not None and version(path) == read:  # (unless it was replaced after all)
                _drop_backup(kept)
            raise
    return report


def _drop_backup(kept: str | None) -> None:
    """The backup made for a replacement in place that did not happen: removed, so that failed runs
    do not leave copies (`.bak`, `.bak.1`, …) beside a file that was not replaced."""
    from .files import storage

    if kept is None:
        return

    with contextlib.suppress(Exception):  # best effort: a backup left over is a copy, never a loss
        if storage.is_remote(kept):
            fs, key = storage.filesystem(kept)
            fs.rm_file(key)  # that one object: rm() would take "*", "?" and "[…]" in a key for a pattern
        else:
            os.unlink(storage.local_path(kept))


def expand(source: str | os.PathLike[str] | None, ledger: str) -> tuple[bytes, int]:
    """What `expand` writes: the transcript a chain of stages started from, rebuilt from the records
    they appended to `ledger`, and how many stage runs were undone. `source` None or "-" is stdin."""
    from .core.stage import expand as undo
    from .core.stage import read_ledger
    from .formats import other_agents, refuse_other_agent

    with mapped(ledger) as ledger_bytes:
        records = read_ledger(bytes(ledger_bytes), ledger)
    shown = source_name(source)
    with mapped(source) as buffer:
        # No stage writes another agent's file, so no ledger undoes one: refused as every reader does.
        refuse_other_agent(shown, other_agents.examine_buffer(buffer))
        data = bytes(buffer)
    original, undone = undo(data, records)
    if records and not undone:
        raise CtxpipeError(f"{shown}: no record in {ledger} was written for this transcript (it may have changed since)")
    return original, undone


def is_folder(path: str) -> bool:
    """Whether `path` names a folder: a local one, or a prefix in a store."""
    from .files import storage

    if storage.is_remote(path):
        return storage.is_folder(path)
    return os.path.isdir(storage.local_path(path))


# --- batches: many files, on local worker processes or a Dask cluster ------------------------------

Executor = Literal["local", "dask"]
INPUT_BUFFER = 1 << 20  # a transcript read as a stream (validate, convert): read in large pieces


def session_files(
    paths: Sequence[str | os.PathLike[str]],
    subagents: bool = True,
    on_skip: Callable[[str, str], None] | None = None,
    on_missing: Callable[[CtxpipeError], None] | None = None,
    keep_missing: bool = False,
) -> list[SessionFile]:
    """The files given and every session file below each folder given (or store prefix), each once,
    in a stable order: what every batch works on. `on_skip(shown, why)` hears about each file left
    out (a FIFO, a broken link, a second name of one file); a path that names nothing raises
    InputError, or with `on_missing` is handed to it and the other paths are still searched, or with
    `keep_missing` stays in its place, so that the batch fails on it there (a failed row)."""
    from .files.sessions import find_sessions

    if isinstance(paths, (str, bytes, os.PathLike)):  # one path given where a list is asked: not its characters, one by one
        raise TypeError(f"paths is a list of paths, not one path: give [{os.fsdecode(paths)!r}]")
    return find_sessions([os.fspath(path) for path in paths], subagents, on_skip, on_missing, keep_missing)


def _runner(jobs: int, executor: Executor, scheduler: str | None) -> Runner:
    from .jobs.batch import Runner

    if scheduler and executor != "dask":
        raise SettingsError("--scheduler", "goes with --executor dask")
    return Runner(jobs, executor, scheduler)


def _found(paths: Sequence[str | os.PathLike[str]], files: Sequence[SessionFile] | None, subagents: bool) -> list[SessionFile]:
    return list(files) if files is not None else session_files(paths, subagents)


def count_one(item: tuple[str, Kind, str], options: CountOptions) -> FileCount:
    """A batch's job for one file, (path, kind, shown): where the batch runs (a worker, a cluster)."""
    from .jobs.count import count_file

    path, kind, shown = item
    return count_file(path, options, kind, shown)


def count_many(
    paths: Sequence[str | os.PathLike[str]],
    options: CountOptions | None = None,
    *,
    files: Sequence[SessionFile] | None = None,
    subagents: bool = True,
    jobs: int = 0,
    executor: Executor = "local",
    scheduler: str | None = None,
    progress: Progress | None = None,
    cache: bool | str | os.PathLike[str] | None = False,
) -> CountBatch:
    """`count` over files and folders (`files`: the session files already found, e.g. by
    session_files with warnings of one's own): `jobs` worker processes (0: one per core), or one
    task per file on a Dask cluster (executor "dask": the one at `scheduler`, else a local one of
    `jobs` workers). A file that cannot be counted is an error in its row; the others are counted.

    `cache`: True keeps the counts in $XDG_CACHE_HOME/ctxpipe/count (a folder: there) and reads
    back those of files unchanged since, counted with the same options by the same code
    (jobs.count_cache); only the others are counted, and `progress` is told of those only. Not
    with executor "dask", nor for one file's end alone (counting it costs less)."""
    from dataclasses import replace

    from .jobs.batch import for_workers, run_all
    from .jobs.count import CountOptions
    from .jobs.results import CountBatch, batch_of

    runner = _runner(jobs, executor, scheduler)
    found = _found(paths, files, subagents)
    # One file: the tokenizer may use every core; many: the files are spread over them instead.
    options = replace(options or CountOptions(), threads=runner.workers if len(found) == 1 else 1)
    job = functools.partial(count_one, options=options)
    # Counts made on a cluster are not kept: its workers run their own install of ctxpipe. Nor the
    # count of one file's end: a few ms, less than loading its project folder's kept counts.
    keeps = runner.executor == "local" and (len(found) > 1 or options.reads_whole_file)
    kept = _count_cache(options, cache) if keeps else None
    try:
        if kept is None:
            known: list[FileCount | None] = [None] * len(found)
        else:
            from .jobs.count_cache import lookup

            known, stamps, looked = lookup(kept, found)
        todo = [index for index, counted in enumerate(known) if counted is None]
        items = [(for_workers(str(found[index].path), runner), found[index].kind, found[index].shown) for index in todo]
        if len(todo) > 1 and not options.reads_whole_file and runner.executor == "local":
            _map_ends_of(found[index].size for index in todo)
        done = run_all(job, items, runner, (found[index].size for index in todo), progress)
        results: list[tuple[bool, Any]] = [(True, counted) for counted in known]
        for index, result in zip(todo, done):
            results[index] = result
            if kept is not None and result[0]:
                kept.put(str(found[index].path), found[index].kind, found[index].shown, stamps[index], result[1], looked)
        if kept is not None:
            kept.save()
    finally:
        if kept is not None:
            kept.close()
    return cast(CountBatch, batch_of(CountBatch, [f.shown for f in found], results))


def _map_ends_of(sizes: Iterable[int]) -> None:
    """Before counting the ends of several files: the guard against a file truncated under its map,
    armed once here (and so in every worker forked after), when one of them is big enough that
    mapping it beats reading it whole (files.inputs.ENDS_READ_NOT_MAPPED)."""
    from .files.inputs import ENDS_READ_NOT_MAPPED, arm_truncation_guard

    if any(size > ENDS_READ_NOT_MAPPED for size in sizes):
        arm_truncation_guard()


def _count_cache(options: CountOptions, cache: bool | str | os.PathLike[str] | None) -> CountCache | None:
    if not cache:
        return None
    from .jobs.count_cache import CountCache

    return CountCache.for_options(options, None if cache is True else os.fspath(cache))


def calls_one(item: tuple[str, str], options: CountOptions) -> FileCalls:
    """A rollup's job for one file, (path or "-", shown): where the batch runs (a worker, a cluster)."""
    from .files.sessions import kind_of
    from .jobs.rollup import calls_file

    path, shown = item
    return calls_file(None, options, None, shown) if path == STDIN else calls_file(path, options, kind_of(path), shown)


def rollup_many(
    paths: Sequence[str | os.PathLike[str]],
    options: CountOptions | None = None,
    *,
    files: Sequence[SessionFile] | None = None,
    subagents: bool = True,
    jobs: int = 0,
    executor: Executor = "local",
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> RollupBatch:
    """The billed calls of files and folders (paths ["-"]: stdin, read here), for `count --by
    day|project|session`: `.rows(by, zone, window)` rolls them up. On workers as count_many runs them;
    a file that cannot be read is an error in its row; the others are read."""
    from .jobs.count import CountOptions
    from .jobs.rollup import RollupBatch

    job = functools.partial(calls_one, options=options or CountOptions())
    return cast(RollupBatch, _path_batch(RollupBatch, job, paths, files, subagents, jobs, executor, scheduler, progress))


def audit_one(item: tuple[str, str], options: AuditOptions) -> FileAudit:
    """A batch's job for one file, (path or "-", shown): where the batch runs (a worker, a cluster)."""
    from .jobs.audit import audit_file

    path, shown = item
    return audit_file(None if path == STDIN else path, options, shown)


def audit_many(
    paths: Sequence[str | os.PathLike[str]],
    options: AuditOptions | None = None,
    *,
    files: Sequence[SessionFile] | None = None,
    subagents: bool = True,
    jobs: int = 0,
    executor: Executor = "local",
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> AuditBatch:
    """`audit` over files and folders (paths ["-"]: stdin, read here), on workers as count_many runs
    them. A file that cannot be read is an error in its row; the others are audited."""
    from .jobs.audit import AuditBatch, AuditOptions

    job = functools.partial(audit_one, options=options or AuditOptions())
    return cast(AuditBatch, _path_batch(AuditBatch, job, paths, files, subagents, jobs, executor, scheduler, progress))


def _path_batch(
    kind: type[Any],
    job: Callable[[tuple[str, str]], Any],
    paths: Sequence[str | os.PathLike[str]],
    files: Sequence[SessionFile] | None,
    subagents: bool,
    jobs: int,
    executor: Executor,
    scheduler: str | None,
    progress: Progress | None,
    alone: Callable[[tuple[str, str]], Any] | None = None,
) -> Any:
    """A batch whose job takes (path or "-", shown): stdin is read here (a worker has none), the
    files found where the batch runs; the answer is `kind`'s (a BatchResult), in the order found.
    `alone`: the job for a batch of one local file, run here with more than one job allowed (it
    may share the file's work among processes)."""
    from .jobs.batch import Runner, for_workers, run_all
    from .jobs.results import batch_of

    if files is None and [os.fspath(path) for path in paths] == [STDIN]:
        items, runner = [(STDIN, STDIN)], Runner()
    else:
        runner = _runner(jobs, executor, scheduler)
        items = [(for_workers(str(file.path), runner), file.shown) for file in _found(paths, files, subagents)]
        if alone is not None and len(items) == 1 and runner.executor == "local" and runner.workers > 1 and not is_remote(items[0][0]):
            job = alone
    sizes = (os.path.getsize(path) for path, _ in items if not is_remote(path) and os.path.isfile(path))
    results = run_all(job, items, runner, sizes, progress) if items else []
    return batch_of(kind, [shown for _, shown in items], results)


def validate_one(item: tuple[str, str], format_name: str | None, errors: OnError, cores: int = 1) -> ValidatedFile:
    """A batch's job for one file, (path or "-", shown): its report; a file that cannot be read
    raises. Runs where the batch runs (a worker process, a cluster). With `cores` over 1 a large
    local file's schema check is shared with a forked process (jobs.validate.SchemaSplit)."""
    from .core.jsonl import no_cycle_collection
    from .core.reports import ValidateReport
    from .files.sessions import COMPACTION_NOTE, FIRST_LINES, kind_given, kind_of
    from .jobs.batch import beside
    from .jobs.results import ValidatedFile
    from .jobs.validate import SchemaProblem, checked_entries, finding_rows, joined_problems, lines_before, schema_problems_from, schema_split

    path, source = item
    agent_id = ""  # of the first lines, as count and warn tell a compaction side-call
    with no_cycle_collection(), opened(None if path == STDIN else path, buffering=INPUT_BUFFER) as stream:
        read = stream_entries(stream, source, format_name, "skip")
        schema: list[SchemaProblem] = []
        entries = []
        checked_part = read.format.checked_part
        name = read.format.schema
        with (
            schema_split(path) if cores > 1 and path != STDIN else contextlib.nullcontext(None) as split,
            beside(lambda: schema_problems_from(split, name)) if split else contextlib.nullcontext(lambda: None) as theirs,
        ):
            before = lines_before(split) if split else None  # counted while the other process starts
            # Each line checked as it is read (up to where the other process starts).
            for entry in checked_entries(read.entries, name, schema, before):
                if not agent_id and entry.line <= FIRST_LINES and isinstance(named_agent := entry.obj.get("agentId"), str):
                    agent_id = named_agent
                # The structural check needs only what it reads of each line: the rest of the line (and
                # its bytes) is freed now, and its memory holds the next lines.
                entry.raw, entry.obj = None, checked_part(entry.obj)
                entries.append(entry)
            # The structural check needs every line, so only this process makes it: before asking for
            # the other's answer, while that process may still be checking its share of the lines.
            structure = read.format.check(entries)
            if split and before is not None:
                last_line = entries[-1].line if entries else 0
                answer = theirs()
                if answer is None or before + answer[1] < last_line:  # it failed, or the file grew since
                    answer = schema_problems_from(split, name)
                schema = joined_problems(schema, answer[0], before, {line for line, _ in read.stats.problems}, last_line)
        bad_lines = [Finding("error", "bad-line", what, line) for line, what in read.stats.problems] if errors == "fail" else []
        rows = finding_rows(bad_lines, schema, structure)  # listed with the collector still off
        count = sum(1 for row in rows if row.severity == "error")
        report = ValidateReport(
            file=source,
            format=read.format.name,
            entries=len(entries),
            valid=count == 0,
            errors=count,
            warnings=len(rows) - count,
            findings=rows,
        )
        if kind_given(None if path == STDIN else kind_of(path), agent_id) == "compaction":
            report.kind, report.note = "compaction", COMPACTION_NOTE
        # Freed while the collector is still off: it would otherwise walk every object of every line
        # once first (all still in its youngest generation), only to find them about to go.
        del entries, schema
    return ValidatedFile(report, read.stats, source)


def validate_many(
    paths: Sequence[str | os.PathLike[str]],
    format: str | None = None,
    on_error: OnError = "fail",
    *,
    files: Sequence[SessionFile] | None = None,
    subagents: bool = True,
    jobs: int = 0,
    executor: Executor = "local",
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> BatchResult[ValidatedFile]:
    """`validate` over files and folders (paths ["-"]: stdin, read here), on workers as count_many
    runs them. With on_error "skip" bad lines are only counted (in each file's stats), not findings."""
    from .jobs.batch import default_jobs
    from .jobs.results import BatchResult

    job = functools.partial(validate_one, format_name=format, errors=on_error)
    alone = functools.partial(validate_one, format_name=format, errors=on_error, cores=jobs or default_jobs())
    return cast("BatchResult[ValidatedFile]", _path_batch(BatchResult, job, paths, files, subagents, jobs, executor, scheduler, progress, alone))


def _refuse_links_below(out_dir: str, target: str) -> None:
    """A result below --out-dir is written there, not through a symbolic link already in the output
    tree (a link to a file or a folder elsewhere would have it written outside the folder chosen)."""
    from .files import storage

    if storage.is_remote(out_dir) or storage.is_remote(target):
        return
    top = storage.local_path(out_dir)
    relative = os.path.relpath(storage.local_path(target), top)
    current = top
    for part in relative.split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current):
            raise SettingsError(
                "--out-dir", f"{current} is a symbolic link in the output folder: ctxpipe does not write through it (remove it, or choose another --out-dir)"
            )
    if os.path.exists(target) and not os.path.isfile(target):
        # A FIFO or a device left where a result goes: writing into it would block or go nowhere.
        raise SettingsError("--out-dir", f"{target} is not a regular file: ctxpipe replaces a result there, it does not write into it (remove it)")


def _refuse_a_link_out_of(given: Sequence[str], path: str, shown: str) -> None:
    """--in-place replaces what a link names: a file found below a folder given that is a symbolic
    link to a file outside every folder given would be rewritten outside them (a file given by its
    own name, link or not, is the user's choice)."""
    from .files import storage

    if storage.is_remote(path) or path in given or not os.path.islink(path):
        return
    target = os.path.realpath(path)
    roots = [os.path.realpath(storage.local_path(root)) for root in given if not storage.is_remote(root)]
    if not any(target == root or target.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
        raise SettingsError("PATHS", f"{shown}: a symbolic link to {target}, outside the folders given; --in-place does not rewrite it (give that file itself)")


def _compact_plan(files: list[SessionFile], given: Sequence[str], out_dir: str | None, in_place: bool) -> list[tuple[str, str, str]]:
    """(path, shown, target) for each file, checked before anything is written: no two results for
    one target, no result over an input (only in place replaces inputs), no in-place rewrite of
    what is not a regular file (session_files already lists each file once). A conflict is a
    SettingsError naming the option at fault."""
    from .jobs.batch import target_path

    inputs = {identity(str(f.path)): f.shown for f in files}
    written: dict[str, str] = {}
    items = []
    for file in files:
        if in_place and not is_regular(file.path):
            raise SettingsError("PATHS", f"{file.shown}: not a regular file; --in-place replaces regular files only")
        if in_place:
            _refuse_a_link_out_of(given, str(file.path), file.shown)
        target = str(file.path) if in_place else target_path(file.path, given, out_dir or "")
        if not in_place and out_dir:
            _refuse_links_below(out_dir, target)
        key = identity(target)
        if not in_place and key in inputs:
            raise SettingsError("--out-dir", f"the result for {file.shown} would replace the input {inputs[key]}; choose another --out-dir, or use --in-place")
        if key in written:
            raise SettingsError(
                "--out-dir",
                f"{written[key]} and {file.shown} would both be written to {target}; "
                "give their common folder instead (its tree is mirrored below --out-dir), or run them separately",
            )
        written[key] = file.shown
        items.append((str(file.path), file.shown, target))
    return items


def compact_one(item: tuple[str, str, str], options: CompactOptions, backup: str | None, before_write: Callable[[str], None] | None = None) -> CompactRow:
    """A batch's job for one file, (path, shown, target): compact_file, where the batch runs."""
    path, shown, target = item
    return compact_file(path, target, options, backup, shown, before_write=before_write)


def compact_many(
    paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str] | None = None,
    options: CompactOptions | None = None,
    *,
    in_place: bool = False,
    backup: str | None = None,
    files: Sequence[SessionFile] | None = None,
    subagents: bool = True,
    jobs: int = 0,
    executor: Executor = "local",
    scheduler: str | None = None,
    before_write: Callable[[str], None] | None = None,
    progress: Progress | None = None,
) -> CompactBatch:
    """`compact --out-dir` (or `--in-place`, keeping each original that changes as FILE+`backup`)
    over files and folders: each file written whole by compact_file, on workers as count_many runs
    them, the model's failures counted across all of them (one breaker). Before anything is written
    the plan is checked (SettingsError: two results for one path, a result over an input) and
    `out_dir` is made. `progress(number of files)`, if given, is a context around the run that
    yields the function told of each file done (`ok`), or None."""
    from .core.reports import CompactReport
    from .files.atomic import make_folder
    from .jobs.batch import for_workers, run_all
    from .jobs.results import CompactBatch, batch_of

    out_dir = os.fspath(out_dir) if out_dir is not None else None
    if bool(out_dir) == in_place:
        raise SettingsError("--out-dir", "give out_dir or in_place, one of them")
    runner = _runner(jobs, executor, scheduler)
    found = _found(paths, files, subagents)
    planned = _compact_plan(found, [os.fspath(path) for path in paths], out_dir, in_place)
    # What the workers open and write (absolute on a Dask cluster); rows name the paths as planned.
    items = [(for_workers(path, runner), shown, for_workers(target, runner)) for path, shown, target in planned]
    if out_dir:  # once, before the work: a folder that cannot be made, a store's missing bucket or backend
        make_folder(out_dir)
    job = functools.partial(compact_one, options=_as_the_command(options), backup=backup, before_write=before_write)
    results = run_all(job, items, runner, (f.size for f in found), progress, shared_breaker=True)
    for (path, _, target), (worker_path, _, worker_target), (ok, row) in zip(planned, items, results):
        if ok and isinstance(row, CompactReport) and row.output == worker_target:
            row.output = target
            if row.backup and row.backup.startswith(worker_path):
                row.backup = path + row.backup[len(worker_path) :]
    return cast(CompactBatch, batch_of(CompactBatch, [shown for _, shown, _ in planned], results))


def _as_the_command(options: CompactOptions | None) -> CompactOptions:
    """The options as `compact` runs them: without a key given, the model's key and endpoint from the environment."""
    from dataclasses import replace

    from .jobs.pipeline import CompactOptions, model_access

    options = options or CompactOptions()
    if options.api_key is None:
        api_key, base_url = model_access()
        options = replace(options, api_key=api_key, base_url=options.base_url or base_url)
    return options


def report_one(
    item: tuple[str, Kind, str, str | None, tuple[str, str]],
    options: ReportOptions,
    now: datetime,
    out_dir: str | None,
    before_write: Callable[[str], None] | None = None,
) -> ReportedFile:
    """A batch's job for one file, (path, kind, shown, page or None, its place in the index): its
    report, or (given a page path) its page written there, where the batch runs, and only the
    index's row sent back."""
    from .files.atomic import atomic_file, make_folder
    from .files.storage import relative_link
    from .report.batch import ReportedFile, index_row
    from .report.data import session_report as report_of
    from .report.page import session_page

    path, kind, shown, page, placed = item
    with mapped(path) as buffer:
        data = report_of(buffer, shown, options, now, kind, path)
    skipped = data.count.skipped_lines
    if page is None:
        return ReportedFile(index_row(shown, None, data, None, placed), data, skipped)
    make_folder(os.path.dirname(page))
    if before_write:
        before_write(page)
    with atomic_file(page) as out:
        out.write(session_page(data).encode("utf-8"))
    return ReportedFile(index_row(shown, relative_link(page, out_dir or "."), data, None, placed), None, skipped)  # the index links to the page from out_dir


def report_many(
    paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str] | None = None,
    options: ReportOptions | None = None,
    now: datetime | None = None,
    *,
    pages: bool = True,
    files: Sequence[SessionFile] | None = None,
    subagents: bool = True,
    jobs: int = 0,
    executor: Executor = "local",
    scheduler: str | None = None,
    before_write: Callable[[str], None] | None = None,
    progress: Progress | None = None,
) -> ReportBatch:
    """`report` over files and folders. With `out_dir`: each session's page written below it (the
    folders' tree mirrored, NAME.html), checked first (SettingsError: a page over an input, two at
    one path) and the folder made; the batch's `index_html()` is the index page for `index`. With
    `pages` False (`report --json`), or without `out_dir`, each session's report comes back
    instead and no page is written. On workers as count_many runs them; `before_write(page)` is
    called just before each page is written; `progress` is compact_many's."""

    from .files.atomic import make_folder
    from .files.storage import join, with_suffix
    from .jobs.batch import for_workers, run_all, target_path
    from .jobs.results import batch_of
    from .report.batch import INDEX, ReportBatch, place
    from .report.data import ReportOptions

    out_dir = os.fspath(out_dir) if out_dir is not None else None
    runner = _runner(jobs, executor, scheduler)
    found = _found(paths, files, subagents)
    given = [os.fspath(path) for path in paths]
    # Checked before anything is written: no page over an input, no two pages (or a page and the index) at one path.
    inputs = {identity(str(file.path)): file.shown for file in found}
    targets: dict[str, str] = {identity(join(out_dir, INDEX)): INDEX} if out_dir else {}
    if out_dir:
        _refuse_links_below(out_dir, join(out_dir, INDEX))
    items = []
    for file in found:
        page = with_suffix(target_path(file.path, given, out_dir), ".html") if out_dir else None
        if page is not None:
            assert out_dir is not None
            _refuse_links_below(out_dir, page)
            key = identity(page)
            if key in inputs:
                raise SettingsError("--out-dir", f"the page for {file.shown} would replace the input {inputs[key]}; choose another --out-dir")
            if key in targets:
                raise SettingsError("--out-dir", f"{targets[key]} and {file.shown} would both be written to {page}; run them separately")
            targets[key] = file.shown
        written = None if page is None or not pages else for_workers(page, runner)
        items.append((for_workers(str(file.path), runner), file.kind, file.shown, written, place(file.shown, given)))
    if out_dir:
        make_folder(out_dir)  # once, before the workers: a file or an impossible path is one error
    job = functools.partial(
        report_one,
        options=options or ReportOptions(),
        now=aware(now),
        out_dir=out_dir and for_workers(out_dir, runner),
        before_write=before_write,
    )
    results = run_all(job, items, runner, (file.size for file in found), progress)
    batch = cast(ReportBatch, batch_of(ReportBatch, [file.shown for file in found], results))
    return ReportBatch(batch.files, join(out_dir, INDEX) if out_dir else None, tuple(given))


def session_report(source: str | os.PathLike[str] | bytes, options: ReportOptions | None = None, now: datetime | None = None) -> SessionReport:
    """Everything one transcript's page shows, as a SessionReport (`ctxpipe.core.reports`); its
    `to_wire()` is what `report --json` prints (`ctxpipe.report.data.ReportOptions` holds the count
    options, the prices and the horizon)."""

    from .files.sessions import kind_of
    from .report.data import ReportOptions
    from .report.data import session_report as report_of

    path = None if isinstance(source, bytes) or os.fspath(source) == "-" else os.fspath(source)
    with _bytes_of(source) as (buffer, name):
        return report_of(buffer, name, options or ReportOptions(), aware(now), kind_of(path) if path else None, path)


def report_html(report: SessionReport) -> str:
    """The self-contained HTML page `report` writes for one session's report."""
    from .report.page import session_page

    return session_page(report)


# --- the status line ---------------------------------------------------------------------------------
# Claude Code runs `ctxpipe statusline` after every message: this block and what it loads at the top
# stay light (the status line's service imports its heavy parts inside its functions).


def status_line(
    status: Mapping[str, Any], options: StatusOptions | None = None, environ: Mapping[str, str] | None = None, now: float | None = None
) -> StatusFigures:
    """What `ctxpipe statusline` says for `status`, the JSON object Claude Code writes on its stdin
    (untrusted: any field may be missing, null or of another type): the transcript's tokens (count's
    figure, from its end only), the window, warn's level, the tokens left before autocompact, the
    biggest saving microcompact or collapse would make (from a cache; when it is out of date a
    detached background run refreshes it, unless `options.savings` is False), the prompt cache's
    state and the model's name. `environ` (default os.environ) says where the cache lives
    ($XDG_CACHE_HOME); `now` (epoch seconds, default the clock) dates the prompt cache's expiry.
    `options.budget` is not read from the environment: the command passes what it read there."""
    from .jobs.statusline import StatusOptions, figures

    return figures(status, options or StatusOptions(), os.environ if environ is None else environ, now)


def refresh_status_savings(path: str | os.PathLike[str], cache_dir: str | os.PathLike[str]) -> None:
    """The status line's background work, in the foreground: microcompact's and collapse's dry runs
    on `path`, cached in `cache_dir` (made if missing) for `status_line`: what `status_line` starts
    detached. The status line's cache is `<$XDG_CACHE_HOME or ~/.cache>/ctxpipe/statusline`. A
    transcript changed less than a tick of its file system's clock before is waited for first (its stamp would not be settled)."""
    from .jobs.statusline import refresh

    os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    refresh(os.path.abspath(path), os.fspath(cache_dir))
