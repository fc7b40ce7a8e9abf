"""Summarizing one transcript: split, pick the engine, verify, write back. The I/O around core.summarize."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..core.blocks import is_text, is_tool_use
from ..core.count import Compaction
from ..core.errors import CtxpipeError, InputError, SettingsError
from ..core.fields import iso, moment, rounded_percent
from ..core.jsonl import Entry
from ..core.limits import MAX_COUNT
from ..core.model import Message
from ..core.placeholders import RESTORED_PREFIX, SUMMARY_PREAMBLE
from ..core.rules import CURRENT, Rules, session_rules
from ..core.stage import Outcome, StageContext
from ..core.summarize import (
    ENGINES,
    SummarizeSettings,
    context_text,
    facts_to_keep,
    first_position,
    key_facts,
    offline_summary,
    summary_message_text,
    tail_start,
    verify,
)
from ..core.summarize_engines import (
    Breaker,
    LlmResult,
    SummaryFailed,
    history_end,
    is_session_id,
    notes_cover,
    notes_summary,
    transcript_model,
    usable_notes,
)
from ..core.transcript_format import SUMMARY_MARKER, TranscriptFormat, WritableFormat
from ..files import storage
from ..files.inputs import read_side_file
from .breaker import breaker as process_breaker
from .count import CountOptions, RegionMeasure

if TYPE_CHECKING:  # types only: the report types and the fact readers load when a summary is written
    from ..core.facts import Facts
    from ..core.reports import Engine, VerificationReport

__all__ = ["ENGINES", "run", "summarize_entries"]

# What summarize_entries reads of the run's StageContext: `now`, `transcript_path` (where the notes
# are looked for, and named in the summary), `api_key` and `base_url` (the model's), `trigger`,
# `measure` (tokens of a candidate output as `count` finds them; default: the region alone),
# `original` (the entries as they were before earlier stages cleared tool results, same positions:
# the summary and its verifier read these, so clearing a result never costs the summary a fact),
# `threshold` (the autocompact threshold: a session-memory result still at or above it is said so
# and, under auto, replaced by the next engine's, as Claude Code falls back to a full compact) and
# `rules` (--rules over the session's version: which Claude Code's summary to write).


@dataclass(frozen=True)
class Fallback:
    """Set when an engine's summary was not taken and another engine stands in."""

    engine: Engine  # the one that stands in (the settings' engine too)
    because: str  # why it was chosen
    failed: str | None = None  # why the summary before was refused (the report's fallback_reason)


def _stamp(entries: Sequence[Entry], tail_positions: Sequence[int], now: datetime) -> str:
    """The time written on the boundary, the summary and the marker: just before the kept tail.

    Claude Code 2.1.88 resumes from the newest leaf by timestamp; records stamped later than the
    tail they precede make it pick the boundary instead and lose the whole compacted context.
    """
    first = next((stamp for stamp in (moment(entries[p].obj.get("timestamp")) for p in tail_positions) if stamp is not None), None)
    if first is not None and first > datetime.min.replace(tzinfo=timezone.utc) + timedelta(milliseconds=1):
        return iso(first - timedelta(milliseconds=1))
    return iso(now)


def _session_id(entries: Sequence[Entry]) -> str | None:
    """The transcript's latest session id that is a UUID (a path is built from it: nothing else will do)."""
    return next((e.obj["sessionId"] for e in reversed(entries) if is_session_id(e.obj.get("sessionId"))), None)


def _restored(message: Message) -> bool:
    """An item `restore` brought back after a summary (a file, the plan, a skill, the todo list)."""
    first = message.content[0] if message.content else {}
    return message.role == "user" and is_text(first) and str(first.get("text", "")).startswith(RESTORED_PREFIX)


def nothing_new(messages: Sequence[Message], opening: Compaction | None) -> bool:
    """Whether the context holds nothing since ctxpipe's last summary but the tail it kept and what
    restore brought back: summarizing it again would only fold what is folded already, and a
    compact of compact's own output must write it back unchanged."""
    if not messages or not messages[0].compact_summary or opening is None or opening.restores != "nothing":
        return False
    if opening.kept_until is not None:
        return all(_restored(m) for m in messages if m.entries and m.entries[0] > opening.kept_until)
    # Where the kept tail ends is not recorded (a Messages-API file): restore appends its items
    # right after it, and anything said since comes after them.
    return _restored(messages[-1])


