"""Everything one session's report page shows, as data (`report --json`; the page is one view of it).

The figures come from the code the commands use: `count` (the one accounting), `warn`'s thresholds,
`count --cost`'s prices, and each stage's own run on the file's bytes (a dry run: nothing is written)
measured before → after by `count`, so "microcompact would free 12K" is what `ctxpipe microcompact`
prints on the same file. Whether a stage's cache break pays is `microcompact --cache-aware`'s model
(core.cache.decide).
"""

from __future__ import annotations

import bisect
import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..core.audit import CompactionAudit, audit_session
from ..core.blocks import input_of, is_tool_use
from ..core.cache import CachePolicy, decide
from ..core.catalog import Prices
from ..core.count import UNCALIBRATED, Calibration, Estimates, calibrate, fitted_or_corpus
from ..core.fields import rounded_percent, text
from ..core.jsonl import Entry, OnError, ReadStats, iter_buffer_entries
from ..core.model import Message
from ..core.reports import CacheDecisionReport, CallRow, ExcerptLine, SessionReport, StageDryRun, TimelineEvent
from ..core.tokens import block_texts
from ..core.transcript_format import TranscriptFormat
from ..core.wire import ABSENT
from ..files.inputs import detect_format
from ..files.sessions import Kind
from ..jobs.count import CountOptions, FileCount, breakdown, count_buffer, largest_blocks

if typing.TYPE_CHECKING:
    from ..jobs.pipeline import StageRun

EXCERPT_CHARACTERS = 160  # a largest line's excerpt on the page: enough to recognise it, never a whole file
LARGEST_LINES = 10
DRY_RUN_STAGES = ("microcompact", "collapse", "summarize")
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
            texts = [str(input_of(block))]
        except RecursionError:  # nested deeper than repr goes (legal JSON): say so, as no excerpt could show it
            texts = ["(nested too deep to show)"]
    else:
        texts = block_texts(block)[0]
    folded = re.sub(r"\s+", " ", " ".join(texts)).strip()
    return folded if len(folded) <= EXCERPT_CHARACTERS else folded[: EXCERPT_CHARACTERS - 1] + "…"


