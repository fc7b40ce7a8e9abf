"""Everything one session's report page shows, as data (`report --json`; the page is one view of it).

The figures come from the code the commands use: `count` (the one accounting), `warn`'s thresholds,
`count --cost`'s prices, and each stage's own run on the file's bytes (a dry run: nothing is written)
measured before → after by `count`, so "microcompact would free 12K" is what `ctxpipe microcompact`
prints on the same file. Whether a stage's cache break pays is `microcompact --cache-aware`'s model
(core.cache.decide); the advice is the stage that saves the most by it, with its command. The
window's parts are count's figures (its baseline inside its total), as `/context` lays them out.
"""

from __future__ import annotations

import bisect
import json
import shlex
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..core.blocks import input_of, is_tool_use
from ..core.cache import CachePolicy, decide
from ..core.catalog import Prices
from ..core.count import UNCALIBRATED, Calibration, Estimates, calibrate, fitted_or_corpus
from ..core.fields import moment, rounded_percent, text
from ..core.jsonl import Entry, OnError, ParsedLines, ReadStats, iter_buffer_entries
from ..core.model import Message
from ..core.reports import Advice, CacheDecisionReport, CallRow, ExcerptLine, SessionReport, StageDryRun, TimelineEvent, WindowPart, WindowPartName
from ..core.titles import session_title
from ..core.tokens import block_texts
from ..core.transcript_format import TranscriptFormat
from ..core.wire import ABSENT
from ..files.inputs import detect_format
from ..files.sessions import COMPACTION_NOTE, Kind
from ..jobs.count import CountOptions, FileCount, block_tokens, breakdown, count_buffer, largest_blocks

if typing.TYPE_CHECKING:
    from ..core.audit import CompactionAudit
    from ..core.tokens import TextCounter
    from ..core.transcript_format import CompactionSpan
    from ..jobs.pipeline import StageRun

EXCERPT_CHARACTERS = 160  # a largest line's excerpt on the page: enough to recognise it, never a whole file
LARGEST_LINES = 10
DRY_RUN_STAGES = ("microcompact", "collapse", "summarize")
# The flags that make a stage's command do what its dry run measured: microcompact clears whatever
# the idle time (the cache model says whether that pays), summarize uses the offline engine (a dry
# run calls no model). _dry_run's settings are these flags' meaning.
STAGE_FLAGS: dict[str, tuple[str, ...]] = {"microcompact": ("--force",), "collapse": (), "summarize": ("--engine", "offline")}
# What a tool acted on, by the input field that names it (first found wins): the file, the command, the search.
SUBJECT_FIELDS = ("file_path", "notebook_path", "command", "pattern", "path", "url", "query", "description")
SUBJECT_CHARACTERS = 120
# A name or a time the file records, on the page and in a label (a model id, a session id, a
# compaction's trigger, a call's timestamp): enough for any real one, never a whole line of the file.
LABEL_CHARACTERS = 80
WORTH_A_BREAK = CachePolicy().clear_at_least  # tokens: below the warning level, smaller savings are not worth a cache break
MARKER_LABELS = {"microcompact_boundary": "microcompact", "ctxpipe_collapse": "collapse", "snip_boundary": "snip"}


@dataclass(frozen=True)
class ReportOptions:
    """What `report` counts with (count's options: model, window, budget, tokenizer) and prices by."""

    count: CountOptions = field(default_factory=CountOptions)
    prices: tuple[tuple[str, Prices], ...] | None = None  # --prices FILE's table before the list prices (None: the list prices)
    horizon: int = 5  # turns over which a stage's cache break must pay for itself
    on_error: OnError = "fail"


def excerpt(block: dict[str, Any]) -> str:
    """The start of what a block holds, on one line (whitespace folded), at most EXCERPT_CHARACTERS."""
    if is_tool_use(block):
        try:
            texts = [json.dumps(input_of(block), ensure_ascii=False)]
        except (RecursionError, ValueError):  # nested deeper than json goes (legal JSON): say so, as no excerpt could show it
            texts = ["(nested too deep to show)"]
    else:
        texts = block_texts(block)[0]
    return shortened(" ".join(texts), EXCERPT_CHARACTERS)


