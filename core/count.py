"""The active context's size, the way Claude Code measures it, with the exact and estimated parts apart.

Claude Code (utils/tokens.ts, tokenCountWithEstimation) takes the last real API response, adds its
recorded usage (input + cache_creation + cache_read + output: exactly the prompt it was sent with,
plus what it wrote), and estimates only what came after it. ctxpipe does the same, then corrects
the estimated part with a fit on the transcript's own history: every earlier pair of
responses tells how many tokens the content between them really cost.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .model import Message
from .tokens import TextCounter, estimate_blocks, estimate_each

SYNTHETIC_MODEL = "<synthetic>"
CALIBRATION_WINDOW = 10  # the most recent response pairs used for the fit (bench/accuracy.py: 30 gains little)
MIN_PAIRS = 3
MIN_SLOPE_GAP = 20  # gaps this small say nothing about the slope, only about fixed overhead
SLOPE_LIMITS = (0.5, 4.0)
# Fitted over every response pair in shared/corpus (bench/accuracy.py prints the fit): used when a
# transcript has fewer than MIN_PAIRS pairs of its own. (slope, overhead) per base estimator.
DEFAULT_FITS: dict[str, tuple[float, float]] = {
    "pieces": (1.205, 62.1),
    "rough": (1.387, 48.8),
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
    source: str  # "transcript", "default" or "none"
    pairs: int = 0

    def apply(self, estimate: int) -> int:
        return round(self.slope * estimate + self.overhead) if estimate > 0 else 0

    def as_dict(self) -> dict[str, Any]:
        return {"slope": round(self.slope, 4), "overhead": round(self.overhead, 1), "source": self.source, "pairs": self.pairs}


UNCALIBRATED = Calibration(1.0, 0.0, "none")


@dataclass(frozen=True)
class Marker:
    """A stage's record that content the last usage covered has since been removed."""

    position: int  # index into the transcript's entries
    line: int | None  # None where the reader did not number lines
    kind: str
    tokens_saved: int


@dataclass(frozen=True)
class Adjustment:
    kind: str
    tokens: int
    line: int | None
    note: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "tokens": self.tokens, "line": self.line, "note": self.note}


@dataclass
class ContextCount:
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


def usage_prompt(usage: dict[str, Any]) -> int:
    """The size of the prompt a response was sent with."""
    return sum(int(usage.get(key) or 0) for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))


def usage_total(usage: dict[str, Any]) -> int:
    return usage_prompt(usage) + int(usage.get("output_tokens") or 0)


def is_real_response(message: Message) -> bool:
    return message.role == "assistant" and message.usage is not None and message.model != SYNTHETIC_MODEL


def is_anchor(message: Message) -> bool:
    """A response whose usage still describes the context (not one kept through a compaction)."""
    return is_real_response(message) and not message.usage_stale


def response_indices(messages: Sequence[Message]) -> list[int]:
    return [index for index, message in enumerate(messages) if is_real_response(message)]


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
    usage = estimates.messages[index].usage or {}
    return max(0, estimates.of(index) - int(usage.get("output_tokens") or 0))


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
        estimated = estimates.between(before + 1, after) + output_shortfall(estimates, before)
        recorded = usage_prompt(messages[after].usage or {}) - usage_total(messages[before].usage or {})
        if recorded > 0:
            pairs.append((estimated, recorded))
    return pairs


def fit(pairs: Sequence[tuple[int, int]]) -> tuple[float, float] | None:
    """Theil–Sen slope (robust to the odd gap with a big injected reminder) and median intercept."""
    sized = [(x, y) for x, y in pairs if x >= MIN_SLOPE_GAP]
    slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(sized) for x2, y2 in sized[i + 1 :] if x2 != x1]
    if len(pairs) < MIN_PAIRS or not slopes:
        return None
    slope = min(max(statistics.median(slopes), SLOPE_LIMITS[0]), SLOPE_LIMITS[1])
    overhead = max(0.0, statistics.median(y - slope * x for x, y in pairs))
    return slope, overhead


def calibrate(estimates: Estimates, default: tuple[float, float] | None = None) -> Calibration:
    """The fit that turns the estimator's figures into what this transcript's API really charged."""
    pairs = calibration_pairs(estimates)
    fitted = fit(pairs)
    if fitted is None:
        slope, overhead = default or DEFAULT_FITS.get(estimates.counter.name, (1.0, 0.0))
        return Calibration(slope, overhead, "default", len(pairs))
    return Calibration(fitted[0], fitted[1], "transcript", len(pairs))


def count_context(
    estimates: Estimates,
    calibration: Calibration | None = None,
    markers: Sequence[Marker] = (),
    as_claude_code: bool = False,
) -> ContextCount:
    """Last recorded usage plus the (calibrated) estimate of everything after it.

    as_claude_code reproduces Claude Code's own figure: no calibration, and the later blocks of the
    anchoring response are estimated again although its output_tokens already cover them.
    """
    messages, counter = estimates.messages, estimates.counter
    calibration = calibration or UNCALIBRATED
    anchors = [index for index, message in enumerate(messages) if is_anchor(message)]
    model = next((m.model for m in reversed(messages) if m.role == "assistant" and m.model and m.model != SYNTHETIC_MODEL), None)
    if not anchors:
        raw = estimates.between(0, len(messages))
        estimated = calibration.apply(raw)
        return ContextCount(estimated, 0, estimated, len(messages), len(messages), model, None, counter.name, calibration, [], raw)
    anchor = anchors[-1]
    anchor_message = messages[anchor]
    exact = usage_total(anchor_message.usage or {})
    tail = list(messages[anchor + 1 :])
    raw = estimates.between(anchor + 1, len(messages))
    if as_claude_code:
        if len(anchor_message.content) > 1:
            raw += estimate_blocks(anchor_message.content[1:], counter)
    else:
        raw += output_shortfall(estimates, anchor)
    anchor_position = anchor_message.entries[0] if anchor_message.entries else -1
    after_anchor = [m for m in markers if m.position > anchor_position and m.tokens_saved > 0]
    # Behind a summary's marker the exact part already stands for an estimated context, fixed
    # overhead included: adding it again would count it twice.
    summarized = any(m.kind == "ctxpipe_compact" for m in after_anchor)
    if not tail and not as_claude_code:
        # Nothing after the last response: no new turn, so no injected overhead and nothing to fit;
        # only the part of the response its stale output_tokens left out, in the estimator's units.
        estimated = round(DEFAULT_FITS.get(counter.name, (1.0, 0.0))[0] * raw) if raw > 0 else 0
    elif summarized and raw > 0:
        estimated = round(calibration.slope * raw)
    else:
        estimated = calibration.apply(raw)
    adjustments: list[Adjustment] = []
    for marker in after_anchor:
        saved = min(marker.tokens_saved, exact)
        exact -= saved
        adjustments.append(
            Adjustment(marker.kind, -saved, marker.line, f"{marker.kind} after the last response removed content its usage still counted")
        )
    return ContextCount(exact + estimated, exact, estimated, len(messages), len(tail), model, anchor, counter.name, calibration, adjustments, raw)
