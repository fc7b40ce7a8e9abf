"""The library API: read, convert, validate and write transcripts from Python.

import ctxpipe
transcript = ctxpipe.read_transcript("session.jsonl")          # format detected
messages = ctxpipe.convert(transcript, "anthropic")            # a new Transcript
ctxpipe.write_transcript(messages, "messages.jsonl")           # atomic
for finding in ctxpipe.validate_transcript(transcript):
    print(finding.line, finding.severity, finding.message)
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .core.convert import ConvertReport, to_api_messages
from .core.jsonl import OnError, write_entries
from .core.model import Finding, Transcript
from .files.inputs import mapped, opened, source_name, stream_entries
from .formats import WriteOptions, editor_of, get

if TYPE_CHECKING:
    from .core.reports import CompactReport, CompactSkipRow, CountReport, SessionReport
    from .jobs.count import CountOptions
    from .jobs.pipeline import CompactOptions
    from .report.data import ReportOptions


def read_transcript(source: str | os.PathLike[str] | bytes, format: str | None = None, on_error: OnError = "fail") -> Transcript:
    """A transcript from a path ("-" is stdin; a pipe or a FIFO is read as a stream) or from raw
    JSONL bytes; raises InputError on bad input."""
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
    source_format, target = get(transcript.format), get(to)
    if source_format is target and not repair and not history:
        return transcript, ConvertReport()
    messages = source_format.messages(transcript.entries, history=history)
    api_messages, report = to_api_messages(messages, transcript.entries, repair=repair)
    entries = editor_of(target, "write").from_messages(api_messages, options or WriteOptions())  # a format ctxpipe only reads is refused here
    return Transcript(entries, target.name, transcript.source), report


def api_messages(transcript: Transcript, history: bool = False, repair: bool = False) -> list[dict[str, Any]]:
    """The Messages API conversation of the active context (the whole main chain with history)."""
    messages = get(transcript.format).messages(transcript.entries, history=history)
    return to_api_messages(messages, transcript.entries, repair=repair)[0]


def validate_transcript(transcript: Transcript) -> list[Finding]:
    """Schema and structural findings, sorted by line."""
    from .core.validate import schema_findings, sort_findings

    chosen = get(transcript.format)
    return sort_findings(schema_findings(transcript.entries, chosen.schema) + chosen.check(transcript.entries))


def write_transcript(transcript: Transcript, path: str | os.PathLike[str]) -> None:
    """Write atomically: a temporary file in the same folder, fsync, then rename over `path`."""
    from .files.atomic import atomic_file  # here, not at the top: the status line imports this module and writes nothing

    with atomic_file(path) as out:
        write_entries(transcript.entries, out)


# --- the commands' own work, returning what they print ------------------------------------------------


@contextlib.contextmanager
def _bytes_of(source: str | os.PathLike[str] | bytes, ranged: bool = False) -> Iterator[tuple[Any, str]]:
    """(buffer, name) for a path ("-": stdin; an mmap for a regular file; a store URL) or raw bytes."""
    if isinstance(source, bytes):
        yield source, "<bytes>"
        return
    with mapped(os.fspath(source), ranged) as buffer:
        yield buffer, source_name(os.fspath(source))


def count_transcript(source: str | os.PathLike[str] | bytes, options: CountOptions | None = None) -> CountReport:
    """What `count --json` prints for one transcript: the same accounting, the same object."""

    from .files.sessions import kind_of
    from .jobs.count import CountOptions, count_buffer

    kind = None if isinstance(source, bytes) or os.fspath(source) == "-" else kind_of(source)  # as its name says, like count
    options = options or CountOptions()
    with _bytes_of(source, ranged=not options.reads_whole_file) as (buffer, name):  # a store's object: its ends only
        return count_buffer(buffer, name, options, kind).as_dict()


def run_stage(
    name: str,
    source: str | os.PathLike[str] | bytes,
    settings: Any = None,
    now: datetime | None = None,
    format: str | None = None,
    on_error: OnError = "fail",
) -> tuple[bytes, dict[str, Any]]:
    """One stage (`ctxpipe.jobs.pipeline.STAGES`: snip, microcompact, collapse, summarize, restore) on one
    transcript: its output and what `--report-json` writes. `settings` is the stage's settings
    (e.g. `MicrocompactSettings(force=True)`; default: the command's defaults). The summarize stage
    asks a model only with the `llm` engine and ANTHROPIC_API_KEY set."""
    from datetime import timezone

    from .jobs.pipeline import BY_NAME, stage_context
    from .jobs.pipeline import run_stage as run

    stage = BY_NAME[name]
    chosen = settings if settings is not None else stage.settings()
    if not isinstance(chosen, stage.settings):
        raise TypeError(f"{name} takes {stage.settings.__name__}, not {type(chosen).__name__}")
    stage.check(chosen)
    path = None if isinstance(source, bytes) else os.fspath(source)
    context = stage_context(now or datetime.now(timezone.utc), path)
    with _bytes_of(source) as (buffer, shown):
        result = run(stage, buffer, shown, chosen, context, format, on_error)
        return result.output(buffer), result.report


def compact(source: str | os.PathLike[str] | bytes, options: CompactOptions | None = None) -> tuple[bytes, CompactReport]:
    """The whole pipeline on one transcript, as `compact` runs it: the output and the report
    `compact --report-json` writes (`ctxpipe.jobs.pipeline.CompactOptions` holds each stage's settings)."""
    from dataclasses import replace

    from .core.errors import UnsupportedError
    from .files.sessions import COMPACTION_NOTE, is_compaction
    from .jobs.breaker import breaker
    from .jobs.pipeline import CompactOptions, compact_buffer, model_access

    options = options or CompactOptions()
    if options.api_key is None:  # as the command: the model's key and endpoint from the environment
        api_key, base_url = model_access()
        options = replace(options, api_key=api_key, base_url=options.base_url or base_url)
    path = None if isinstance(source, bytes) else os.fspath(source)
    with _bytes_of(source) as (buffer, shown):
        if is_compaction(buffer, path):
            raise UnsupportedError(f"{shown}: {COMPACTION_NOTE}; nothing to compact (compact its session instead)")
        pieces, report = compact_buffer(buffer, shown, options, breaker(), path)
        return b"".join(pieces), report


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
    nothing wrote to it meanwhile. Either path may be a store URL (s3://…). Returns the row
    `compact --json` prints (a compaction side-call is skipped: nothing is written); `name` is how
    it names the file (default: the path); `before_write(target)` is called just before it is written."""
    from dataclasses import replace

    from .core.errors import ChangedMeanwhile, InputError
    from .files.atomic import atomic_file, keep_backup, make_folder
    from .files.sessions import COMPACTION_NOTE, is_compaction
    from .files.storage import version
    from .jobs.breaker import breaker
    from .jobs.pipeline import PIPELINE, CompactOptions, compact_buffer, model_access, ready

    options = options or CompactOptions()
    if options.api_key is None:  # as the command: the model's key and endpoint from the environment
        api_key, base_url = model_access()
        options = replace(options, api_key=api_key, base_url=options.base_url or base_url)
    path = os.fspath(source)
    shown = name or path
    output = path if target is None else os.fspath(target)
    in_place = output == path
    read = version(path) if in_place else None  # only a replacement in place asks whether it changed
    ready(PIPELINE)
    with mapped(path, on_error=options.on_error) as buffer:
        if is_compaction(buffer, path):
            return {"file": shown, "kind": "compaction", "skipped": COMPACTION_NOTE, "changed": False, "output": None}
        pieces, report = compact_buffer(buffer, shown, options, breaker(), path)
        report["output"] = output
        if in_place and not report["changed"]:
            return report
        if backup and report["changed"]:
            report["backup"] = keep_backup(path, backup, buffer)  # the very bytes compacted
    make_folder(os.path.dirname(output))
    if before_write:
        before_write(output)
    try:
        with atomic_file(output, read) as out:
            for piece in pieces:
                out.write(piece)
    except ChangedMeanwhile:  # e.g. a session still being written: its new lines would be lost
        raise InputError(shown, None, "changed while being compacted (is a program still writing it?); left as it was") from None
    return report


def session_report(source: str | os.PathLike[str] | bytes, options: ReportOptions | None = None, now: datetime | None = None) -> SessionReport:
    """What `report --json` prints for one transcript: everything its page shows
    (`ctxpipe.report.data.ReportOptions` holds the count options, the prices and the horizon)."""
    from datetime import timezone

    from .files.sessions import kind_of
    from .report.data import ReportOptions
    from .report.data import session_report as report_of

    path = None if isinstance(source, bytes) or os.fspath(source) == "-" else os.fspath(source)
    with _bytes_of(source) as (buffer, name):
        return report_of(buffer, name, options or ReportOptions(), now or datetime.now(timezone.utc), kind_of(path) if path else None, path)


def report_html(report: SessionReport) -> str:
    """The self-contained HTML page `report` writes for one session's report."""
    from .report.page import session_page

    return session_page(report)


# --- the status line ---------------------------------------------------------------------------------
# Claude Code runs `ctxpipe statusline` after every message: this block and what it loads at the top
# stay light (the status line's service imports its heavy parts inside its functions).

from collections.abc import Mapping  # noqa: E402

from .jobs.statusline import Saving as Saving  # noqa: E402  # re-exported: the status line's types, beside its functions
from .jobs.statusline import StatusFigures as StatusFigures  # noqa: E402
from .jobs.statusline import StatusOptions as StatusOptions  # noqa: E402


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
    from .jobs.statusline import figures

    return figures(status, options or StatusOptions(), os.environ if environ is None else environ, now)


def refresh_status_savings(path: str | os.PathLike[str], cache_dir: str | os.PathLike[str]) -> None:
    """The status line's background work, in the foreground: microcompact's and collapse's dry runs
    on `path`, cached in `cache_dir` (made if missing) for `status_line`: what `status_line` starts
    detached. The status line's cache is `<$XDG_CACHE_HOME or ~/.cache>/ctxpipe/statusline`."""
    from .jobs.statusline import refresh

    os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    refresh(os.path.abspath(path), os.fspath(cache_dir))


def guard_truncation(message: Callable[[str], str], status: int) -> None:
    """From now on, a file truncated while ctxpipe has it mapped ends the process with `message(file)`
    on stderr and exit `status`, instead of a bare SIGBUS (it takes over SIGBUS for the whole process)."""
    from .files.inputs import guard_truncation as guard

    guard(message, status)
