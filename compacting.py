"""`compact`: the whole pipeline on one transcript, in the seed's order, with its guards.

microcompact → collapse → summarize (only at or above the autocompact threshold, above
--target-tokens, or forced) → restore (only after a summary). Each stage sees what the one before
it left; untouched lines stay byte-identical; the report says what each stage freed.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from .core.budget import BudgetSettings, thresholds
from .core.jsonl import OnError, ReadStats, iter_entries
from .core.reports import CompactReport, StageRecord
from .core.stage import Outcome, Stage, StageContext, line_bytes
from .counting import CountOptions, Measure, _first_line_format, count_buffer, region_measure
from .formats import get, not_writable
from .pipeline import PIPELINE


@dataclass(frozen=True)
class CompactOptions:
    """compact's own choices, and each stage's settings by name (a stage left out runs with its defaults)."""

    settings: Mapping[str, Any] = field(default_factory=dict)
    force_summary: bool = False
    target_tokens: int | None = None
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    model: str | None = None
    window: int | None = None
    baseline: int | None = None
    format: str | None = None
    on_error: OnError = "fail"
    now: datetime | None = None
    api_key: str | None = None  # the summary model's (never printed)
    base_url: str | None = None

    def of(self, stage: Stage) -> Any:
        return self.settings.get(stage.name) or stage.settings()


def compact_buffer(buffer: Any, source: str, options: CompactOptions, breaker: Any, transcript_path: str | None = None) -> tuple[list[bytes], CompactReport]:
    """The compacted transcript's bytes (as pieces) and the report: every stage of the pipeline in order."""
    transcript_format = get(options.format or _first_line_format(buffer, source))
    if not transcript_format.writable:
        raise not_writable(source, "compact", transcript_format.name)
    stats = ReadStats()
    offset, entries = transcript_format.read_region(buffer, source, options.on_error, stats)
    original = entries
    # Measured as `count --on-error skip` would: a bad line passed through unparsed is no reason to fail.
    counting = CountOptions(format=transcript_format.name, model=options.model, on_error="skip", baseline=options.baseline)
    initial = count_buffer(buffer, source, counting)
    before, model = initial.count.tokens, initial.count.model
    measure = region_measure(buffer[:offset], source, counting)
    stages: list[StageRecord] = []
    current = before
    context = StageContext(
        options.now or datetime.now(timezone.utc), measure, transcript_path, original, breaker=breaker, api_key=options.api_key, base_url=options.base_url
    )
    limits = thresholds(options.model or model, options.budget, options.window, "--window" if options.window else None, window_flag=bool(options.window))
    threshold = limits.autocompact if limits.autocompact is not None else limits.effective_window
    summarized = False
    dropped_prefix = False

    def record(stage: str, outcome: Outcome, measured: Measure, why: str | None) -> None:
        nonlocal current
        after = measured(outcome.entries).count.tokens if outcome.changed else current
        line = StageRecord(stage=stage, changed=outcome.changed, note=outcome.note)
        if why is not None:  # a summary: why it ran, which engine wrote it, what its verifier found
            line["why"] = why
            line["engine"] = outcome.report.get("engine")
            line["verification"] = outcome.report.get("verification")
        line["tokens_before"], line["tokens_after"], line["tokens_freed"] = current, after, current - after
        stages.append(line)
        current = after

    for stage in PIPELINE:
        settings = options.of(stage)
        why = None
        if stage.runs == "after a summary" and not summarized:
            continue
        if stage.runs == "over threshold":
            reasons = []
            if options.force_summary:
                reasons.append("--force")
            if current >= threshold:
                reasons.append(f"{current:,} tokens ≥ the autocompact threshold {threshold:,}")
            if options.target_tokens is not None and current > options.target_tokens:
                reasons.append(f"{current:,} tokens > --target-tokens {options.target_tokens:,}")
            if not reasons:
                stages.append(
                    StageRecord(
                        stage=stage.name,
                        changed=False,
                        note=f"not needed: {current:,} tokens < the autocompact threshold {threshold:,} (--force or --target-tokens to summarize anyway)",
                    )
                )
                continue
            # Claude Code would have compacted on its own: the threshold was reached, nobody forced it.
            auto = not options.force_summary and limits.autocompact is not None and current >= limits.autocompact
            dropped_prefix = bool(getattr(settings, "drop_history", False))
            if dropped_prefix:  # the lines above the context are not written: measured without them
                measure = region_measure(b"", source, counting)
            context = replace(context, measure=measure, threshold=threshold, trigger="auto" if auto else "manual")
            why = "; ".join(reasons)
        if stage.runs == "after a summary":
            # restore looks at the history above the boundary: the untouched head, parsed.
            context = replace(context, history=list(iter_entries(io.BytesIO(bytes(buffer[:offset])), source, options.on_error, stats)))
        outcome = stage.run(entries, transcript_format, settings, context)
        if stage.runs == "over threshold":
            summarized = outcome.changed
        record(stage.name, outcome, measure, why)
        if outcome.changed:
            entries = outcome.entries
    if entries is original and not stats.skipped:
        pieces = [bytes(buffer)]
    else:
        head = b"" if summarized and dropped_prefix else bytes(buffer[:offset])
        pieces = [head, *line_bytes(entries)]
    # Measured on the bytes written, the way `count` will measure them.
    written = count_buffer(b"".join(pieces), source, counting)
    report = CompactReport(
        file=source,
        format=transcript_format.name,
        tokens_before=before,
        tokens_after=written.count.tokens,
        changed=entries is not original,
        skipped_lines=stats.skipped,
        stages=stages,
    )
    return pieces, report