def shortened(text: str, limit: int) -> str:
    """`text` on one line (whitespace folded), at most `limit` characters."""
    from ..core.facts import folded

    flat = folded(text, limit)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def tool_subjects(messages: Sequence[Message]) -> dict[str, str]:
    """Each tool call's id → what it acted on (SUBJECT_FIELDS), for the calls that name something."""
    subjects: dict[str, str] = {}
    for message in messages:
        for block in message.content:
            if not is_tool_use(block):
                continue
            arguments = input_of(block)
            if not isinstance(arguments, dict):
                continue
            named = next((value for key in SUBJECT_FIELDS if isinstance(value := arguments.get(key), str) and value.strip()), None)
            call = block.get("id")
            if named is not None and isinstance(call, str):
                subjects[call] = shortened(named, SUBJECT_CHARACTERS)
    return subjects


def session_report(buffer: Any, source: str, options: ReportOptions, now: datetime, kind: Kind | None = None, path: str | None = None) -> SessionReport:
    """The report of one transcript held in `buffer` (bytes or an mmap); `path` is its file, when it
    is one (a stage's dry run finds what the stage finds beside it, as the stage's command does)."""
    counting = replace(options.count, cost=True, prices=options.prices, on_error=options.on_error)
    # The report reads every line many ways (compactions, events, dry runs): it keeps them all, each
    # parsed once, by the count or by the read after it.
    parsed: ParsedLines = {}
    counted = count_buffer(buffer, source, counting, kind, keeps=parsed)
    transcript_format = detect_format(buffer, source, counting.format)
    entries = list(iter_buffer_entries(buffer, source, options.on_error, ReadStats(), parsed))
    messages = transcript_format.messages(entries)
    counter = counting.counter()
    estimates = Estimates(messages, counter)
    calibration = counted.count.calibration
    if calibration is UNCALIBRATED and counting.calibrating:
        calibration = calibrate(estimates)  # the views price every block: they want the fit even when the count did not
    priced = block_tokens(messages, counter, calibration)  # every block priced once, for the three views and the largest
    views = {by: breakdown(messages, estimates, calibration, by, priced) for by in ("tool", "role", "block")}
    subjects = tool_subjects(messages)
    largest = [
        ExcerptLine(
            line=row.line,
            role=row.role,
            block=row.block,
            tool=row.tool,
            subject=subjects.get(str(row.content.get("id" if row.block == "tool_use" else "tool_use_id"))),
            tokens=row.tokens,
            excerpt=excerpt(row.content),
        )
        for row in largest_blocks(messages, entries, counter, calibration, LARGEST_LINES, priced)
    ]
    assert counted.cost is not None  # asked for above
    calls = counted.cost.calls
    main_calls = [call for call in calls if call.main]
    measured: dict[str, int] = {}  # the input's count as a stage measures it: the same bytes for every dry run, counted once
    dry_runs = [
        _dry_run(name, buffer, source, path, options, now, transcript_format, messages, entries, estimates, calibration, counted, measured)
        for name in DRY_RUN_STAGES
    ]
    # Compared as times, shown as written: a line whose stamp is not a time ("yesterday") is no activity.
    times = sorted((when, stamp) for entry in entries if (when := moment(stamp := text(entry.obj, "timestamp"))) is not None)
    count = counted.count_report()
    # A file read past its bad lines is one the stage must read so too.
    reading = ("--on-error", "skip") if options.on_error == "skip" else ()
    advice = advise(counted, dry_runs, source if path is not None else None, reading)
    return SessionReport(
        file=counted.file,
        format=counted.format,
        kind=count.kind,
        model=counted.count.model,
        title=session_title(entry.obj for entry in entries if isinstance(entry.obj, dict)),
        session_id=next((value for entry in entries if (value := text(entry.obj, "sessionId"))), None),
        first_activity=times[0][1] if times else None,
        last_activity=times[-1][1] if times else None,
        count=count,
        warn=counted.warn_report(),
        calls=calls,
        events=_events(entries, transcript_format, main_calls, _audits(transcript_format.compactions(entries), source, counter, options.prices or ())),
        window=window_parts(counted),
        breakdown=views,
        largest=largest,
        cost=counted.cost.report,
        horizon=options.horizon,
        dry_runs=dry_runs,
        advice=advice,
        recommendation=advice.why + (f" Run: {advice.command}" if advice.command else ""),
    )


