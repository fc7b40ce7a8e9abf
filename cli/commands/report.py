"""`ctxpipe report`: one self-contained HTML page per session, or an index page for a folder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.prices import CacheModel
from ...core.wire import to_wire
from .. import declare, streams
from ..budget_options import Budget
from ..flags import with_options
from ..metavars import PATHS
from ..options import Batch, FactsJson, Now, OutDir, Output, Reading, parse_now
from ..status import ExitStatus

if TYPE_CHECKING:  # types only
    from ...api import ReportOptions


@with_options(batch=Batch, reading=Reading, budget=Budget, cache=CacheModel)
def report(
    batch: Batch,
    reading: Reading,
    budget: Budget,
    cache: CacheModel,
    output: Output = None,
    out_dir: OutDir = None,
    now: Now = None,
    json_output: FactsJson = False,
) -> None:
    """Write a self-contained HTML page about each session: the prompt size at every API call with
    the warning, autocompact and blocking lines and every compaction, what fills the window now,
    what the session cost (by part, with the cache hit rate), and what each stage would free now
    and whether its prompt-cache break pays for itself within --horizon turns (a dry run: nothing
    is written but the page).

    One transcript: the page goes to -o FILE, or to stdout when that is not a terminal. Several
    files or a folder: --out-dir DIR gets one page per session (the folder's tree mirrored, NAME.html)
    and an index.html listing them by project, with each session's title, sortable by size, cost,
    level and last activity; on a terminal a progress bar on stderr counts the files. --json prints
    the same facts as JSON Lines instead (schema: schemas/report.report.schema.json). Pages load
    nothing from the network and open nothing by themselves.

    Example:  ctxpipe report --out-dir ~/ctxpipe-report ~/.claude/projects/
    """
    from ...api import ReportOptions

    options = ReportOptions(
        count=budget.count_options(reading),
        horizon=cache.horizon,
        on_error=reading.errors,
        prices=cache.prices,
    )
    moment = parse_now(now)
    paths = batch.paths or []  # [] or ["-"]: stdin (batch.from_stdin)
    if out_dir and output:
        raise declare.BadParameter("give -o FILE for one page or --out-dir DIR for a folder's pages, not both", param_hint="--out-dir")
    if out_dir and json_output:
        raise declare.BadParameter("--json prints the facts instead of writing pages: give one or the other", param_hint="--out-dir")
    if batch.one_transcript and not out_dir:
        _one(paths[0] if paths else None, options, moment, output, json_output)
        return
    if not out_dir and not json_output:
        raise declare.BadParameter("several files or a folder need --out-dir DIR (one page each and an index), or --json", param_hint=PATHS)
    if output:
        raise declare.BadParameter("-o FILE is for one transcript; several files go to --out-dir DIR", param_hint="--output")
    if batch.from_stdin:
        raise declare.BadParameter("--out-dir needs files or folders, not stdin", param_hint=PATHS)
    _many(batch, options, moment, out_dir, json_output)


def _one(path: str | None, options: ReportOptions, moment: Any, output: str | None, json_output: bool) -> None:
    from ...api import report_html, session_report

    source = streams.source_name(path)
    if output is None and not json_output and streams.stdout_is_terminal():
        raise declare.BadParameter("the page is HTML: give -o FILE (or redirect stdout, or --json for the facts)", param_hint="--output")
    if streams.is_the_input(output, path):
        raise declare.BadParameter(f"{output} is the transcript read: the page would replace it", param_hint="--output")
    data = session_report(source, options, moment)
    streams.skipped_lines(data.file, data.count.skipped_lines)
    with streams.open_output(output) as out:
        if json_output:
            out.write(streams.json_bytes(to_wire(data)))  # its dry runs' cache decisions are reports of their own
        else:
            out.write(report_html(data).encode("utf-8"))
    if output is not None and not json_output:
        streams.note(f"report: {source}: {output}")


def _many(batch: Batch, options: ReportOptions, moment: Any, out_dir: str | None, json_output: bool) -> None:
    from ...api import report_many
    from ...core.errors import SettingsError
    from ...core.reports import FailedFile
    from ..batch import find_inputs

    paths = batch.paths or []
    files = find_inputs(paths, batch.subagents)
    try:
        done = report_many(
            paths,
            out_dir,
            options,
            moment,
            pages=not json_output,
            files=files,
            before_write=streams.warn_hard_links,
            progress=streams.batch_progress("reporting"),
            **batch.run_on,
        )
    except SettingsError as exc:  # checked before anything is written: no page over an input, no two pages at one path
        raise declare.BadParameter(exc.what, param_hint=exc.flag) from None
    for file in done.files:
        if file.error is not None:
            streams.error(str(file.error))
            if json_output:  # its row in its place, as count writes it
                streams.write_json_lines([FailedFile.of(file.file, file.error).to_wire()])
            continue
        assert file.result is not None  # a file either failed or was reported
        streams.skipped_lines(file.file, file.result.skipped_lines)
        if json_output:
            streams.write_json_lines([to_wire(file.result.report or file.result.row)])
    if done.index and not json_output:
        with streams.open_output(done.index) as out:
            out.write(done.index_html().encode("utf-8"))
        streams.note(f"report: {len(done.files) - len(done.failures)} page(s) and {done.index}")
    if done.failures:
        raise declare.Exit(ExitStatus.ERROR)