def _absolute(path: str) -> str:
    """How the summary names the transcript: a URL as given, a local path (file:// too) absolute."""
    return path if storage.is_remote(path) else os.path.abspath(storage.local_path(path))


def not_a_summary(engine: str, pre: int, post: int) -> str | None:
    """The one acceptance rule, for every engine: a summary must leave the context smaller than it
    found it (`count` before and after, as written). Why this one is refused, or None."""
    if post < pre:
        return None
    return f"the {engine} summary would leave {post:,} tokens, no fewer than the {pre:,} before it: a summary that does not shrink the context is not one"


# Why the offline engine ran once the run's breaker opened (a batch counts the files it says this of).
NOT_ASKED_AGAIN = "summaries in a row failed in this run: the model is not asked again"


def find_session_memory(transcript: Path, session_id: str | None) -> Path | None:
    """<project dir>/<session id>/session-memory/summary.md beside the transcript.

    The id comes from the transcript, which is untrusted: anything but a UUID ("../x", "/tmp/y")
    is ignored rather than joined into a path. The file's own name is the user's choice.
    """
    names = [n for n in (session_id if is_session_id(session_id) else None, transcript.stem) if n and n not in (".", "..")]
    for name in names:
        candidate = transcript.parent / name / "session-memory" / "summary.md"
        if candidate.is_file():
            return candidate
    return None


def choose_engine(
    settings: SummarizeSettings,
    context: StageContext,
    entries: Sequence[Entry],
    breaker: Breaker,
    history: Sequence[Message] = (),
    rules: Rules = CURRENT,
    fallback: Fallback | None = None,
) -> tuple[Engine, str | None, str]:
    """(engine, notes path, why) — auto: the notes if found and they cover `history` (the part the
    summary replaces), else the model if a key is set, else offline. Notes asked for that do not
    cover it are an error: the end of the history would be lost without a word."""
    if fallback is not None:  # a fallback already chose the engine
        return fallback.engine, None, fallback.because
    notes = settings.session_memory
    transcript_path = context.transcript_path
    # Notes are looked for beside a local transcript only (Path() of a URL would name a local path).
    if notes is None and transcript_path and transcript_path != "-" and not storage.is_remote(transcript_path):
        found = find_session_memory(Path(storage.local_path(transcript_path)), _session_id(entries))
        notes = str(found) if found else None
    if settings.engine == "session-memory":
        if notes is None:
            raise CtxpipeError("--engine session-memory: no notes file found (give --session-memory FILE)")
        covered, how = notes_cover(_notes_written(notes), history_end(entries, history))
        if not covered:
            raise CtxpipeError(f"{notes}: the session notes do not cover the history they would replace: {how} (use --engine auto or offline)")
        return "session-memory", notes, f"asked for; {how}"
    if settings.engine == "llm" and breaker.open:
        return "offline", None, f"{breaker.limit} {NOT_ASKED_AGAIN}"
    if settings.engine == "llm":
        return "llm", None, "asked for"
    if settings.engine == "offline":
        return "offline", None, "asked for"
    if notes is not None and not rules.session_memory_compaction:
        engine, why = next_engine(context.api_key, breaker)
        return (
            engine,
            None,
            f"session notes found at {notes}, but Claude Code {rules.release} has no session-memory compaction (--engine session-memory uses them); {why}",
        )
    if notes is not None and usable_notes(read_notes(notes)):
        covered, how = notes_cover(_notes_written(notes), history_end(entries, history))
        if covered:
            return "session-memory", notes, f"found the session notes at {notes}, {how}"
        engine, why = next_engine(context.api_key, breaker)
        return engine, None, f"the session notes at {notes} do not cover the history: {how}; {why}"
    if not context.api_key:
        return "offline", None, "no session notes and no ANTHROPIC_API_KEY"
    engine, why = next_engine(context.api_key, breaker)
    return engine, None, why


def next_engine(api_key: str | None, breaker: Breaker) -> tuple[Engine, str]:
    """The engine after the notes, and why: the model if a key is set, else offline."""
    if api_key:
        if breaker.open:
            return "offline", f"{breaker.limit} {NOT_ASKED_AGAIN}"
        return "llm", "ANTHROPIC_API_KEY is set"
    return "offline", "no ANTHROPIC_API_KEY"


def read_notes(path: str) -> str:
    """A session-memory notes file's text, read with the bound of every file an option names."""
    return read_side_file(path, "a notes file").decode("utf-8", errors="replace")