def window_parts(counted: FileCount) -> list[WindowPart]:
    """The window as `/context` splits it: the baseline (system prompt and tools, inside the count),
    the messages (the rest of the count), the free space up to the autocompact threshold and the
    buffer above it. They add up to the window, or to the count when it is over the window."""
    levels = counted.thresholds
    tokens, window = counted.count.tokens, levels.window
    baseline = min(counted.count.baseline.tokens if counted.count.baseline else 0, tokens)
    threshold = levels.autocompact if levels.autocompact is not None else window
    free = max(0, threshold - tokens)
    buffer = max(0, window - max(tokens, threshold))
    parts: tuple[tuple[WindowPartName, int], ...] = (("baseline", baseline), ("messages", tokens - baseline), ("free", free), ("autocompact_buffer", buffer))
    return [WindowPart(part=name, tokens=size, percent=round(100 * size / window, 1) if window else 0.0) for name, size in parts]


def _audits(spans: Sequence[CompactionSpan], source: str, counter: TextCounter, prices: Sequence[tuple[str, Prices]]) -> list[CompactionAudit]:
    """core.audit's audit of each compaction; a session without one does not load it (nor the summary's checks)."""
    if not spans:
        return []
    from ..core.audit import audit_session

    return audit_session(spans, source, counter, prices)


def _events(
    entries: Sequence[Entry], transcript_format: TranscriptFormat, main_calls: Sequence[CallRow], audits: Sequence[CompactionAudit] = ()
) -> list[TimelineEvent]:
    """Compactions and stage markers, each placed after the last main call above it; a compaction
    with its audit (what it carried and lost)."""
    audited = {row.line: row for row in audits}
    lines = [call.line or 0 for call in main_calls]  # in file order, so ascending

    def after(line: int | None) -> int | None:
        above = bisect.bisect_left(lines, line) if line is not None else 0
        return main_calls[above - 1].turn if above else None

    events: list[TimelineEvent] = []
    for marker in transcript_format.markers(entries):
        label = MARKER_LABELS.get(marker.kind, marker.kind)
        events.append(
            TimelineEvent(
                kind=label,
                line=marker.line,
                after_turn=after(marker.line),
                tokens_saved=marker.tokens_saved,
                label=f"{label}: {marker.tokens_saved:,} tokens saved",
            )
        )
    for entry in entries:
        metadata = transcript_format.boundary_metadata(entry.obj)
        if metadata is None:
            continue
        trigger = text(metadata, "trigger")
        trigger = shortened(trigger, LABEL_CHARACTERS) if trigger else trigger
        before = metadata.get("preTokens")
        size = f" at {before:,} tokens" if isinstance(before, int) and not isinstance(before, bool) else ""
        audit = audited.get(entry.line or None)
        carried = (
            f"; carried {audit.carried} of {audit.facts} facts" + (f" ({rounded_percent(audit.recall)})" if audit.recall is not None else "") if audit else ""
        )
        events.append(
            TimelineEvent(
                kind="compact_boundary",
                line=entry.line or None,
                after_turn=after(entry.line),
                tokens_saved=None,
                label=f"compacted{f' ({trigger})' if trigger else ''}{size}{carried}",
                facts=audit.facts if audit else None,
                carried=audit.carried if audit else None,
                recall=audit.recall if audit else ABSENT,
                lost=audit.lost if audit else None,
            )
        )
    events.sort(key=lambda event: event.line or 0)
    return events


