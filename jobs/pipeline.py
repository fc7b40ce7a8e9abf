"""The stages in the seed's pipeline order, and running them: one stage on a transcript, or the
whole pipeline (`compact`). The stage commands, `compact` and the library are all built on this.

snip → microcompact → collapse → summarize → restore, as Claude Code's query loop applies them
(restore re-injects after a summary). `compact` runs every stage marked `in_compact`:
microcompact → collapse → summarize (only at or above the autocompact threshold, above
--target-tokens, or forced) → restore (only after a summary). Each stage sees what the one before
it left; untouched lines stay byte-identical; what a stage says it freed is `count` of its input
minus `count` of its output.
"""

from __future__ import annotations

import importlib
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO

from ..core.budget import BudgetSettings
from ..core.errors import InputError, SettingsError
from ..core.fields import aware
from ..core.jsonl import LineIndex, OnError, ReadStats, check_on_error, iter_entries
from ..core.setting import out_of_range
from ..core.stage import Outcome, Stage, StageContext, ledger_record, line_bytes
from ..core.wire import ABSENT, Wire
from ..files.inputs import detect_format, view
from ..formats import stage_editor
from .ports import DISK

if TYPE_CHECKING:  # types only: the commands start without them
    from ..core.jsonl import Entry
    from ..core.reports import CompactReport, StageRecord, StageReport
    from ..core.summarize import SummarizeSettings
    from ..core.transcript_format import WritableFormat
    from .count import Measure

    # The registry, made on first use (__getattr__ below): a stage's command loads its own stage only.
    STAGES: tuple[Stage, ...]
    PIPELINE: tuple[Stage, ...]
    BY_NAME: dict[str, Stage]
    SUMMARIZE: Stage


def _summarize(entries: list[Entry], transcript_format: WritableFormat, settings: SummarizeSettings, context: StageContext) -> Outcome:
    # The engines (the model's client, the session notes, the count of a candidate) load when a
    # summary is written, not when the commands start (see ready()).
    from . import summary as summary_stage

    return summary_stage.run(entries, transcript_format, settings, context)


def ready(stages: tuple[Stage, ...]) -> None:
    """Load what running `stages` needs, before any input is read: a Ctrl-C then lands in the run,
    where it is handled, not inside an import (where Python may swallow it or die by the signal)."""
    from . import count as file_count  # noqa: F401  # every run counts its input and output

    if any(stage.name == "summarize" for stage in stages):
        from . import summary as summary_stage  # noqa: F401


def _summarize_stage() -> Stage:
    # The summarize stage's settings are in core/summarize.py; its run is the service's (jobs/summary.py).
    from ..core.summarize import SummarizeSettings

    return Stage(
        "summarize",
        SummarizeSettings,
        _summarize,
        """Summarize the older part of the active context and keep a recent tail verbatim.

    Claude Code files get the original lines above, a compact_boundary, the isCompactSummary user
    line (continuation preamble + summary) and the kept tail re-linked after it, so Claude Code
    resumes the compacted conversation; Messages-API files get a summary message and the tail.
    stderr says which engine ran and why. With --verify (default) every typed instruction, edited
    file, the last request, open todos and an unresolved error are checked in the result, and
    whatever is missing is added as "Facts to keep".

    Example:  ctxpipe summarize --engine offline session.jsonl > compacted.jsonl
    """,
        # --drop-history writes the lines before the summary no more: it needs them all.
        every_line=lambda settings: bool(settings.drop_history),
        runs="over threshold",
        progress="summarizing",
    )


# The stages in pipeline order, each where its Stage is declared (a core module's STAGE; summarize's
# here): a stage's module, its settings and report types load only when that stage is asked for.
STAGE_NAMES = ("snip", "microcompact", "collapse", "summarize", "restore")
_DECLARED_IN = {"snip": "..core.snip", "microcompact": "..core.microcompact", "collapse": "..core.collapse", "restore": "..core.restore"}
_MADE: dict[str, Stage] = {}


def stage_named(name: str) -> Stage:
    """The stage called `name`, its module loaded on first use; SettingsError naming the stages for any other name."""
    stage = _MADE.get(name)
    if stage is None:
        if name not in STAGE_NAMES:
            raise SettingsError("stage", f"no stage named {name!r} (one of {', '.join(STAGE_NAMES)})")
        if name == "summarize":
            stage = _summarize_stage()
        else:
            stage = importlib.import_module(_DECLARED_IN[name], __package__).STAGE
        _MADE[name] = stage
    return stage


def every_stage() -> tuple[Stage, ...]:
    """Every stage, in pipeline order (STAGES)."""
    return tuple(stage_named(name) for name in STAGE_NAMES)