def _notes_written(path: str) -> datetime:
    """When the notes file was last written."""
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime, timezone.utc)
    except (OSError, OverflowError, ValueError) as exc:
        raise InputError(path, None, f"cannot read the session notes: {getattr(exc, 'strerror', None) or exc}") from None


def tools_used_in(history: Sequence[Message]) -> list[str]:
    """The tools the summarized history called, in the order first used (2.1.332's <tools-used-before-summary>)."""
    names = (block.get("name") for message in history for block in message.content if is_tool_use(block))
    return list(dict.fromkeys(name for name in names if isinstance(name, str) and name))


def dropped_before(entries: Sequence[Entry], transcript_format: TranscriptFormat) -> int:
    """What earlier compactions of the file dropped (2.1.332's cumulativeDroppedTokens): the newest
    boundary's running total, else the sum of preTokens − postTokens over the boundaries."""

    def figure(value: Any) -> int | None:  # a whole number of tokens, else None (absent or odd)
        return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNT else None

    total = 0
    for entry in entries:
        metadata = transcript_format.boundary_metadata(entry.obj) if isinstance(entry.obj, dict) else None
        if not isinstance(metadata, dict):
            continue
        running, pre, post = (figure(metadata.get(key)) for key in ("cumulativeDroppedTokens", "preTokens", "postTokens"))
        if running is not None:
            total = running
        elif pre is not None and post is not None:
            total += max(0, pre - post)
    return total


def as_first_written(
    entries: Sequence[Entry], transcript_format: TranscriptFormat, original: Sequence[Entry] | None, history: list[Message], tail: list[Message]
) -> tuple[list[Message], list[Message]]:
    """History and tail as they read before earlier stages cleared or folded tool results.

    Those stages rewrite lines in place and append their markers, so a position means the same
    line in both; anything else (a different file) is read as it is now.
    """
    if original is None or len(original) > len(entries) or original is entries:
        return history, tail
    messages: list[Message] = transcript_format.messages(list(original) + list(entries[len(original) :]))
    cut = first_position(tail)
    cut = len(entries) if cut is None else cut
    return [m for m in messages if m.entries and m.entries[0] < cut], [m for m in messages if m.entries and m.entries[0] >= cut]