def _dry_run(
    name: str,
    buffer: Any,
    source: str,
    path: str | None,
    options: ReportOptions,
    now: datetime,
    transcript_format: TranscriptFormat,
    messages: Sequence[Message],
    entries: Sequence[Entry],
    estimates: Estimates,
    calibration: Calibration,
    counted: FileCount,
    measured: dict[str, int],
) -> StageDryRun:
    from ..core.errors import CtxpipeError
    from ..core.microcompact import MicrocompactSettings
    from ..core.summarize import SummarizeSettings
    from ..jobs.pipeline import run_stage, stage_context, stage_named

    stage = stage_named(name)
    # microcompact: what clearing frees now whatever the idle time (the cache model below says
    # whether it pays); summarize: the offline engine, as a dry run calls no model.
    settings: Any = {"microcompact": MicrocompactSettings(force=True), "summarize": SummarizeSettings(engine="offline")}.get(name) or stage.settings()
    context = replace(stage_context(now, path), api_key=None)  # a dry run calls no model
    engine = "offline" if name == "summarize" else None
    try:
        run = run_stage(stage, buffer, source, settings, context, counted.format, "skip", before=measured.get("input"))
        measured["input"] = run.report.tokens_before
    except CtxpipeError as exc:
        before = counted.count.tokens
        return StageDryRun(stage=name, engine=engine, tokens_before=before, tokens_after=before, tokens_freed=0, changed=False, cache=None, note=str(exc))
    report = run.report
    freed = report.tokens_freed
    changed = run.head < len(buffer) or bool(run.lines)
    cache: CacheDecisionReport | None = None
    if changed and freed > 0:
        kept = _kept_prefix(run, source, transcript_format, messages, estimates, calibration, counted)
        decision = decide(messages, entries, freed, kept, CachePolicy(clear_at_least=0, horizon=options.horizon, prices=options.prices or ()), now)
        cache = decision.report()
    before, after = report.tokens_before, report.tokens_after
    if options.count.baseline is not None:
        # The stage measures as its own command does (it has no --baseline); the page's figures are
        # the count's, --baseline's fixed part included: the same tokens freed, from the page's total.
        before = counted.count.tokens
        after = max(0, before - freed)
    return StageDryRun(
        stage=name,
        engine=engine,
        tokens_before=before,
        tokens_after=after,
        tokens_freed=freed,
        changed=changed,
        cache=cache,
        note="" if changed else run.outcome.note,  # why it would change nothing ("nothing to fold", …)
    )


def _kept_prefix(
    run: StageRun,
    source: str,
    transcript_format: TranscriptFormat,
    messages: Sequence[Message],
    estimates: Estimates,
    calibration: Calibration,
    counted: FileCount,
) -> int:
    """Tokens of the prompt before the first message the stage changed: the part whose cache survives
    (the fixed part, system prompt and tools, comes before every message). A summary changes the
    first message of the context, so only the fixed part survives it."""
    # The stage rewrote only its region (run.lines, after the untouched head): the active context is there.
    after = transcript_format.messages(list(iter_buffer_entries(b"".join(run.lines), source, "skip", ReadStats())))
    same = 0
    for old, new in zip(messages, after):
        if old.role != new.role or old.content != new.content:
            break
        same += 1
    fit = fitted_or_corpus(calibration, estimates.counter.name)
    baseline = counted.count.baseline.tokens if counted.count.baseline else 0
    return baseline + fit.apply(estimates.between(0, same))


def stage_command(stage: str, path: str | None, reading: Sequence[str] = ()) -> str:
    """The command that runs `stage` as its dry run did, on the file at `path` as the user gave it,
    writing it back (a stage writes atomically) with what it removes kept in a ledger beside it, so
    `ctxpipe expand --ledger PATH.ledger PATH` puts it back (not a .jsonl: Claude Code would list
    it as a session); with no path (stdin) the stage as a filter.
    `reading`: the flags the file was read with (--on-error skip)."""
    words = ["ctxpipe", stage, *STAGE_FLAGS.get(stage, ()), *reading]
    if path is not None:
        if path.startswith("-"):  # a local name that would read as an option
            path = f"./{path}"
        words += ["--ledger", f"{path}.ledger", "-o", path, path]
    return shlex.join(words)


