"""Running one transforming stage: read the region it may edit, write the result, keep the ledger."""

from __future__ import annotations

import contextlib
import io as io_module
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import orjson
import typer

from ..atomic import write_error
from ..core.errors import SettingsError
from ..core.jsonl import Entry, ReadStats, iter_entries
from ..core.stage import Outcome, Stage, StageContext, ledger_record, line_bytes
from ..formats import not_writable
from ..inputs import view
from . import streams
from .flags import with_options
from .options import StageIO, format_name, iso_time


def stage_command(stage: Stage) -> Callable[..., None]:
    """The command of a stage: the options every stage shares, then the stage's own settings."""

    @with_options(given=StageIO, settings=stage.settings)
    def command(given: StageIO, settings: Any) -> None:
        run_command(stage, given, settings)

    command.__name__ = stage.name
    command.__doc__ = stage.help
    return command


def stage_context(path: str | None, now: str | None) -> StageContext:
    """What a stage run from the command line knows besides its settings."""
    from .breaker import breaker

    return StageContext(
        parse_now(now),
        transcript_path=path,
        breaker=breaker(),
        api_key=os.environ.get("ANTHROPIC_API_KEY") or None,  # never printed or logged
        base_url=os.environ.get("ANTHROPIC_BASE_URL") or None,
    )


def checked(stage: Stage, settings: Any) -> None:
    """Settings that do not go together are a usage error (exit 2), before any input is read."""
    try:
        stage.check(settings)
    except SettingsError as exc:
        raise typer.BadParameter(exc.what, param_hint=exc.flag) from None


def run_command(stage: Stage, given: StageIO, settings: Any, context: StageContext | None = None) -> Outcome:
    """Run one stage on one transcript as its command does: read, transform, write, say what was done."""
    checked(stage, settings)
    context = context or stage_context(given.path, given.now)

    def transform(entries: list[Entry], transcript_format: Any, measure: Any) -> Outcome:
        with streams.progress(stage.name) as progress:
            return stage.run(entries, transcript_format, settings, replace(context, measure=measure, progress=progress))

    outcome = run_stage(
        stage.name,
        given.path,
        given.input_format,
        given.on_error,
        given.output,
        given.ledger,
        given.report_json,
        transform,
        given.unbuffered,
        whole=stage.whole(settings),
    )
    if given.report:
        print_report(stage.name, outcome.report)
    for line in outcome.notes:
        streams.note(line)
    return outcome


def parse_now(value: str | None) -> datetime:
    """--now as a time (iso_time checked it when the command line was parsed), or the clock's."""
    from ..core.fields import moment

    return moment(iso_time(value)) or datetime.now(timezone.utc)


def run_stage(
    name: str,
    path: str | None,
    input_format: Any,
    on_error: Any,
    output: str | None,
    ledger: str | None,
    report_json: str | None,
    transform: Callable[[list[Entry], Any, Any], Outcome],
    unbuffered: bool = False,
    whole: bool = False,
) -> Outcome:
    """Read, transform and write one transcript; an untouched input is copied byte for byte.

    The transform gets the entries, the format and a measure (tokens of a candidate output, as
    `count` will find them). What the stage prints as before → after is `count` of its input and
    of its output.
    """
    from ..counting import CountOptions, _first_line_format, count_buffer, mapped, region_measure
    from ..formats import get

    source = streams.source_name(path)
    stats = ReadStats()
    with mapped(path) as buffer:
        transcript_format = get(format_name(input_format) or _first_line_format(buffer, source))
        if not transcript_format.writable:
            raise not_writable(source, name, transcript_format.name)
        if whole:  # the stage needs every line, numbered (e.g. ranges given by line number)
            offset, entries = 0, list(iter_entries(io_module.BytesIO(buffer), source, on_error.value, stats))
        else:
            offset, entries = transcript_format.read_region(buffer, source, on_error.value, stats)
        # Measured as `count --on-error skip` would: a bad line the stage passes through unparsed is no reason to fail.
        counting = CountOptions(format=transcript_format.name, on_error="skip")
        before = count_buffer(buffer, source, counting).count.tokens
        with view(buffer, 0, offset) as prefix:  # released however the stage ends, so the mmap can close
            outcome = transform(entries, transcript_format, region_measure(prefix, source, counting))
            record = None
            if not outcome.changed and not stats.skipped:
                pieces, after = [buffer], before
            else:
                if ledger and outcome.changed:
                    with view(buffer, offset) as region:
                        record, pieces = ledger_record(name, prefix, entries, outcome.entries, outcome.removed, region)
                else:
                    pieces = line_bytes(outcome.entries)
                after = count_buffer(b"".join([prefix, *pieces]), source, counting).count.tokens
                pieces = [prefix, *pieces]
            with ledger_kept(ledger, record), streams.open_output(output) as out:
                for piece in pieces:
                    out.write(piece)
                    if unbuffered:
                        out.flush()
    outcome.report.update({"tokens_before": before, "tokens_after": after, "tokens_freed": before - after})
    streams.report_skipped(stats, source)
    streams.note(stage_note(name, outcome.note, before, after, outcome.changed))
    if report_json:
        with streams.open_output(report_json) as out:
            out.write(streams.json_bytes({"file": source, **outcome.report}, indent=True))  # inert on a terminal, valid with any text
    return outcome