def pipeline() -> tuple[Stage, ...]:
    """The stages `compact` runs, in order (PIPELINE)."""
    return tuple(stage for stage in every_stage() if stage.in_compact)


def __getattr__(name: str) -> Any:
    """STAGES, PIPELINE, BY_NAME and SUMMARIZE, made on first use (PEP 562)."""
    made: Any
    if name == "STAGES":
        made = every_stage()
    elif name == "PIPELINE":
        made = pipeline()
    elif name == "BY_NAME":
        made = {stage.name: stage for stage in every_stage()}
    elif name == "SUMMARIZE":
        made = stage_named("summarize")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = made  # once: the next use is a plain lookup
    return made


# --- one stage -------------------------------------------------------------------------------------


def model_access() -> tuple[str | None, str | None]:
    """The summary model's key and endpoint as the environment gives them (the key is never printed or logged)."""
    return os.environ.get("ANTHROPIC_API_KEY") or None, os.environ.get("ANTHROPIC_BASE_URL") or None


def stage_context(now: datetime, transcript_path: str | None) -> StageContext:
    """What a stage run on one transcript knows besides its settings, for the commands and the library."""
    api_key, base_url = model_access()
    return StageContext(now, transcript_path=transcript_path, api_key=api_key, base_url=base_url, workspace=DISK)


def write_output(buffer: Any, head: int, lines: list[bytes], out: BinaryIO, flush: bool = False) -> None:
    """An output held as the input's first `head` bytes and then `lines`, written without joining them."""
    with view(buffer, 0, head) as part:
        out.write(part)
    for line in lines:
        out.write(line)
        if flush:
            out.flush()


@dataclass
class StageRun:
    """One stage run on one transcript: its output as the input's first `head` bytes and then `lines`
    (an untouched input is all head, copied byte for byte), the outcome, and the report."""

    head: int
    lines: list[bytes]
    outcome: Outcome
    report: StageReport[Wire]  # core.reports.<Stage>Report: file, the stage's own keys, tokens_before/after/freed
    ledger: dict[str, Any] | None  # the record `expand` undoes it with (when asked for and something changed)
    stats: ReadStats  # the bad lines left out (--on-error skip)

    def write(self, buffer: Any, out: BinaryIO, flush: bool = False) -> None:
        """The output's bytes to `out`, the head straight from the input's buffer (no copy)."""
        write_output(buffer, self.head, self.lines, out, flush)

    def output(self, buffer: Any) -> bytes:
        return bytes(buffer[: self.head]) + b"".join(self.lines)


def run_stage(
    stage: Stage,
    buffer: Any,
    source: str,
    settings: Any,
    context: StageContext,
    format: str | None = None,
    on_error: OnError = "fail",
    ledger: bool = False,
    before: int | None = None,
) -> StageRun:
    """Run `stage` on one transcript's bytes. What it reports as before → after is `count` of its
    input and of its output, each measured as `count --on-error skip` would (a bad line the stage
    passes through unparsed is no reason to fail). `before`: that count of the input, when the
    caller has it from another stage's run on the same bytes (a report's dry runs)."""
    from ..core.reports import StageReport
    from .count import CountOptions, RegionMeasure, count_buffer

    transcript_format = stage_editor(detect_format(buffer, source, format), source, stage.name)
    stats = ReadStats()
    offset, entries, history = _read(stage, settings, buffer, source, transcript_format, on_error, stats)
    counting = CountOptions(format=transcript_format.name, on_error="skip")
    whole = None
    if before is None:
        whole = count_buffer(buffer, source, counting)
        before = whole.count.tokens
    record = None
    lines: list[bytes] = []
    measure = RegionMeasure(buffer, offset, source, counting, whole)
    context = replace(context, measure=measure, history=history)
    outcome = stage.run(entries, transcript_format, settings, context)
    if not outcome.changed and not stats.skipped:
        head, after = len(buffer), before
    else:
        if ledger and outcome.changed:
            with view(buffer, 0, offset) as prefix, view(buffer, offset) as region:  # released however it ends, so the mmap can close
                record, lines = ledger_record(stage.name, prefix, entries, outcome.entries, outcome.removed, region)
        else:
            lines = line_bytes(outcome.entries)
        head = offset
        # The output as it will be written: the input's head read in place, then the new lines (a
        # count the stage made of these very entries is that count).
        after = measure.written(outcome.entries, lines).count.tokens
    report = StageReport(file=source, extras=outcome.report, tokens_before=before, tokens_after=after, tokens_freed=before - after)
    return StageRun(head, lines, outcome, report, record, stats)


