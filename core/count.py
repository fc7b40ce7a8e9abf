"""The active context's size, the way Claude Code measures it, with the exact and estimated parts apart.

Claude Code (utils/tokens.ts, tokenCountWithEstimation) takes the last real API response, adds its
recorded usage (input + cache_creation + cache_read + output: exactly the prompt it was sent with,
plus what it wrote), and estimates only what came after it. ctxpipe does the same, then corrects
the estimated part with a fit on the transcript's own history: every earlier pair of
responses tells how many tokens the content between them really cost.

Which usage anchors, as Claude Code 2.1.332 finds it: the last response with a real usage (not a
synthetic error line, not a tail kept through a compaction, not a usage whose figures are all 0),
its figures taken from the last `usage.iterations` entry that is not a compaction or advisor pass
when the usage lists iterations. A format leaves out the usage of records it says were not metered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .blocks import content_of, is_tool_result
from .fields import count
from .model import Message
from .placeholders import REPLACED_PREFIXES
from .tokens import TextCounter, estimate_blocks, estimate_each, estimate_with_flats

if TYPE_CHECKING:  # the report types load when a report is made: the status line counts without them
    from . import reports

SYNTHETIC_MODEL = "<synthetic>"
# usage.iterations entries whose figures are not the context's (Claude Code 2.1.332 passes over them).
SIDE_ITERATIONS = ("compaction", "advisor_message")
CALIBRATION_WINDOW = 10  # the most recent response pairs used for the fit (bench/accuracy.py: 30 gains little)
MIN_PAIRS = 3
MIN_SLOPE_GAP = 20  # gaps this small say nothing about the slope, only about fixed overhead
# The slopes a transcript's own fit may have. Whole-transcript fits over shared/corpus span
# 0.62–1.24 (bench/accuracy.py prints them); a rolling 10-pair window strays to 2.3 where hook
# output the file does not hold inflates a few gaps, and to 0.5 on a history whose tool results
# were cleared. Outside these bounds the corpus fit is used instead, and the count says so.
SLOPE_BOUNDS = (0.6, 1.6)
# Fitted over every response pair in shared/corpus (bench/accuracy.py prints the fit): used when a
# transcript has fewer than MIN_PAIRS pairs of its own. (slope, overhead) per base estimator.
DEFAULT_FITS: dict[str, tuple[float, float]] = {
    "pieces": (1.216, 61.9),
    "rough": (1.387, 48.7),
    "tiktoken:cl100k_base": (1.159, 72.7),
    "tiktoken:o200k_base": (1.156, 72.3),
}


@dataclass(frozen=True)
class Calibration:
    """recorded ≈ slope × estimate + overhead, for the content added between two API calls.

    The overhead stands for what the API saw but the transcript does not hold: injected
    reminders, per-block framing, tool definitions for deferred tools.
    """

    slope: float
    overhead: float
    source: reports.CalibrationSource
    pairs: int = 0
    note: str = ""  # why the transcript's own fit was not used, when it was rejected

    def apply(self, estimate: int) -> int:
        return round(self.slope * estimate + self.overhead) if estimate > 0 else 0

    def report(self) -> reports.CalibrationReport:
        from .reports import CalibrationReport

        return CalibrationReport(slope=round(self.slope, 4), overhead=round(self.overhead, 1), source=self.source, pairs=self.pairs, note=self.note or None)


UNCALIBRATED = Calibration(1.0, 0.0, "none")


def corpus_fit(counter_name: str) -> tuple[float, float]:
    """(slope, overhead) fitted over the corpus for this base estimator; (1, 0) for one not fitted."""
    return DEFAULT_FITS.get(counter_name, (1.0, 0.0))


def fitted_or_corpus(calibration: Calibration, counter_name: str) -> Calibration:
    """The calibration when one was fitted, else the corpus fit: for pricing content the count did not need a fit for."""
    return calibration if calibration is not UNCALIBRATED else Calibration(*corpus_fit(counter_name), "default")


def priced_blocks(blocks: Sequence[dict[str, Any]], counter: TextCounter, calibration: Calibration) -> list[int]:
    """Calibrated tokens of each block, as the stages price what they remove and the views what fills
    the window: the slope scales text; an image or document keeps its flat price."""
    totals, flats = estimate_with_flats(list(blocks), counter)
    return [round(calibration.slope * (tokens - flat)) + flat for tokens, flat in zip(totals, flats)]


@dataclass(frozen=True)
class Marker:
    """A record that content the last usage covered has since been removed (a stage's marker,
    Claude Code 2.1.332's thinking_stripped), or that the next request carries content no message
    holds (2.1.332's message_pdf_reads: `tokens_added`)."""

    position: int  # index into the transcript's entries
    line: int | None  # None where the reader did not number lines
    kind: str
    tokens_saved: int
    tokens_added: int = 0


@dataclass(frozen=True)
class Compaction:
    """The compaction an active context starts from: where, and what its writer re-injected."""

    position: int  # index into the transcript's entries
    line: int | None
    restores: str  # what the writer re-injected without recording it: "files, plan and skills" | "plan" | "nothing"
    kept_until: int | None = None  # where the tail a ctxpipe summary kept ends (its record's position), when the format records it


@dataclass(frozen=True)
class Adjustment:
    kind: str
    tokens: int
    line: int | None
    note: str

    def report(self) -> reports.Adjustment:
        from .reports import Adjustment

        return Adjustment(kind=self.kind, tokens=self.tokens, line=self.line, note=self.note)


@dataclass(frozen=True)
class Baseline:
    """The fixed part of every request that the transcript does not hold as messages: the system
    prompt, the tool definitions and the context injected into the first turn (CLAUDE.md, hook
    output). Recorded usage holds it; an estimate of the messages alone does not."""

    tokens: int
    source: reports.BaselineSource
    note: str

    def report(self) -> reports.BaselineReport:
        from .reports import BaselineReport

        return BaselineReport(tokens=self.tokens, source=self.source, note=self.note)


@dataclass(frozen=True)
class Reinjection:
    """What Claude Code adds to the first request after its own compaction without writing it to
    the file: recently read files, the plan, invoked skills (within its restore budgets)."""

    tokens: int
    items: tuple[reports.ReinjectedItem, ...]
    assumed: str

    def report(self) -> reports.ReinjectedReport:
        from .reports import ReinjectedReport

        return ReinjectedReport(tokens=self.tokens, items=list(self.items), assumed=self.assumed)


@dataclass
class ContextCount:
    """tokens = exact_tokens + estimated_tokens + baseline_added + reinjected_tokens."""

    tokens: int
    exact_tokens: int
    estimated_tokens: int
    messages: int | None  # None when only the end of the context was read
    estimated_messages: int
    model: str | None
    anchor: int | None  # index of the anchoring message
    counter: str
    calibration: Calibration
    adjustments: list[Adjustment] = field(default_factory=list)
    raw_estimate: int = 0  # the estimator's figure before calibration
    baseline: Baseline | None = None
    baseline_added: int = 0  # the baseline when no recorded usage anchors the count, else 0
    reinjection: Reinjection | None = None

    @property
    def reinjected_tokens(self) -> int:
        return self.reinjection.tokens if self.reinjection else 0


def usage_tokens(usage: dict[str, Any], key: str) -> int:
    """One usage figure; a transcript is untrusted, so anything but a non-negative count reads as 0."""
    return count(usage, key)


def usage_prompt(usage: dict[str, Any]) -> int:
    """The size of the prompt a response was sent with."""
    return count(usage, "input_tokens") + count(usage, "cache_creation_input_tokens") + count(usage, "cache_read_input_tokens")


def usage_total(usage: dict[str, Any]) -> int:
    return usage_prompt(usage) + count(usage, "output_tokens")


def context_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """The usage that measures the context a response was sent with (Claude Code 2.1.332, `C7`): when
    `usage.iterations` holds entries, the last one that is not the server's compaction pass or an
    advisor's side call; else the usage itself. The top-level figures then add up every iteration
    (what was billed), not the prompt the response ended on."""
    iterations = usage.get("iterations")
    if isinstance(iterations, list):
        for item in reversed(iterations):
            if isinstance(item, dict) and item.get("type") not in SIDE_ITERATIONS:
                return item
    return usage


def measures_context(usage: Any) -> bool:
    """Whether a recorded usage can anchor a count: an object whose context figures are not all 0
    (Claude Code 2.1.332 skips a zero-total usage when it looks for the last one)."""
    return isinstance(usage, dict) and usage_total(context_usage(usage)) > 0


def is_real_response(message: Message) -> bool:
    return message.role == "assistant" and message.usage is not None and message.model != SYNTHETIC_MODEL


def is_measured_response(message: Message) -> bool:
    """A real response whose usage measures its context (not all zeros)."""
    return is_real_response(message) and measures_context(message.usage)


def is_anchor(message: Message) -> bool:
    """A response whose usage still describes the context (not one kept through a compaction)."""
    return is_measured_response(message) and not message.usage_stale


def response_indices(messages: Sequence[Message]) -> list[int]:
    """The responses whose usage measures their prompt: the ends of the calibration's gaps."""
    return [index for index, message in enumerate(messages) if is_measured_response(message)]


class Estimates:
    """Per-message token estimates, computed on first use and kept (counts reuse them a lot)."""

    def __init__(self, messages: Sequence[Message], counter: TextCounter, cache: dict[int, int] | None = None) -> None:
        self.messages = messages
        self.counter = counter
        self._cache: dict[int, int] = {} if cache is None else cache

    def of(self, index: int) -> int:
        if index not in self._cache:
            self._cache[index] = estimate_blocks(self.messages[index].content, self.counter)
        return self._cache[index]

    def between(self, start: int, stop: int) -> int:
        self.prefetch(range(start, stop))
        return sum(self._cache[index] for index in range(start, stop))

    def prefetch(self, indices: Iterable[int]) -> None:
        """Estimate the given messages in one batch (a real tokenizer is much faster that way)."""
        missing = [index for index in indices if index not in self._cache]
        if not missing:
            return
        blocks = [block for index in missing for block in self.messages[index].content]
        per_block = iter(estimate_each(blocks, self.counter))
        for index in missing:
            self._cache[index] = sum(next(per_block) for _ in self.messages[index].content)


def output_shortfall(estimates: Estimates, index: int) -> int:
    """How much of a response's own content its recorded output_tokens leave out.

    Claude Code often writes the usage it saw when the response started streaming (output_tokens
    of 1 to 30) on every line of the response; the next prompt still holds the whole response.
    """
    usage = context_usage(estimates.messages[index].usage or {})
    return max(0, estimates.of(index) - usage_tokens(usage, "output_tokens"))


def calibration_pairs(estimates: Estimates, window: int = CALIBRATION_WINDOW) -> list[tuple[int, int]]:
    """(estimated, recorded) tokens added between consecutive responses, newest last."""
    messages = estimates.messages
    anchors = response_indices(messages)
    pairs: list[tuple[int, int]] = []
    recent = list(zip(anchors, anchors[1:]))[-window:]
    if recent:
        estimates.prefetch(range(recent[0][0], recent[-1][1]))
    for before, after in recent:
        if any(m.compact_summary for m in messages[before + 1 : after]):
            continue  # a summary replaced the history in between: the usages are not comparable
        if any(_replaced(m) for m in messages[before + 1 : after]):
            continue  # cleared or folded since: the recorded gap held content the file no longer does
        estimated = estimates.between(before + 1, after) + output_shortfall(estimates, before)
        recorded = usage_prompt(context_usage(messages[after].usage or {})) - usage_total(context_usage(messages[before].usage or {}))
        if recorded > 0:
            pairs.append((estimated, recorded))
    return pairs


def _replaced(message: Message) -> bool:
    """Whether a tool result in it was cleared or folded since (by a stage, or by Claude Code's own
    microcompact): the gap it sits in was recorded with content the file no longer holds."""
    for block in message.content:
        if is_tool_result(block):
            content = content_of(block)
            if isinstance(content, str) and content.startswith(REPLACED_PREFIXES):
                return True
    return False


def fit(pairs: Sequence[tuple[int, int]]) -> tuple[float, float] | None:
    """Theil–Sen slope (robust to the odd gap with a big injected reminder) and median intercept."""
    sized = [(x, y) for x, y in pairs if x >= MIN_SLOPE_GAP]
    slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(sized) for x2, y2 in sized[i + 1 :] if x2 != x1]
    if len(pairs) < MIN_PAIRS or not slopes:
        return None
    slope = median(slopes)
    overhead = max(0.0, median([y - slope * x for x, y in pairs]))
    return slope, overhead


def median(values: Sequence[float]) -> float:
    """statistics.median's figure, computed as it does (the mean of the middle two of an even count):
    importing statistics costs more than 3 ms of a small command's start (fractions, decimal, random)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def calibrate(estimates: Estimates, default: tuple[float, float] | None = None) -> Calibration:
    """The fit that turns the estimator's figures into what this transcript's API really charged.

    A fit whose slope lies outside SLOPE_BOUNDS is rejected for the corpus fit, with a note.
    """
    pairs = calibration_pairs(estimates)
    fitted = fit(pairs)
    slope, overhead = default or corpus_fit(estimates.counter.name)
    if fitted is None:
        return Calibration(slope, overhead, "default", len(pairs))
    low, high = SLOPE_BOUNDS
    if not low <= fitted[0] <= high:
        note = (
            f"the transcript's own fit (slope {fitted[0]:.2f} over {len(pairs)} response pairs) lies outside "
            f"{low}–{high}, the range the corpus supports; the corpus fit is used"
        )
        return Calibration(slope, overhead, "default", len(pairs), note)
    return Calibration(fitted[0], fitted[1], "transcript", len(pairs))


def anchor_index(messages: Sequence[Message]) -> int | None:
    """The last response whose usage still describes the context, if any."""
    return next((index for index in range(len(messages) - 1, -1, -1) if is_anchor(messages[index])), None)


def _added(markers: Sequence[Marker], start: int) -> tuple[int, list[Adjustment]]:
    """What the markers at or after entry `start` add to the next request (estimated content no
    message holds), and the adjustment each makes."""
    if start < 0:
        return 0, []
    adjustments = [
        Adjustment(marker.kind, marker.tokens_added, marker.line, f"{marker.kind}: content the next request carries that no message holds")
        for marker in markers
        if marker.position >= start and marker.tokens_added > 0
    ]
    return sum(adjustment.tokens for adjustment in adjustments), adjustments


def count_context(
    estimates: Estimates,
    calibration: Calibration | None = None,
    markers: Sequence[Marker] = (),
    as_claude_code: bool = False,
    baseline: Baseline | None = None,
    reinjection: Reinjection | None = None,
) -> ContextCount:
    """Last recorded usage plus the (calibrated) estimate of everything after it.

    The accounting rule, defined here once:
    - With an anchor (the last response whose usage still describes the context): its usage, plus
      the estimate of what follows it, minus every stage marker written after it (each says how
      much of what that usage counted a stage has since removed). Markers before the anchor are
      already in its usage; markers behind a newer compact boundary are outside the context.
    - Without one (no usage, or none since the last compaction, or only a tail a summary kept with
      usage measured on the old prompt): the session baseline plus the estimate of every message,
      plus what Claude Code re-injects after its own compaction when that is given. Markers do
      not apply: the estimate already sees the content as it now is.

    as_claude_code reproduces Claude Code's own figure: no calibration, no baseline, and the later
    blocks of the anchoring response are estimated again although its output_tokens cover them.
    """
    messages, counter = estimates.messages, estimates.counter
    calibration = calibration or UNCALIBRATED
    anchor = anchor_index(messages)
    model = next((m.model for m in reversed(messages) if m.role == "assistant" and m.model and m.model != SYNTHETIC_MODEL), None)
    if anchor is None:
        raw = estimates.between(0, len(messages))
        estimated = calibration.apply(raw)
        start = next((m.entries[0] for m in messages if m.entries), None)
        added, additions = _added(markers, start if start is not None else -1)
        estimated += added
        # An empty context is no request at all: nothing to add the fixed part to.
        fixed = baseline.tokens if baseline is not None and messages and not as_claude_code else 0
        extra = reinjection if not as_claude_code else None
        total = estimated + fixed + (extra.tokens if extra else 0)
        return ContextCount(total, 0, estimated, len(messages), len(messages), model, None, counter.name, calibration, additions, raw, baseline, fixed, extra)
    anchor_message = messages[anchor]
    exact = usage_total(context_usage(anchor_message.usage or {}))
    tail = list(messages[anchor + 1 :])
    raw = estimates.between(anchor + 1, len(messages))
    if as_claude_code:
        if len(anchor_message.content) > 1:
            raw += estimate_blocks(anchor_message.content[1:], counter)
    else:
        raw += output_shortfall(estimates, anchor)
    if not tail and not as_claude_code:
        # Nothing after the last response: no new turn, so no injected overhead and nothing to fit;
        # only the part of the response its stale output_tokens left out, in the estimator's units.
        estimated = round(corpus_fit(counter.name)[0] * raw) if raw > 0 else 0
    else:
        estimated = calibration.apply(raw)
    adjustments: list[Adjustment] = []
    anchor_position = anchor_message.entries[0] if anchor_message.entries else -1
    for marker in markers:
        if marker.position <= anchor_position or marker.tokens_saved <= 0:
            continue
        saved = min(marker.tokens_saved, exact)
        exact -= saved
        adjustments.append(Adjustment(marker.kind, -saved, marker.line, f"{marker.kind} after the last response removed content its usage still counted"))
    added, more = _added(markers, anchor_position + 1)
    estimated += added
    adjustments += more
    return ContextCount(exact + estimated, exact, estimated, len(messages), len(tail), model, anchor, counter.name, calibration, adjustments, raw, baseline)