def stage_note(name: str, note: str, before: int, after: int, changed: bool) -> str:
    """The one line a stage prints: what it did and, when it changed anything, `count` before → after."""
    return f"{name}: {note}" + (f"; {before:,} → {after:,} tokens" if changed else "")


@contextlib.contextmanager
def ledger_kept(path: str | None, record: dict[str, Any] | None) -> Iterator[None]:
    """The ledger around writing a stage's output. The record goes in first, so the next stage of a
    pipe appends after it, and comes out again when the output cannot be written. A run with nothing
    to record leaves an empty ledger, which is a valid one: expand then has nothing to undo."""
    if path is None:
        yield
        return
    if record is None:
        yield
        os.close(_open_ledger(path))
        return
    start, end = append_ledger(path, record)
    try:
        yield
    except BaseException:
        _take_back(path, start, end)
        raise


def append_ledger(path: str, record: dict[str, Any]) -> tuple[int, int]:
    """Append one record, whole and synced, or nothing (a half line would stop expand); its byte span."""
    line = orjson.dumps(record) + b"\n"
    descriptor = _open_ledger(path)
    try:
        start = os.lseek(descriptor, 0, os.SEEK_END)
        try:
            written = 0
            while written < len(line):
                written += os.write(descriptor, line[written:])
            if stat.S_ISREG(os.fstat(descriptor).st_mode):
                os.fsync(descriptor)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, start)
            raise write_error(path, exc, "cannot write the ledger") from None
        return start, start + len(line)
    finally:
        os.close(descriptor)


def _open_ledger(path: str) -> int:
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise write_error(path, exc, "cannot write the ledger") from None


def _take_back(path: str, start: int, end: int) -> None:
    """Remove the record at [start, end) again, if it is still the ledger's last line."""
    with contextlib.suppress(OSError):
        descriptor = os.open(path, os.O_WRONLY)
        try:
            info = os.fstat(descriptor)
            if info.st_size == end and stat.S_ISREG(info.st_mode):
                os.ftruncate(descriptor, start)
                os.fsync(descriptor)
        finally:
            os.close(descriptor)


def print_report(name: str, report: dict[str, Any]) -> None:
    """What the stage did, on stderr: its per-tool figures as a small table, else its report as one JSON line."""
    from rich.table import Table

    by_tool = report.get("by_tool") or {}
    if not by_tool:
        streams.note(f"{name}: " + streams.json_bytes(report).decode())  # inert on a terminal, whatever the transcript's text
        return
    from .terminal import shown_text

    table = Table("tool", "results", "tokens freed", show_edge=False)
    for tool, figures in sorted(by_tool.items(), key=lambda item: -item[1]["tokens"]):
        table.add_row(shown_text(tool), str(figures["results"]), f"{figures['tokens']:,}")  # the transcript's tool name
    streams.stderr_console().print(table)