def session_report(buffer: Any, source: str, options: ReportOptions, now: datetime, kind: Kind | None = None, path: str | None = None) -> SessionReport:
    """The report of one transcript held in `buffer` (bytes or an mmap); `path` is its file, when it
    is one (a stage's dry run finds what the stage finds beside it, as the stage's command does)."""
    counting = replace(options.count, cost=True, prices=options.prices, on_error=options.on_error)
    counted = count_buffer(buffer, source, counting, kind)
    transcript_format = detect_format(buffer, source, counting.format)
    # The report reads every line many ways (compactions, events, dry runs): it keeps them all.
    entries = list(iter_buffer_entries(buffer, source, options.on_error, ReadStats()))
    messages = transcript_format.messages(entries)
    counter = counting.counter()
    estimates = Estimates(messages, counter)
    calibration = counted.count.calibration
    if calibration is UNCALIBRATED and counting.calibrating:
        calibration = calibrate(estimates)  # the views price every block: they want the fit even when the count did not
    views = {by: breakdown(messages, estimates, calibration, by) for by in ("tool", "role", "block")}
    largest = [
        ExcerptLine(line=row.line, role=row.role, block=row.block, tool=row.tool, tokens=row.tokens, excerpt=excerpt(row.content))
        for row in largest_blocks(messages, entries, counter, calibration, LARGEST_LINES)
    ]
    assert counted.cost is not None  # asked for above
    calls = counted.cost.calls
    main_calls = [call for call in calls if call.main]
    dry_runs = [
        _dry_run(name, buffer, source, path, options, now, transcript_format, messages, entries, estimates, calibration, counted) for name in DRY_RUN_STAGES
    ]
    times = [stamp for entry in entries if (stamp := text(entry.obj, "timestamp"))]
    count = counted.count_report()
    return SessionReport(
        file=counted.file,
        format=counted.format,
        kind=count.kind,
        model=counted.count.model,
        session_id=next((value for entry in entries if (value := text(entry.obj, "sessionId"))), None),
        first_activity=min(times) if times else None,
        last_activity=max(times) if times else None,
        count=count,
        warn=counted.warn_report(),
        calls=calls,
        events=_events(entries, transcript_format, main_calls, audit_session(transcript_format.compactions(entries), source, counter, options.prices or ())),
        breakdown=views,
        largest=largest,
        cost=counted.cost.report,
        horizon=options.horizon,
        dry_runs=dry_runs,
        recommendation=recommendation(counted, dry_runs),
    )


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
) -> StageDryRun:
    from ..core.errors import CtxpipeError
    from ..core.microcompact import MicrocompactSettings
    from ..core.summarize import SummarizeSettings
    from ..jobs.pipeline import BY_NAME, run_stage, stage_context

    stage = BY_NAME[name]
    # microcompact: what clearing frees now whatever the idle time (the cache model below says
    # whether it pays); summarize: the offline engine, as a dry run calls no model.
    settings: Any = {"microcompact": MicrocompactSettings(force=True), "summarize": SummarizeSettings(engine="offline")}.get(name) or stage.settings()
    context = replace(stage_context(now, path), api_key=None)  # a dry run calls no model
    engine = "offline" if name == "summarize" else None
    try:
        run = run_stage(stage, buffer, source, settings, context, counted.format, "skip")
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
    return StageDryRun(
        stage=name,
        engine=engine,
        tokens_before=report.tokens_before,
        tokens_after=report.tokens_after,
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


def recommendation(counted: FileCount, dry_runs: Sequence[StageDryRun]) -> str:
    """One sentence: should the session be compacted now, and how. Below the warning level a cache
    break is worth it only for WORTH_A_BREAK tokens or more (microcompact --cache-aware's default)."""
    levels = counted.thresholds
    tokens = counted.count.tokens
    level = levels.level(tokens)
    paying = [run for run in dry_runs if run.tokens_freed > 0 and run.cache is not None and run.cache.clear]
    cheap = [run for run in paying if run.stage != "summarize" and (level != "normal" or run.tokens_freed >= WORTH_A_BREAK)]
    if level == "normal" and not cheap:
        room = (levels.autocompact if levels.autocompact is not None else levels.blocking) - tokens
        clearing = [run for run in dry_runs if run.stage != "summarize" and run.tokens_freed > 0]
        best = max(clearing, key=lambda run: run.tokens_freed, default=None)
        why = ""
        if best is not None and best.tokens_freed < WORTH_A_BREAK:
            why = f"; clearing frees at most {best.tokens_freed:,} tokens, under the {WORTH_A_BREAK:,} worth a cache break"
        elif best is not None and best.cache is not None:
            why = f"; {best.stage} would free {best.tokens_freed:,} tokens, but its cache break does not pay for itself within {best.cache.horizon} turn{'s' if best.cache.horizon != 1 else ''}"
        return f"No need to compact now: {tokens:,} tokens, {room:,} before {'autocompact' if levels.autocompact is not None else 'the blocking limit'}{why}."
    if cheap:
        best = max(cheap, key=lambda run: run.tokens_freed)
        cache = best.cache
        advice = f"Run `ctxpipe {best.stage}`: it frees {best.tokens_freed:,} tokens, and the cache break pays for itself by turn {cache.break_even_turn if cache else '?'} of {cache.horizon if cache else '?'}."
        if best.tokens_after < levels.warning or level == "normal":
            return advice
        return advice + f" That leaves {best.tokens_after:,} tokens, still over the warning level: `ctxpipe compact` summarizes as well."
    summary = next((run for run in dry_runs if run.stage == "summarize" and run.tokens_freed > 0), None)
    if summary is not None:
        return f"The context is at the {level} level and clearing results frees too little: `ctxpipe compact` (a summary) frees about {summary.tokens_freed:,} tokens."
    return f"The context is at the {level} level, and no stage frees anything on this file."
