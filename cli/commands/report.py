"""`ctxpipe report`: one self-contained HTML page per session, or an index page for a folder."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

import typer

from ...core.cache import CacheModel
from .. import streams
from ..budget_options import Budget
from ..flags import with_options
from ..options import Batch, Json, Now, OutDir, Output, Reading
from ..stages import parse_now
from ..status import ExitStatus

if TYPE_CHECKING:  # types only
    from ...core.reports import IndexRow, SessionReport
    from ...jobs.batch import Runner
    from ...report.data import ReportOptions

INDEX = "index.html"


@with_options(batch=Batch, reading=Reading, budget=Budget, cache=CacheModel)
def report(
    batch: Batch,
    reading: Reading,
    budget: Budget,
    cache: CacheModel,
    output: Output = None,
    out_dir: OutDir = None,
    now: Now = None,
    json_output: Json = False,
) -> None:
    """Write a self-contained HTML page about each session: the prompt size at every API call with
    the warning, autocompact and blocking lines and every compaction, what fills the window now,
    what the session cost (by part, with the cache hit rate), and what each stage would free now
    and whether its prompt-cache break pays for itself within --horizon turns (a dry run: nothing
    is written but the page).

    One transcript: the page goes to -o FILE, or to stdout when that is not a terminal. Several
    files or a folder: --out-dir DIR gets one page per session (the folder's tree mirrored, NAME.html)
    and an index.html listing them, sortable by size, cost, level and last activity. --json prints
    the same facts as JSON Lines instead (schema: schemas/report.report.schema.json). Pages load
    nothing from the network and open nothing by themselves.

    Example:  ctxpipe report --out-dir ~/ctxpipe-report ~/.claude/projects/
    """
    from ...report.data import ReportOptions

    options = ReportOptions(
        count=budget.count_options(reading),
        horizon=cache.horizon,
        on_error=reading.errors,
        prices=cache.prices,
    )
    moment = parse_now(now)
    paths = batch.paths or []  # [] or ["-"]: stdin (batch.from_stdin)
    if out_dir and output:
        raise typer.BadParameter("give -o FILE for one page or --out-dir DIR for a folder's pages, not both", param_hint="--out-dir")
    if batch.one_transcript and not out_dir:
        _one(paths[0] if paths else None, options, moment, output, json_output)
        return
    if not out_dir and not json_output:
        raise typer.BadParameter("several files or a folder need --out-dir DIR (one page each and an index), or --json", param_hint="PATHS")
    if output:
        raise typer.BadParameter("-o FILE is for one transcript; several files go to --out-dir DIR", param_hint="--output")
    if batch.from_stdin:
        raise typer.BadParameter("--out-dir needs files or folders, not stdin", param_hint="PATHS")
    _many(paths, options, moment, out_dir, json_output, batch.runner, batch.subagents)


def _one(path: str | None, options: ReportOptions, moment: Any, output: str | None, json_output: bool) -> None:
    from ...files.inputs import mapped
    from ...files.sessions import kind_of
    from ...report.data import session_report

    source = streams.source_name(path)
    if output is None and not json_output and streams.stdout_is_terminal():
        raise typer.BadParameter("the page is HTML: give -o FILE (or redirect stdout, or --json for the facts)", param_hint="--output")
    if output is not None and path not in (None, streams.STDIN) and _same(output, path):
        raise typer.BadParameter(f"{output} is the transcript read: the page would replace it", param_hint="--output")
    with mapped(path) as buffer:
        given = None if path is None or source == streams.STDIN else path
        data = session_report(buffer, source, options, moment, kind_of(given) if given else None, given)
    streams.skipped_lines(data["file"], data["count"]["skipped_lines"])
    with streams.open_output(output) as out:
        if json_output:
            out.write(streams.json_bytes(data))
        else:
            out.write(_page(data).encode("utf-8"))
    if output is not None and not json_output:
        streams.note(f"report: {source}: {output}")


def _page(data: SessionReport) -> str:
    from ...report.page import session_page

    return session_page(data)


def _many(paths: list[str], options: ReportOptions, moment: Any, out_dir: str | None, json_output: bool, runner: Runner, subagents: bool) -> None:
    from ...files.atomic import make_folder
    from ...files.storage import identity, join, with_suffix
    from ...jobs.batch import for_workers, run_all, target_path
    from ..batch import find_inputs

    files = find_inputs(paths, subagents)
    # Checked before anything is written: no page over an input, no two pages (or a page and the index) at one path.
    inputs = {identity(str(file.path)): file.shown for file in files}
    targets: dict[str, str] = {identity(join(out_dir, INDEX)): INDEX} if out_dir else {}
    items = []
    for file in files:
        page = with_suffix(target_path(file.path, paths, out_dir), ".html") if out_dir else None
        if page is not None:
            key = identity(page)
            if key in inputs:
                raise typer.BadParameter(f"the page for {file.shown} would replace the input {inputs[key]}; choose another --out-dir", param_hint="--out-dir")
            if key in targets:
                raise typer.BadParameter(f"{targets[key]} and {file.shown} would both be written to {page}; run them separately", param_hint="--out-dir")
            targets[key] = file.shown
        items.append((for_workers(str(file.path), runner), file.kind, file.shown, None if page is None else for_workers(page, runner)))
    if out_dir:
        make_folder(out_dir)  # once, before the workers: a file or an impossible path is one error
    job = functools.partial(_report_one, options=options, moment=moment, json_output=json_output, out_dir=out_dir and for_workers(out_dir, runner))
    results = run_all(job, items, runner, sum(file.size for file in files))
    rows: list[IndexRow] = []
    failures = 0
    for (_, _, shown, _), (ok, value) in zip(items, results):
        if not ok:
            failures += 1
            streams.error(str(value))
            rows.append(_row(shown, None, None, str(value)))
            continue
        found, skipped = value
        streams.skipped_lines(shown, skipped)
        if json_output:
            streams.write_json_lines([found])
        else:
            rows.append(found)
    if out_dir and not json_output:
        from ...report.page import index_page

        index = join(out_dir, INDEX)
        with streams.open_output(index) as out:
            out.write(index_page(rows, title=f"ctxpipe report: {len(files)} session{'s' if len(files) != 1 else ''}").encode("utf-8"))
        streams.note(f"report: {len(files) - failures} page(s) and {index}")
    if failures:
        raise typer.Exit(ExitStatus.ERROR)


def _report_one(item: tuple[str, str, str, str | None], options: ReportOptions, moment: Any, json_output: bool, out_dir: str | None) -> Any:
    """In a worker: the report of one file; its page written there (the data stays in the worker)."""
    from ...files.atomic import make_folder
    from ...files.inputs import mapped
    from ...files.storage import relative_link
    from ...report.data import session_report

    path, kind, shown, page = item
    with mapped(path) as buffer:
        data = session_report(buffer, shown, options, moment, kind, path)
    if json_output:
        return data, data["count"]["skipped_lines"]
    assert page is not None
    make_folder(os.path.dirname(page))
    with streams.open_output(page) as out:
        out.write(_page(data).encode("utf-8"))
    return _row(shown, relative_link(page, out_dir or "."), data, None), data["count"]["skipped_lines"]  # the index links to the page from out_dir


def _same(output: str, path: str) -> bool:
    """Whether the page would be written over the transcript read."""
    from ...files.storage import identity, is_remote

    if is_remote(output) or is_remote(path):
        return identity(output) == identity(path)
    return os.path.exists(output) and os.path.samefile(output, path)


def _row(shown: str, page: str | None, data: SessionReport | None, error: str | None) -> IndexRow:
    count = data["count"] if data else None
    return {
        "file": shown,
        "page": page,
        "model": data["model"] if data else None,
        "tokens": count["tokens"] if count else None,
        "percent_of_window": count["percent_of_window"] if count else None,
        "level": data["warn"]["level"] if data else None,
        "usd": data["cost"]["usd"] if data else None,
        "last_activity": data["last_activity"] if data else None,
        "error": error,
    }