def _saving(run: StageDryRun) -> float:
    """Dollars a stage saves over the horizon against keeping the context, its cache break paid."""
    return run.cache.cost_keep_usd - run.cache.cost_clear_usd if run.cache is not None else 0.0


def advise(counted: FileCount, dry_runs: Sequence[StageDryRun], path: str | None, reading: Sequence[str] = ()) -> Advice:
    """Should the session be compacted now, with which stage, and why. Among the stages whose cache
    break pays for itself within the horizon, the one that saves the most dollars; below the warning
    level a cache break is worth it only for WORTH_A_BREAK tokens or more (microcompact
    --cache-aware's default). Over it, the stage that frees the most even when its break does not
    pay: the context must shrink soon, and Claude Code's own compaction breaks the cache too."""
    if counted.kind == "compaction":
        return Advice(stage=None, command=None, why=f"This file is {COMPACTION_NOTE}: there is nothing to compact.")
    levels = counted.thresholds
    tokens = counted.count.tokens
    level = levels.level(tokens)
    freeing = [run for run in dry_runs if run.tokens_freed > 0]
    paying = [run for run in freeing if run.cache is not None and run.cache.clear and (level != "normal" or run.tokens_freed >= WORTH_A_BREAK)]

    def compared(best: StageDryRun) -> str:
        rest = [f"{run.stage} {run.tokens_freed:,}" for run in freeing if run is not best]
        return f" ({'; '.join(rest)})" if rest else ""

    if paying:
        best = max(paying, key=lambda run: (_saving(run), run.tokens_freed))
        cache = best.cache
        assert cache is not None  # paying
        turns = f"{cache.horizon} turn{'s' if cache.horizon != 1 else ''}"
        what = " (a summary of the history, the last messages kept verbatim)" if best.stage == "summarize" else ""
        why = (
            f"{best.stage}{what} saves the most for the cache it breaks: it frees {best.tokens_freed:,} tokens{compared(best)},"
            f" and over the next {turns} the smaller prompts cost ${_saving(best):,.2f} less than keeping the context,"
            f" the cache rebuild included (it pays for itself by turn {cache.break_even_turn})."
        )
        if level != "normal" and best.tokens_after >= levels.warning:
            why = why[:-1] + f"; it leaves {best.tokens_after:,} tokens, still over the warning level."
        return Advice(stage=best.stage, command=stage_command(best.stage, path, reading), why=why)
    if level == "normal":
        room = (levels.autocompact if levels.autocompact is not None else levels.blocking) - tokens
        most = max(freeing, key=lambda run: run.tokens_freed, default=None)
        why = ""
        if most is not None and most.tokens_freed < WORTH_A_BREAK:
            why = f"; the stages free at most {most.tokens_freed:,} tokens, under the {WORTH_A_BREAK:,} worth a cache break"
        elif most is not None and most.cache is not None:
            horizon = most.cache.horizon
            why = f"; {most.stage} would free {most.tokens_freed:,} tokens, but its cache break does not pay for itself within {horizon} turn{'s' if horizon != 1 else ''}"
        limit = "autocompact" if levels.autocompact is not None else "the blocking limit"
        return Advice(stage=None, command=None, why=f"No need to compact now: {tokens:,} tokens, {room:,} before {limit}{why}.")
    if freeing:
        best = max(freeing, key=lambda run: run.tokens_freed)
        why = (
            f"The context is at the {level} level: {best.stage} frees the most, {best.tokens_freed:,} tokens{compared(best)}; its cache break"
            " does not pay for itself within the horizon, but the context must shrink soon and Claude Code's own compaction breaks the cache too."
        )
        return Advice(stage=best.stage, command=stage_command(best.stage, path, reading), why=why)
    return Advice(stage=None, command=None, why=f"The context is at the {level} level, and no stage frees anything on this file.")