def _history(stage: Stage, buffer: Any, offset: int, source: str, on_error: OnError, stats: ReadStats) -> LineIndex:
    """The lines above the active context (buffer[:offset]), as restore reads them: in place, each
    parsed when read, with its bytes, the lines its walk comes back to kept, the stage's folds folded."""
    return LineIndex(buffer, source, on_error, stats, stop=offset, raw=True, cached=LineIndex.CACHED, folds=stage.history_folds)


def _read(
    stage: Stage, settings: Any, buffer: Any, source: str, transcript_format: WritableFormat, on_error: OnError, stats: ReadStats
) -> tuple[int, list[Entry], Sequence[Entry]]:
    """Where the region the stage edits starts, its entries, and the lines above it read in place."""
    if stage.every_line(settings) and stage.history_in_place:
        # The lines above the active context are read in place and passed through, when that writes
        # what reading every line would: no blank, bad or BOM-led line among them (else the first
        # bad line in the file is the one to report, and every line is read as below).
        try:
            offset, entries = transcript_format.read_region(buffer, source, on_error, stats)
            history = _history(stage, buffer, offset, source, on_error, stats)
            if history.verbatim() and not stats.skipped:
                return offset, entries, history
        except InputError:
            pass
        stats.skipped, stats.problems = 0, []
    if stage.every_line(settings):  # the stage needs every line, numbered (e.g. ranges given by line number)
        return 0, list(iter_entries(io.BytesIO(buffer), source, on_error, stats)), ()
    offset, entries = transcript_format.read_region(buffer, source, on_error, stats)
    return offset, entries, ()


# --- the pipeline: compact -------------------------------------------------------------------------


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

    def __post_init__(self) -> None:
        # A library caller's options are held to what the command line accepts: a misspelt stage,
        # settings of another stage, a value its flag refuses.
        for name, settings in self.settings.items():
            wanted = stage_named(name).settings  # SettingsError for a name that is no stage
            if not isinstance(settings, wanted):
                raise SettingsError("settings", f"{name} takes {wanted.__name__}, not {type(settings).__name__}")
            refused = out_of_range(settings)
            if refused is not None:
                raise SettingsError(*refused)
        check_on_error(self.on_error)

    def of(self, stage: Stage) -> Any:
        """The stage's settings, with what compact's own options mean for it (GIVEN_BY_COMPACT)."""
        settings = self.settings.get(stage.name) or stage.settings()
        handed = {name: value for name, value in self.given().items() if value and hasattr(settings, name) and not getattr(settings, name)}
        return replace(settings, **handed) if handed else settings

    def given(self) -> dict[str, Any]:
        """The one place where compact's own options reach its stages under the same name: --force
        (summarize even below the threshold) also forces microcompact, and --model (the window's)
        also picks the price table and the llm engine's model. The CLI lets no other stage option
        clash (cli/flags.Merged)."""
        return {"force": self.force_summary, "model": self.model}


GIVEN_BY_COMPACT = frozenset(CompactOptions().given())


@dataclass
class CompactRun:
    """compact on one transcript: its output as the input's first `head` bytes and then `lines`
    (an untouched input is all head), and the report."""

    head: int
    lines: list[bytes]
    report: CompactReport
    ledger: dict[str, Any] | None = None  # the record `expand` undoes the whole run with (when asked for and something changed)

    def write(self, buffer: Any, out: BinaryIO) -> None:
        """The output's bytes to `out`, the head straight from the input's buffer (no copy)."""
        write_output(buffer, self.head, self.lines, out)

    def pieces(self, buffer: Any) -> list[bytes]:
        return [bytes(buffer[: self.head]), *self.lines]


def compact_buffer(buffer: Any, source: str, options: CompactOptions, breaker: Any, transcript_path: str | None = None) -> tuple[list[bytes], CompactReport]:
    """The compacted transcript's bytes (as pieces) and the report (compact_run, copied out of the buffer)."""
    run = compact_run(buffer, source, options, breaker, transcript_path)
    return run.pieces(buffer), run.report