def summarize_entries(
    entries: list[Entry],
    transcript_format: WritableFormat,
    settings: SummarizeSettings,
    context: StageContext,
    breaker: Breaker,
    progress: Callable[[str], None] | None = None,
    fallback: Fallback | None = None,
) -> Outcome:
    if settings.drop_history and transcript_format.state_lines:
        # Codex resumes a rollout only with its session_meta (and the turn_context) above the compaction.
        raise SettingsError(
            "--drop-history",
            f"not for a {transcript_format.name} file: the lines of its session's state ({', '.join(transcript_format.state_lines)}) must stay above the summary",
        )
    messages: list[Message] = transcript_format.messages(entries)
    if nothing_new(messages, transcript_format.opening(entries)):
        return Outcome(entries, False, "nothing to summarize: nothing new since the last summary (only the tail it kept and what restore brought back)")
    start = tail_start(messages, settings)
    history, tail = messages[:start], messages[start:]
    if not [m for m in history if not m.compact_summary]:
        return Outcome(entries, False, "nothing to summarize: the whole active context fits in the tail")
    rules, _ = session_rules(entries, context.rules)
    engine, notes, why = choose_engine(settings, context, entries, breaker, history, rules, fallback)
    history_read, tail_read = as_first_written(entries, transcript_format, context.original, history, tail)
    side_inputs = transcript_format.typed_elsewhere(entries)

    @functools.cache
    def whole() -> Facts:
        """The whole context's facts, read once for the offline summary and the verifier."""
        from ..core.facts import gather  # here: a run with nothing to summarize does not read facts

        return gather(history_read + tail_read, side_inputs)

    fell_back = fallback.failed if fallback is not None else None
    fallback_reason = fell_back or None  # why an engine's summary was not taken (the model's, when it fails here)
    answered: LlmResult | None = None  # the model's summary, when it is the one written
    deadline = None  # the model's: one limit for the summary and its repair request
    # No --model: the transcript's. The endpoint: --base-url, else ANTHROPIC_BASE_URL (checked here, whatever the engine).
    model, endpoint = settings.model or transcript_model(messages), settings.endpoint(context.base_url, context.api_key)
    if engine == "session-memory" and notes is not None:  # choose_engine names the notes it chose
        raw_notes = read_notes(notes)
        if not usable_notes(raw_notes):
            raise CtxpipeError(f"{notes}: the session notes are empty or still the template")
        summary = notes_summary(raw_notes, notes)
    elif engine == "llm":
        from .llm import ModelAccess, llm_summary  # the model's client: loaded when the model is asked

        try:
            answered = llm_summary(history_read, settings, ModelAccess(model, context.api_key, endpoint), progress)
            deadline = answered.deadline
            breaker.record(True)
            summary = answered.text
        except SummaryFailed as exc:
            breaker.record(False)
            fallback_reason = fell_back = str(exc)
            engine = "offline"
            summary = offline_summary(history_read, side_inputs, tail_read, whole())
            why = f"llm engine: {why}"  # why the model was asked; the note says why it is not its summary
    else:
        summary = offline_summary(history_read, side_inputs, tail_read, whole())
    earlier_summaries = ["\n".join(str(b.get("text", "")) for b in m.content if is_text(b)) for m in history if m.compact_summary]

    def carry_earlier(summary: str) -> str:
        """Never summarize an earlier summary into nothing: whatever the engine (or its repair) wrote, it stays."""
        for text_before in earlier_summaries:
            if text_before and text_before not in summary:
                summary += "\n\nEarlier summary (carried over from a previous compaction):\n" + text_before
        return summary

    summary = carry_earlier(summary)
    before_repair: VerificationReport | None = None
    verification: VerificationReport | None = None
    repaired: Literal[True] | None = None
    repair_error: str | None = None
    kept_facts: int | None = None
    if settings.verify:
        facts = key_facts(history_read, tail_read, side_inputs, whole())
        checked = verify(facts, summary + "\n" + context_text(tail))
        before_repair = checked.report()
        if checked.missing and engine == "llm":
            from .llm import ModelAccess, repair_summary

            try:
                access = ModelAccess(model, context.api_key, endpoint)
                rewritten = carry_earlier(repair_summary(summary, [f.text for f in checked.missing], settings, access, deadline=deadline))
                rechecked = verify(facts, rewritten + "\n" + context_text(tail))
                if len(rechecked.missing) >= len(checked.missing):
                    # No better than what it rewrote: the model's first summary stays.
                    raise SummaryFailed(f"the rewritten summary carried no more of the facts ({len(rechecked.missing)} still missing): the first one is kept")
                summary, checked, repaired = rewritten, rechecked, True
            except SummaryFailed as exc:
                repair_error = str(exc)
        if checked.missing:
            kept_facts = len(checked.missing)
            summary = summary + "\n\n" + facts_to_keep(checked.missing)
            checked = verify(facts, summary + "\n" + context_text(tail))
        verification = checked.report()
    # Named absolute: the summary is read from wherever the session is resumed, not where ctxpipe ran
    # (an object in a store by its URL: it is absolute already).
    named = None if context.transcript_path in (None, "-") else _absolute(context.transcript_path)
    preamble = transcript_format.summary_preamble
    # The tools-used reminder is Claude Code's: another agent's summary opens with its own words only.
    tools_used = tools_used_in(history) if rules.summary_lists_tools and preamble == SUMMARY_PREAMBLE else ()
    text = summary_message_text(summary, named, bool(tail), automatic=context.trigger == "auto", tools_used=tools_used, preamble=preamble)
    measure = context.measure or RegionMeasure(b"", 0, "-", CountOptions(format=transcript_format.name))
    before = measure(entries).count
    pre = before.tokens
    first_tail_entry = first_position(tail)
    tail_positions = [] if first_tail_entry is None else [p for p in transcript_format.context_positions(entries) if p >= first_tail_entry]
    when = _stamp(entries, tail_positions, context.now)

    def write_back(metadata: dict[str, Any]) -> list[Entry]:
        added = transcript_format.compacted(entries, tail_positions, text, metadata, when)
        result = list(entries) + added if transcript_format.keeps_history and not settings.drop_history else added
        if tail:
            # The kept tail still carries usage measured on the old prompt; a reader of the file's
            # end meets this record before it, and so knows no response above it anchors a count.
            marker = transcript_format.marker(
                result, SUMMARY_MARKER, "Context summarized", "ctxpipeMetadata", {"stage": "summarize", "keptMessages": len(tail)}, when
            )
            if marker is not None:
                result.append(marker)
        return result

    # The baseline goes with the summary: a file written without its history (--drop-history) keeps it.
    fixed = {"baseline": before.baseline.tokens} if before.baseline and before.baseline.source != "default" else {}
    metadata: dict[str, Any] = {"trigger": context.trigger, "preTokens": pre, "ctxpipe": {"engine": engine, **fixed}}
    # postTokens is measured on the lines as written (the boundary's own metadata is not counted).
    post = measure(write_back(metadata)).count.tokens
    totals = {"cumulativeDroppedTokens": dropped_before(entries, transcript_format) + pre - post} if rules.compact_metadata_totals else {}
    written = write_back({**metadata, "postTokens": post, **totals})
    over_threshold: Literal[True] | None = None
    if engine == "session-memory" and context.threshold is not None and post >= context.threshold:
        over = f"the session notes leave {post:,} tokens, still ≥ the autocompact threshold {context.threshold:,}"
        if settings.engine == "auto":  # as Claude Code: a full summary instead
            then, because = next_engine(context.api_key, breaker)
            return summarize_entries(
                entries, transcript_format, replace(settings, engine=then), context, breaker, progress, Fallback(then, f"{over}; {because}", fell_back)
            )
        why += f"; {over}"
        over_threshold = True
    refused = not_a_summary(engine, pre, post)
    if refused is not None and engine != "offline":  # the model's or the notes' summary failed: another engine stands in
        then = next_engine(context.api_key, breaker)[0] if engine == "session-memory" else "offline"
        return summarize_entries(
            entries, transcript_format, replace(settings, engine=then), context, breaker, progress, Fallback(then, f"{engine} engine: {why}", refused)
        )
    warnings = []
    if refused is not None:
        if context.trigger == "auto":  # compact's own decision: one that grows the context is not taken
            return Outcome(entries, False, f"not summarized: {refused}")
        warnings.append(f"warning: {refused}; written as asked, though the offline engine has nothing shorter for so short a history")
    note = f"summarized {len(history)} messages with the {engine} engine ({why}); kept {len(tail)}"
    if fell_back:
        note += f"; the model failed ({fell_back}), so the offline engine ran" if why.startswith("llm engine") else f"; {fell_back}, so the {engine} engine ran"
    if before_repair is not None and verification is not None:  # settings.verify
        # What it counted, never more: the facts it checks, the share rounded down.
        note += (
            f"; verifier: the summary carried {before_repair.carried} of the {before_repair.facts} facts it checks ({rounded_percent(before_repair.recall)})"
        )
        if before_repair.missing:
            lost = ", ".join(f"{kind} {k.carried}/{k.facts}" for kind, k in before_repair.kinds.items() if k.carried < k.facts)
            mended = ["repaired by the model"] * bool(repaired)
            if kept_facts:
                mended.append(f"{kept_facts} added as Facts to keep")
            note += f" (missing {lost}; {', '.join(mended)}); recall now {rounded_percent(verification.recall)}"
    from ..core.reports import LlmUsage, SummarizeExtras

    report = SummarizeExtras(
        stage="summarize",
        engine=engine,
        engine_reason=why,
        history_messages=len(history),
        tail_messages=len(tail),
        fallback_reason=fallback_reason,
        llm_attempts=answered.attempts if answered else None,
        dropped_api_rounds=answered.dropped_groups if answered else None,
        llm_usage=LlmUsage(input_tokens=answered.usage.get("input_tokens"), output_tokens=answered.usage.get("output_tokens")) if answered else None,
        verification_before_repair=before_repair,
        repaired=repaired,
        repair_error=repair_error,
        facts_to_keep=kept_facts,
        verification=verification,
        pre_tokens=pre,
        post_tokens=post,
        reduction=round(1 - post / pre, 4) if pre else 0.0,
        over_threshold=over_threshold,
    )
    return Outcome(written, True, note, report, notes=warnings)


# --- the stage ---------------------------------------------------------------------------------------


def run(entries: list[Entry], transcript_format: WritableFormat, settings: SummarizeSettings, context: StageContext) -> Outcome:
    settings.check_key(context.api_key)
    settings.endpoint(context.base_url, context.api_key)  # a wrong endpoint is an error before anything runs
    return summarize_entries(entries, transcript_format, settings, context, context.breaker or process_breaker(), context.progress)
