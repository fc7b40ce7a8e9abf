"""Running one transforming stage: read the region it may edit, write the result, keep the ledger."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import orjson

from ..api import write_error
from ..core.errors import SettingsError
from ..core.stage import Stage, StageContext
from . import declare

if TYPE_CHECKING:
    from ..api import StageRun
    from ..core.reports import StageReport
    from ..core.wire import Wire
from . import streams
from .flags import with_options
from .options import InputPath, Ledger, Now, Output, Reading, Report, ReportJson, Unbuffered, parse_now


# Here, not in options.py with the other bundles: only a stage's command loads it.
@dataclass(frozen=True)
class StageIO(Reading):
    """What every stage command shares: where the transcript comes from and goes, and the stage's records."""

    path: InputPath = None
    output: Output = None
    now: Now = None
    report: Report = False
    report_json: ReportJson = None
    ledger: Ledger = None
    unbuffered: Unbuffered = False


def stage_command(stage: Stage) -> Callable[..., None]:
    """The command of a stage: the options every stage shares, then the stage's own settings."""

    @with_options(given=StageIO, settings=stage.settings)
    def command(given: StageIO, settings: Any) -> None:
        with streams.one_transcript(given.path, stage.name, stage.in_compact):
            run_command(stage, given, settings)

    command.__name__ = stage.name
    command.__doc__ = stage.help
    return command


def stage_context(path: str | None, now: str | None) -> StageContext:
    """What a stage run from the command line knows besides its settings."""
    from ..api import stage_context as context

    return context(parse_now(now), path)


def checked(stage: Stage, settings: Any) -> None:
    """Settings that do not go together are a usage error (exit 2), before any input is read."""
    try:
        stage.check(settings)
    except SettingsError as exc:
        raise declare.BadParameter(exc.what, param_hint=exc.flag) from None


def run_command(stage: Stage, given: StageIO, settings: Any, context: StageContext | None = None) -> StageRun:
    """Run one stage on one transcript as its command does: read, transform, write, say what was done.
    An untouched input is copied byte for byte."""
    from ..api import mapped, ready, run_stage_on_buffer

    checked(stage, settings)
    streams.refuse_clashing_outputs(given.path, given.output, {"--report-json": given.report_json, "--ledger": given.ledger})
    guard = streams.rewrite_guard(given.output, given.path)
    ready((stage,))
    context = context or stage_context(given.path, given.now)
    source = streams.source_name(given.path)
    with mapped(given.path, on_error=given.errors) as buffer:
        with streams.progress(stage.progress) if stage.progress else contextlib.nullcontext(None) as progress:
            run = run_stage_on_buffer(
                stage, buffer, source, settings, replace(context, progress=progress), given.format, given.errors, ledger=given.ledger is not None
            )
        with ledger_kept(given.ledger, run.ledger), streams.open_output(given.output, like=given.path, if_version=guard) as out:
            run.write(buffer, out, given.unbuffered)
    streams.report_skipped(run.stats, source)
    streams.note(stage_note(stage.name, source, run.outcome.note, run.report.tokens_before, run.report.tokens_after, run.outcome.changed))
    if given.report_json:
        with streams.open_output(given.report_json) as out:
            out.write(streams.json_bytes(run.report.to_wire(), indent=True))  # inert on a terminal, valid with any text
    if given.report and run.outcome.report:  # a stage that did nothing has nothing to detail
        print_report(stage.name, run.report)
    for line in run.outcome.notes:
        streams.note(line)
    return run


def stage_note(name: str, source: str, note: str, before: int, after: int, changed: bool) -> str:
    """The one line a stage prints: the file it read (a pipe's stdin has one input: not named), what
    it did and, when it changed anything, `count` before → after."""
    from ..api import STDIN

    named = "" if source == STDIN else f"{source}: "
    return f"{name}: {named}{note}" + (f"; {before:,} → {after:,} tokens" if changed else "")


@contextlib.contextmanager
def ledger_kept(path: str | None, record: dict[str, Any] | None) -> Iterator[None]:
    """The ledger around writing a stage's output. The record goes in first, so the next stage of a
    pipe appends after it, and comes out again when the output cannot be written. A run with nothing
    to record leaves an empty ledger, which is a valid one: expand then has nothing to undo."""
    if path is None:
        yield
        return
    from ..api import is_remote
    from ..core.errors import CtxpipeError

    if is_remote(path):  # checked before the output is written
        raise CtxpipeError(f"{path}: the ledger is appended to by each stage of a pipe, and a store's objects cannot be appended to: give a local file")
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
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # it holds what the stages removed: the owner's only
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


def print_report(name: str, report: StageReport[Wire]) -> None:
    """What the stage did, on stderr: its per-tool figures as a small table, else its report as one JSON line."""
    from ..core.reports import CollapseExtras, MicrocompactExtras

    by_tool = report.extras.by_tool if isinstance(report.extras, (MicrocompactExtras, CollapseExtras)) else None
    if not by_tool:
        streams.note(f"{name}: " + streams.json_bytes(report.to_wire()).decode().rstrip("\n"))  # inert on a terminal, whatever the transcript's text
        return
    from .tables import Column, print_table
    from .terminal import shown_text

    # A narrow terminal leaves out the largest priority number first (0: always shown).
    columns = [Column("tool", "name", 0), Column("results", "number", 1), Column("tokens freed", "number", 0)]
    rows = [  # the transcript's tool names
        [shown_text(tool), str(figures.results), f"{figures.tokens:,}"] for tool, figures in sorted(by_tool.items(), key=lambda item: -item[1].tokens)
    ]
    print_table(streams.stderr_console(), columns, rows, whole="--report-json FILE")