def compact_run(buffer: Any, source: str, options: CompactOptions, breaker: Any, transcript_path: str | None = None, ledger: bool = False) -> CompactRun:
    """Every stage of the pipeline in order on one transcript; the output is only as big as what
    changed (the head stays in the buffer), and the history restore reads is parsed as it is read.
    With `ledger`, the run's one ledger record (the pipeline undone at once by `expand`)."""
    from ..core.reports import CompactReport, StageRecord, SummarizeExtras
    from .count import CountOptions, RegionMeasure, count_buffer

    transcript_format = stage_editor(detect_format(buffer, source, options.format), source, "compact")
    stats = ReadStats()
    offset, entries = transcript_format.read_region(buffer, source, options.on_error, stats)
    original = entries
    # Measured as `count --on-error skip` would: a bad line passed through unparsed is no reason to fail.
    counting = CountOptions(
        format=transcript_format.name, model=options.model, window=options.window, on_error="skip", baseline=options.baseline, budget=options.budget
    )
    initial = count_buffer(buffer, source, counting)
    before = initial.count.tokens
    measure = at_offset = RegionMeasure(buffer, offset, source, counting, initial)
    stages: list[StageRecord] = []
    current = before
    context = StageContext(
        aware(options.now),
        measure,
        transcript_path,
        original,
        breaker=breaker,
        api_key=options.api_key,
        base_url=options.base_url,
        rules=options.budget.rules.value if options.budget.rules is not None else None,
        workspace=DISK,
    )
    limits = initial.thresholds  # the model's, the session's version's rules, a window a recorded prompt proves
    threshold = limits.autocompact if limits.autocompact is not None else limits.effective_window
    summarized = False
    dropped_prefix = False
    removed: list[dict[str, Any]] = []  # what every stage took out, for the ledger's reader

    def record(stage: str, outcome: Outcome, measured: Measure, why: str | None) -> None:
        nonlocal current
        after = measured(outcome.entries).count.tokens if outcome.changed else current
        summary = outcome.report if isinstance(outcome.report, SummarizeExtras) else SummarizeExtras()
        asked = why is not None  # a summary: why it ran, which engine wrote it, what its verifier found
        stages.append(
            StageRecord(
                stage=stage,
                changed=outcome.changed,
                # What the stage's own command prints after its line (a summary that grew the context) goes with it.
                note="; ".join([outcome.note, *outcome.notes]),
                why=why,
                engine=summary.engine if asked else ABSENT,
                verification=summary.verification if asked else ABSENT,
                fallback_reason=summary.fallback_reason or None,
                tokens_before=current,
                tokens_after=after,
                tokens_freed=current - after,
            )
        )
        current = after

    for stage in pipeline():
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
                not_needed = f"not needed: {current:,} tokens < the autocompact threshold {threshold:,} (--force or --target-tokens to summarize anyway)"
                stages.append(StageRecord(stage=stage.name, changed=False, note=not_needed))
                continue
            # Claude Code would have compacted on its own: the threshold was reached, nobody forced it.
            auto = not options.force_summary and limits.autocompact is not None and current >= limits.autocompact
            dropped_prefix = bool(getattr(settings, "drop_history", False))
            if dropped_prefix:  # the lines above the context are not written: measured without them
                # ... but with the baseline the whole file measured, which the summary then records on
                # its boundary (the output keeps it without the history it was measured on).
                measured = initial.count.baseline
                with_baseline = replace(counting, baseline=measured.tokens) if measured is not None and measured.source != "default" else counting
                measure = RegionMeasure(b"", 0, source, with_baseline)
            context = replace(context, measure=measure, threshold=threshold, trigger="auto" if auto else "manual")
            why = "; ".join(reasons)
        if stage.runs == "after a summary":
            # restore looks at the history above the boundary: the untouched head, read in place.
            context = replace(context, history=_history(stage, buffer, offset, source, options.on_error, stats))
        outcome = stage.run(entries, transcript_format, settings, context)
        if stage.runs == "over threshold":
            summarized = outcome.changed
        record(stage.name, outcome, measure, why)
        if outcome.changed:
            entries = outcome.entries
            removed.extend(outcome.removed)
    kept = None
    lines: list[bytes] = []
    untouched = entries is original and not stats.skipped
    head = len(buffer) if untouched else 0 if summarized and dropped_prefix else offset
    if untouched:
        pass  # the output is the input
    elif ledger and entries is not original:
        # A dropped history is not in the output: the record keeps it, as the region's own bytes.
        with view(buffer, 0, head) as prefix, view(buffer, head) as region:
            kept, lines = ledger_record("compact", prefix, original if head else (), entries, removed, region)
    else:
        lines = line_bytes(entries)
    # Measured on the bytes written, the way `count` will measure them: the input's own count when
    # they are the input, else the count a stage made of these very entries when there was one.
    written = initial if untouched else (at_offset if head == offset else measure).written(entries, lines)
    report = CompactReport(
        file=source,
        format=transcript_format.name,
        tokens_before=before,
        tokens_after=written.count.tokens,
        changed=entries is not original,
        skipped_lines=stats.skipped,
        stages=stages,
    )
    return CompactRun(head, lines, report, kept)
