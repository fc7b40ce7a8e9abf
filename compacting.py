"""`compact`: the whole pipeline on one transcript, in the seed's order, with its guards.

microcompact → collapse → summarize (only at or above the autocompact threshold, above
--target-tokens, or forced) → restore (only after a summary). Each stage sees what the one before
it left; untouched lines stay byte-identical; the report says what each stage freed.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from .core.budget import BudgetSettings, thresholds
from .core.collapse import CollapseConfig, collapse
from .core.errors import UnsupportedError
from .core.fields import iso
from .core.jsonl import Entry, OnError, ReadStats, iter_entries
from .core.microcompact import MicrocompactConfig, microcompact
from .core.restore import RestoreConfig, restore
from .core.stage import Outcome, line_bytes
from .core.summarize_engines import Breaker, transcript_model
from .counting import CountOptions, Measure, _first_line_format, count_buffer, region_measure
from .formats import get
from .summarizing import SummarizeOptions, summarize_entries


@dataclass
class CompactOptions:
    microcompact: MicrocompactConfig = field(default_factory=MicrocompactConfig)
    collapse: CollapseConfig = field(default_factory=CollapseConfig)
    summarize: SummarizeOptions = field(default_factory=SummarizeOptions)
    restore: RestoreConfig = field(default_factory=RestoreConfig)
    force_summary: bool = False
    target_tokens: int | None = None
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    model: str | None = None
    window: int | None = None
    baseline: int | None = None
    format: str | None = None
    on_error: OnError = "fail"
    now: datetime | None = None


def compact_buffer(buffer: Any, source: str, options: CompactOptions, breaker: Breaker) -> tuple[list[bytes], dict[str, Any]]:
    """The compacted transcript's bytes (as pieces) and the report."""
    transcript_format = get(options.format or _first_line_format(buffer, source))
    if transcript_format.name == "codex":
        raise UnsupportedError(f"{source}: compact edits claude-code and anthropic transcripts; convert a codex rollout first")
    stats = ReadStats()
    offset, entries = transcript_format.read_region(buffer, source, options.on_error, stats)
    original = entries
    now = options.now or datetime.now(timezone.utc)
    # Measured as `count --on-error skip` would: a bad line passed through unparsed is no reason to fail.
    counting = CountOptions(format=transcript_format.name, model=options.model, on_error="skip", baseline=options.baseline)
    initial = count_buffer(buffer, source, counting)
    before, model = initial.count.tokens, initial.count.model
    measure = region_measure(buffer[:offset], source, counting)
    report: dict[str, Any] = {"file": source, "format": transcript_format.name, "tokens_before": before, "stages": []}
    current = before

    def record(stage: str, outcome: Outcome, measured: Measure, **extra: Any) -> None:
        nonlocal current
        after = measured(outcome.entries).count.tokens if outcome.changed else current
        report["stages"].append(
            {
                "stage": stage,
                "changed": outcome.changed,
                "note": outcome.note,
                **extra,
                "tokens_before": current,
                "tokens_after": after,
                "tokens_freed": current - after,
            }
        )
        current = after

    for name, run in (
        ("microcompact", lambda e: microcompact(e, transcript_format, options.microcompact)),
        ("collapse", lambda e: collapse(e, transcript_format, options.collapse)),
    ):
        outcome = run(entries)
        record(name, outcome, measure)
        entries = outcome.entries
    middle = current
    limits = thresholds(options.model or model, options.budget, options.window, "--window" if options.window else None, window_flag=bool(options.window))
    threshold = limits.autocompact if limits.autocompact is not None else limits.effective_window
    reasons = []
    if options.force_summary:
        reasons.append("--force")
    if middle >= threshold:
        reasons.append(f"{middle:,} tokens ≥ the autocompact threshold {threshold:,}")
    if options.target_tokens is not None and middle > options.target_tokens:
        reasons.append(f"{middle:,} tokens > --target-tokens {options.target_tokens:,}")
    # Claude Code would have compacted on its own: the threshold was reached, nobody forced it.
    auto = not options.force_summary and limits.autocompact is not None and middle >= limits.autocompact
    prefix_entries: list[Entry] | None = None
    if reasons:
        summarized = measure if not options.summarize.drop_history else region_measure(b"", source, counting)
        llm = options.summarize.llm
        if llm is not None and not llm.model:  # no --model: the transcript's
            llm = replace(llm, model=transcript_model(transcript_format.messages(entries)))
        outcome = summarize_entries(
            entries,
            transcript_format,
            replace(options.summarize, measure=summarized, llm=llm, threshold=threshold, original=original, trigger="auto" if auto else "manual"),
            breaker,
        )
        record("summarize", outcome, summarized, why="; ".join(reasons), engine=outcome.report.get("engine"), verification=outcome.report.get("verification"))
        if outcome.changed:
            entries = outcome.entries
            # restore looks at the history above the boundary: parse the untouched head now.
            prefix_entries = list(iter_entries(io.BytesIO(bytes(buffer[:offset])), source, options.on_error, stats))
            restored, _ = restore(prefix_entries + entries, transcript_format, options.restore, iso(now))
            if restored.changed:
                restored.entries = restored.entries[len(prefix_entries) :]
            record("restore", restored, summarized)
            if restored.changed:
                entries = restored.entries
    else:
        report["stages"].append(
            {
                "stage": "summarize",
                "changed": False,
                "note": f"not needed: {middle:,} tokens < the autocompact threshold {threshold:,} (--force or --target-tokens to summarize anyway)",
            }
        )
    if entries is original and not stats.skipped:
        pieces = [bytes(buffer)]
    else:
        head = b"" if prefix_entries is not None and options.summarize.drop_history else bytes(buffer[:offset])
        pieces = [head] + line_bytes(entries)
    # Measured on the bytes written, the way `count` will measure them.
    written = count_buffer(b"".join(pieces), source, counting)
    report.update({"tokens_after": written.count.tokens, "changed": entries is not original, "skipped_lines": stats.skipped})
    return pieces, report
