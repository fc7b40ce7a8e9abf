"""Counting files: the I/O around core.count, shared by `count`, `warn` and the library.

A file is memory-mapped and, in the default mode, read from its end back to the start of the
active context only; `full` parses every line (for breakdowns, the largest entries, timelines).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.blocks import call_id, is_tool_use, kind_of, name_of
from ..core.budget import ONE_MILLION, BudgetSettings, Thresholds, agent_thresholds, model_window, settings_rules, thresholds
from ..core.count import (
    CALIBRATION_WINDOW,
    UNCALIBRATED,
    Baseline,
    Calibration,
    ContextCount,
    Estimates,
    Marker,
    Reinjection,
    anchor_index,
    calibrate,
    context_usage,
    count_context,
    fitted_or_corpus,
    is_measured_response,
    is_real_response,
    priced_blocks,
    usage_prompt,
    usage_tokens,
)
from ..core.errors import SettingsError
from ..core.fields import count, text
from ..core.jsonl import Entry, LineIndex, OnError, ParsedLines, ReadStats, check_on_error, iter_buffer_entries
from ..core.model import Message, Role
from ..core.rules import VERSION, session_version
from ..core.tokens import TextCounter
from ..core.transcript_format import TranscriptFormat
from ..core.wire import ABSENT, Absent
from ..files.inputs import Spliced, detect_format, mapped, source_name

if TYPE_CHECKING:  # types only (the status line imports this module: price tables, stages and report types load when used)
    from ..core.catalog import Prices
    from ..core.cost import SessionCost
    from ..core.reports import BreakdownRow, CountReport, TimelinePoint, TopLine, WarnReport
    from ..files.sessions import Kind

DEFAULT_TOKENIZER = "calibrated"
SMALL_FILE = 64 << 10  # bytes: read whole even when only the end is needed
CALIBRATED_BASE = "pieces"
HEAD_LINES = 2_000  # how far the baseline looks for the session's first response
# The session baseline where a transcript records no usage: the median over the main sessions in
# shared/corpus of the first response's prompt less the estimate of the messages before it
# (bench/accuracy.py prints each; Claude Code 1.0.24 to 2.1.39).
DEFAULT_BASELINE = 16_200
# The same few models and versions recur across a folder's files: their thresholds (frozen) and
# windows are worked out once.
_thresholds = functools.lru_cache(maxsize=256)(thresholds)


@functools.lru_cache(maxsize=256)
def _model_window(model: str | None, budget: BudgetSettings, version: str | None) -> tuple[int, str]:
    return model_window(model, budget, settings_rules(budget, version)[0])


@dataclass(frozen=True)
class CountOptions:
    tokenizer: str = DEFAULT_TOKENIZER
    calibrate: bool | None = None  # None: only the "calibrated" tokenizer calibrates
    as_claude_code: bool = False
    model: str | None = None
    window: int | None = None
    format: str | None = None
    on_error: OnError = "fail"
    by: str | None = None  # role | block | tool
    top: int = 0
    timeline: bool = False
    every_line: bool = False  # --full: parse every line, for an exact message count
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    threads: int = 1  # tokenizer threads (tiktoken only)
    baseline: int | None = None  # --baseline: the fixed part of every request, instead of measuring it
    cost: bool = False  # --cost: what every API call in the file cost
    prices: tuple[tuple[str, Prices], ...] | None = None  # --prices FILE's table before the list prices (None: the list prices)

    def __post_init__(self) -> None:
        # What the command line refuses, refused for a library caller too (a window of -1 made a
        # share of the window of minus a million per cent).
        for name, value in (("window", self.window), ("baseline", self.baseline)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "window" else 0)):
                raise SettingsError(name, f"{value!r} is not a whole number of tokens{' above 0' if name == 'window' else ''}")
        check_on_error(self.on_error)

    @property
    def reads_whole_file(self) -> bool:
        """Whether the count reads the whole file (asked for, or needed by a breakdown, a top list, a timeline or the cost), not only its end."""
        return bool(self.every_line or self.by or self.top or self.timeline or self.cost)

    def counter(self) -> TextCounter:
        from .tokenizers import counter_named  # a small module; loaded when a count needs its counter

        if self.as_claude_code:
            return counter_named("rough")
        return counter_named(CALIBRATED_BASE if self.tokenizer == DEFAULT_TOKENIZER else self.tokenizer, self.threads)

    @property
    def calibrating(self) -> bool:
        if self.as_claude_code:
            return False
        return self.tokenizer == DEFAULT_TOKENIZER if self.calibrate is None else self.calibrate


@dataclass
class FileCount:
    file: str
    format: str
    kind: Kind | None
    count: ContextCount
    window: int
    window_reason: str
    thresholds: Thresholds
    tokenizer: str
    anchor_uuid: str | None
    skipped_lines: int = 0
    breakdown: list[BreakdownRow] | None = None
    top: list[TopLine] | None = None
    timeline: list[TimelinePoint] | None = None
    cost: SessionCost | None = None
    version: str | None = None  # the Claude Code version that wrote the session (its rules apply: core.rules)
    title: str | None | Absent = ABSENT  # the session's title, found where the count reads every line

    def count_report(self) -> CountReport:
        """What `count --json` prints (schemas/count.report.schema.json; tests/test_report_schemas.py holds the two together)."""
        from ..core.reports import CountReport

        count = self.count
        return CountReport(
            file=self.file,
            format=self.format,
            kind=self.kind,
            model=count.model,
            context_window=self.window,
            tokens=count.tokens,
            exact_tokens=count.exact_tokens,
            estimated_tokens=count.estimated_tokens,
            messages=count.messages,
            estimated_messages=count.estimated_messages,
            percent_of_window=round(100 * count.tokens / self.window, 1) if self.window else None,
            tokenizer=self.tokenizer,
            baseline_tokens=count.baseline.tokens if count.baseline else 0,
            baseline=count.baseline.report() if count.baseline else None,
            baseline_in_total=count.baseline_added > 0,
            reinjected_tokens=count.reinjected_tokens,
            reinjected=count.reinjection.report() if count.reinjection else None,
            calibration=count.calibration.report(),
            anchor_uuid=self.anchor_uuid,
            window_source=self.window_reason,
            rules=self.thresholds.rules,
            adjustments=[adjustment.report() for adjustment in count.adjustments],
            skipped_lines=self.skipped_lines,
            breakdown=self.breakdown,
            top=self.top,
            timeline=self.timeline,
            cost=self.cost.report if self.cost is not None else None,
            title=self.title,
        )

    def warn_report(self) -> WarnReport:
        """What `warn --json` prints: the level and the thresholds it was judged against."""
        from ..core.reports import WarnReport, WarnThresholds
        from ..files.sessions import COMPACTION_NOTE

        levels = self.thresholds
        tokens = self.count.tokens
        side_call = self.kind == "compaction"  # only a compaction side-call says what it is
        return WarnReport(
            file=self.file,
            model=self.count.model,
            level=levels.level(tokens),
            tokens=tokens,
            exact_tokens=self.count.exact_tokens,
            estimated_tokens=self.count.estimated_tokens,
            context_window=levels.window,
            autocompact_window=levels.compact_window or levels.window,
            effective_window=levels.effective_window,
            max_output_tokens=levels.max_output_tokens,
            thresholds=WarnThresholds(warning=levels.warning, error=levels.error, autocompact=levels.autocompact, blocking=levels.blocking),
            percent_left=levels.percent_left(tokens),
            percent_used=round(100 * tokens / levels.window, 1),
            explanations=list(levels.explanations),
            ignored=list(levels.ignored),
            rules=levels.rules,
            kind="compaction" if side_call else None,
            note=f"{COMPACTION_NOTE}: no alarm" if side_call else None,
        )


def _window(
    options: CountOptions, model: str | None, largest_prompt: int, budget: BudgetSettings, version: str | None, recorded: int | None
) -> tuple[int, str]:
    if options.window:
        return options.window, "--window"
    if recorded:
        return recorded, "the model's window, as the file records it (formats: recorded_window)"
    window, reason = _model_window(model, budget, version)
    if window < ONE_MILLION and largest_prompt > window:
        return ONE_MILLION, f"a recorded prompt of {largest_prompt:,} tokens does not fit {window:,}"
    return window, reason


def complete_file(options: CountOptions, buffer: Any) -> bool:
    """Whether count reads every line: asked to, or a small file (which costs little, and gets an exact message count)."""
    return options.reads_whole_file or len(buffer) <= SMALL_FILE


def count_buffer(buffer: Any, source: str, options: CountOptions, kind: Kind | None = None, keeps: ParsedLines | None = None) -> FileCount:
    """Count one transcript held in `buffer` (bytes or an mmap): the one accounting every command uses.
    `kind` is what the file's name says (None for stdin); the lines may tell a compaction side-call.
    `keeps`: a caller that holds every line parsed anyway (the report) hands where it keeps them: a
    count of every line parses each once into it, whatever the file's size, and the caller's own read
    of the file parses nothing again."""
    from ..files.sessions import kind_read  # sessions finds folders' files (pathlib): the status line counts one file

    transcript_format = detect_format(buffer, source, options.format)
    format_name = transcript_format.name
    stats = ReadStats()
    # The end of the file, read back further at each call without parsing a line twice; the lines it
    # parsed are not parsed again for the baseline, which reads the file's first lines.
    parsed: ParsedLines = {} if keeps is None else keeps
    # An image costs a flat estimate: its data need not be parsed, unless the caller keeps the lines.
    read_end = transcript_format.context_reader(buffer, source, options.on_error, stats, parsed, flat_images=keeps is None)

    def read(responses: int | None) -> tuple[Sequence[Entry], bool]:
        if complete_file(options, buffer) or responses is None:
            stats.skipped, stats.problems = 0, []
            if len(buffer) <= SMALL_FILE or keeps is not None:  # held whole: parsed once (the status line's usual file, the report's)
                return list(iter_buffer_entries(buffer, source, options.on_error, stats, parsed)), True
            # Every line, parsed again wherever it is read: memory is the index, however long the file.
            # The whole-file facts the count asks for are folded while the lines are checked.
            return LineIndex(buffer, source, options.on_error, stats, folds=(VERSION, *transcript_format.line_folds)), True
        return read_end(responses)

    # First only the last response: when nothing follows it there is nothing to estimate, and the
    # calibration (the costly part) is not needed at all.
    entries, complete = read(1)
    folded: tuple[Sequence[Entry], list[Marker]] = (entries, transcript_format.markers(entries))

    def markers_of(read_entries: Sequence[Entry]) -> list[Marker]:
        """The markers of the lines read, folded once for each read."""
        nonlocal folded
        if read_entries is not folded[0]:
            folded = (read_entries, transcript_format.markers(read_entries))
        return folded[1]

    if not complete and any(marker.kind == "thinking_stripped" for marker in markers_of(entries)):
        # What a strip drops is the thinking of the whole active context: read it whole, as --full does.
        entries, complete = read(None)
    messages = transcript_format.messages(entries)
    counter = options.counter()
    estimates = Estimates(messages, counter)
    calibration = UNCALIBRATED
    reinjection: Reinjection | None = None
    anchor = anchor_index(messages)
    if anchor is not None:
        # The messages after the last response are the ones estimated (count_context's tail): with
        # none there is nothing to fit, and the file is read no further.
        if options.calibrating and anchor < len(messages) - 1:
            if not complete:
                # The calibration window, and the response before it for its first gap.
                entries, complete = read(CALIBRATION_WINDOW + 1)
                messages = transcript_format.messages(entries)
                estimates = Estimates(messages, counter)
            calibration = calibrate(estimates)
        baseline = session_baseline(
            buffer, source, transcript_format, counter, calibration, options, _smallest_prompt(messages), _whole(buffer, entries), parsed
        )
        counted = count_context(estimates, calibration, markers_of(entries), options.as_claude_code, baseline)
    else:
        # No usage describes this context: it is estimated whole, on top of the session baseline.
        opening = transcript_format.opening(entries)
        if opening is not None and opening.restores != "nothing" and not complete_file(options, buffer):
            # Right after Claude Code's own compaction: what it re-injected is rebuilt from the
            # history above the boundary, and the history's responses give the fit.
            entries, complete = read(None)
            messages = transcript_format.messages(entries)
            estimates = Estimates(messages, counter)
            opening = transcript_format.opening(entries)
        # The main chain as read, across boundaries: the fit, and the prompts that bound the baseline.
        # (After ctxpipe's own summary that is the kept tail: its gaps were recorded on the old prompt
        # but are whole, so they still tell the slope.)
        history = transcript_format.messages(entries, history=True) if opening is not None else messages
        if options.calibrating:
            calibration = calibrate(Estimates(history, counter) if history is not messages else estimates)
        if opening is not None and opening.restores != "nothing" and not options.as_claude_code:
            reinjection = _reinjection(entries, transcript_format, opening.restores, counter, calibration)
        baseline = session_baseline(
            buffer, source, transcript_format, counter, calibration, options, _smallest_prompt(history), _whole(buffer, entries), parsed
        )
        # Markers remove nothing here (the estimate sees the content as it now is); they may add (PDF reads).
        counted = count_context(estimates, calibration, markers_of(entries), options.as_claude_code, baseline, reinjection)
        # A context just compacted has no response of its own: the model is the newest one before it.
        counted.model = counted.model or next((m.model for m in reversed(history) if is_real_response(m) and m.model), None)
    model = options.model or counted.model or transcript_format.recorded_model(entries)
    counted.model = model
    # The evidence of a window larger than the model's: the prompt the last response was sent (a usage
    # with iterations bills every pass of a server compaction; its context is the last one's). Only
    # that one: every read has it, so count, warn, the status line, --full and report agree.
    anchored = anchor_index(messages)
    last = messages[anchored].usage if anchored is not None else None
    largest = usage_prompt(context_usage(last)) if last else 0
    version = session_version(entries)  # of the lines read
    window, reason = _window(options, model, largest, options.budget, version, transcript_format.recorded_window(entries))
    if transcript_format.compacts_at is not None:  # the agent's own compaction point, not Claude Code's
        levels = agent_thresholds(window, reason, transcript_format.compacts_at, transcript_format.name)
    else:
        levels = _thresholds(model, options.budget, window, reason, bool(options.window), version)
    anchor_uuid = None
    if counted.anchor is not None and messages[counted.anchor].entries:
        anchor_uuid = text(entries[messages[counted.anchor].entries[-1]].obj, "uuid")
    if not complete:
        counted.messages = None
    # Last: the first lines the reads above parsed need no search for an agentId.
    kind = kind_read(buffer, kind, parsed)
    result = FileCount(
        source,
        format_name,
        kind,
        counted,
        levels.window,
        reason,
        levels,
        _tokenizer_label(options, counter, calibration),
        anchor_uuid,
        stats.skipped,
        version=version,
    )
    if options.by or options.top:
        # The views price every block, so they want the fit even when the count did not need it.
        views = calibrate(estimates) if options.calibrating and calibration is UNCALIBRATED else calibration
        if options.by:
            result.breakdown = breakdown(messages, estimates, views, options.by)
        if options.top:
            result.top = largest_entries(messages, entries, counter, views, options.top)
    if options.timeline:
        result.timeline = timeline(transcript_format.messages(entries, history=True), entries)
    if options.reads_whole_file:
        # A byte search, a fraction of the full read it goes with; never on the fast read of the end alone.
        from ..core.titles import buffer_title

        result.title = buffer_title(buffer)
    if options.cost:
        from ..core.cost import session_cost  # only with --cost: count's usual path stays light

        main = set(transcript_format.context_positions(entries, history=True))
        result.cost = session_cost(transcript_format.api_calls(entries), entries, main, options.prices or ())
    return result


Measure = Callable[[Sequence[Entry]], FileCount]


class RegionMeasure:
    """The count of the transcript that the first `head` bytes of `buffer` (the bytes before the
    region a stage edits) and the given region entries make, exactly as `count` finds it once
    written. The head is read in place (files.inputs.Spliced), never copied.

    The last result is kept: in a pipeline the next stage measures the very entries the previous
    one was measured on (the same objects, so the same bytes), and gets it without a second count;
    the writer measures what it writes the same way (`written`). `whole` is the count of `buffer`
    itself when the caller has it: entries whose lines are exactly the region's bytes (a summary
    measuring what it was given) are that count, without counting again.
    """

    def __init__(self, buffer: Any, head: int, source: str, options: CountOptions, whole: FileCount | None = None) -> None:
        self.buffer, self.head, self.source, self.options, self.whole = buffer, head, source, options, whole
        # The entries measured (kept alive, so their ids stay theirs), their ids, the count.
        self._last: tuple[list[Entry], tuple[int, ...], FileCount] | None = None

    def __call__(self, entries: Sequence[Entry]) -> FileCount:
        from ..core.stage import line_bytes

        return self._measure(entries, lambda: line_bytes(entries))

    def written(self, entries: Sequence[Entry], lines: list[bytes]) -> FileCount:
        """The count of the head and `lines`, which are `line_bytes(entries)` (the bytes a writer writes)."""
        return self._measure(entries, lambda: lines)

    def _measure(self, entries: Sequence[Entry], lines_of: Callable[[], list[bytes]]) -> FileCount:
        """The last count when it was of these very entries, else theirs (their lines made only then)."""
        key = tuple(map(id, entries))
        if self._last is not None and self._last[1] == key:
            return self._last[2]
        lines = lines_of()
        if self.whole is not None and self._is_the_region(lines):
            found = self.whole
        else:
            found = count_buffer(Spliced(self.buffer, self.head, b"".join(lines)), self.source, self.options)
        self._last = (list(entries), key, found)
        return found

    def _is_the_region(self, lines: list[bytes]) -> bool:
        from ..core.stage import holds_exactly
        from ..files.inputs import view

        try:
            with view(self.buffer, self.head) as region:
                return holds_exactly(region, lines)
        except TypeError:  # a buffer read by ranges (object storage): not compared, counted
            return False


def _reinjection(
    entries: Sequence[Entry], transcript_format: TranscriptFormat, restores: str, counter: TextCounter, calibration: Calibration
) -> Reinjection | None:
    from ..core.restore import reinjection, split_at_boundary

    split = split_at_boundary(entries, transcript_format)
    if split is None:
        return None
    fit = fitted_or_corpus(calibration, counter.name)
    return reinjection(split[0], entries, restores, lambda text: fit.apply(counter.count(text)))


def _whole(buffer: Any, entries: Sequence[Entry]) -> Sequence[Entry] | None:
    """`entries` when they are every line of the buffer (a small file is read whole), for the
    baseline to read its head from instead of parsing it again; else None."""
    return entries if len(buffer) <= SMALL_FILE else None


def _smallest_prompt(messages: Sequence[Message]) -> int | None:
    return min((usage_prompt(context_usage(m.usage)) for m in messages if is_measured_response(m) and m.usage), default=None)


def session_baseline(
    buffer: Any,
    source: str,
    transcript_format: TranscriptFormat,
    counter: TextCounter,
    calibration: Calibration,
    options: CountOptions,
    ceiling: int | None = None,
    lines: Sequence[Entry] | None = None,
    parsed: ParsedLines | None = None,
) -> Baseline:
    """The fixed part of every request: --baseline, else measured on the session's first response
    (its recorded prompt less the estimate of the messages before it, and never less than the
    prefix that call read from the cache: system prompt and tools), else the corpus default.

    Every request carries it, so no recorded prompt (`ceiling`: the smallest one read) is smaller.
    `lines`: every line of the buffer, when the count has them parsed already; `parsed`: some of
    them, by where each starts (the walk back's).
    """
    if options.baseline is not None:
        return Baseline(options.baseline, "--baseline", "given on the command line")
    measured = _measured_baseline(buffer, source, transcript_format, counter, calibration, lines, parsed)
    if ceiling is not None and measured.tokens > ceiling:
        return Baseline(ceiling, measured.source, f"{measured.note}; lowered to {ceiling:,}, the smallest prompt recorded since")
    return measured


def _measured_baseline(
    buffer: Any,
    source: str,
    transcript_format: TranscriptFormat,
    counter: TextCounter,
    calibration: Calibration,
    lines: Sequence[Entry] | None = None,
    parsed: ParsedLines | None = None,
) -> Baseline:
    head: list[Entry] = []
    # Lines read whole with on_error "fail" held no bad line, so they are the lines "skip" gives.
    for entry in iter_buffer_entries(buffer, source, "skip", parsed=parsed) if lines is None else lines:
        head.append(entry)
        metadata = transcript_format.boundary_metadata(entry.obj)
        if metadata is not None:
            # The file starts after a compaction (its history dropped): the responses below were
            # sent with a summary, so the evidence is what the summary's writer recorded, if anything.
            recorded = metadata.get("ctxpipe")
            if isinstance(recorded, dict) and count(recorded, "baseline") > 0:  # a figure, not whatever a hostile file holds
                return Baseline(count(recorded, "baseline"), "measured", f"measured before the summary at line {entry.line} and recorded on its boundary")
            head.pop()
            break
        # A line that is a whole response on its own (Claude Code's) ends the search early; other
        # formats attach usage from later lines, so their head is read up to HEAD_LINES.
        if transcript_format.is_lone_response(entry) or len(head) >= HEAD_LINES:
            break
    messages = transcript_format.messages(head)
    response = next((index for index, message in enumerate(messages) if is_real_response(message)), None)
    if response is None:
        return Baseline(DEFAULT_BASELINE, "default", "no recorded usage to measure it on: the median measured over real Claude Code sessions")
    if transcript_format.continues_earlier(head):
        # Its first prompt (and what it read from the cache) held history this file does not: it
        # measures that history, not the system prompt and tools, and would count it twice after a summary.
        line = head[messages[response].entries[0]].line
        return Baseline(
            DEFAULT_BASELINE,
            "default",
            f"the file starts mid-session (its first message's parent is not in it), so the first response (line {line}) was sent history the file does not hold: the median measured over real Claude Code sessions",
        )
    usage = messages[response].usage or {}
    prompt = usage_prompt(usage)
    fit = fitted_or_corpus(calibration, counter.name)
    before = fit.apply(Estimates(messages, counter).between(0, response))
    cached = usage_tokens(usage, "cache_read_input_tokens")
    tokens = max(prompt - before, cached, 0)
    line = head[messages[response].entries[0]].line
    note = f"the first response (line {line}) was sent {prompt:,} tokens, {before:,} of them estimated as the {response} message(s) before it"
    if tokens == cached and cached > prompt - before:
        note += f"; raised to the {cached:,} it read from the cache (system prompt and tools)"
    return Baseline(tokens, "measured", note)


def _tokenizer_label(options: CountOptions, counter: TextCounter, calibration: Calibration) -> str:
    if options.as_claude_code:
        return "rough (as Claude Code)"
    base = counter.name
    if not options.calibrating:
        return base
    if calibration is UNCALIBRATED:
        return f"{base} calibrated (not needed: nothing follows the last response)"
    return f"{base} calibrated ({calibration.source})"


def count_file(path: str | None, options: CountOptions = CountOptions(), kind: Kind | None = None, shown: str | None = None) -> FileCount:
    source = shown or source_name(path)
    # An object in a store is read by ranges where only its ends are needed (tail first).
    with mapped(path, ranged=not options.reads_whole_file, on_error=options.on_error) as buffer:
        return count_buffer(buffer, source, options, kind)


def _block_key(block: dict[str, Any], by: str, tool_names: dict[str, str], role: str) -> str:
    kind = str(kind_of(block))  # str(): a block without a type counts under "None"
    if by == "role":
        return "tool results" if kind == "tool_result" else role
    if by == "block":
        return kind
    if kind == "tool_use":
        return str(name_of(block))
    if kind == "tool_result":
        return tool_names.get(str(call_id(block)), "(unknown tool)")
    return "(conversation)"


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
    return {str(call_id(block)): str(name_of(block)) for message in messages for block in message.content if is_tool_use(block)}


def block_tokens(messages: Sequence[Message], counter: TextCounter, calibration: Calibration) -> list[int]:
    """Calibrated tokens of every block of `messages`, in order (one tokenizer batch): what the
    views and the largest blocks price (a report that shows several of them prices once)."""
    return priced_blocks([block for message in messages for block in message.content], counter, calibration)


def breakdown(messages: Sequence[Message], estimates: Estimates, calibration: Calibration, by: str, priced: Sequence[int] | None = None) -> list[BreakdownRow]:
    """Estimated tokens of the active context grouped by role, block type or tool, largest first.
    `priced`: block_tokens of the same messages and calibration, when the caller has them."""
    from ..core.reports import BreakdownRow

    names = _tool_names(messages)
    totals: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    tokens = iter(block_tokens(messages, estimates.counter, calibration) if priced is None else priced)
    for message in messages:
        for block in message.content:
            key = _block_key(block, by, names, message.role)
            totals[key] += next(tokens)
            counts[key] += 1
    grand = sum(totals.values()) or 1
    return [
        BreakdownRow(key=key, tokens=tokens, blocks=counts[key], share=round(100 * tokens / grand, 1))
        for key, tokens in sorted(totals.items(), key=lambda item: -item[1])
    ]


class LargeBlock(NamedTuple):
    """One block of the active context and what it costs: a row of the largest lines."""

    line: int | None
    role: Role
    block: str
    tool: str | None
    tokens: int
    content: dict[str, Any]  # the block itself


def largest_blocks(
    messages: Sequence[Message], entries: Sequence[Entry], counter: TextCounter, calibration: Calibration, limit: int, priced: Sequence[int] | None = None
) -> list[LargeBlock]:
    """The `limit` blocks of the active context that cost the most, largest first (in file order
    among equals). `priced`: block_tokens of the same messages and calibration, when the caller has them."""
    names = _tool_names(messages)
    rows: list[LargeBlock] = []
    tokens = iter(block_tokens(messages, counter, calibration) if priced is None else priced)
    for message in messages:
        per_line = len(message.entries) == len(message.content)
        # Each line's number read once (a LineIndex parses a line again at every read), not once per block.
        lines = [entries[position].line or None for position in (message.entries if per_line else message.entries[:1])]
        for number, block in enumerate(message.content):
            kind = str(kind_of(block))
            tool = name_of(block) if kind == "tool_use" else names.get(str(call_id(block))) if kind == "tool_result" else None
            rows.append(LargeBlock(lines[number] if per_line else lines[0], message.role, kind, tool, next(tokens), block))
    rows.sort(key=lambda row: -row.tokens)
    return rows[:limit]


def largest_entries(messages: Sequence[Message], entries: Sequence[Entry], counter: TextCounter, calibration: Calibration, limit: int) -> list[TopLine]:
    """`count --top`: the `limit` lines of the active context that cost the most."""
    from ..core.reports import TopLine

    return [
        TopLine(line=row.line, role=row.role, block=row.block, tool=row.tool, tokens=row.tokens)
        for row in largest_blocks(messages, entries, counter, calibration, limit)
    ]


def timeline(messages: Sequence[Message], entries: Sequence[Entry]) -> list[TimelinePoint]:
    """The prompt size of every recorded API call on the main chain, history included."""
    from ..core.reports import TimelinePoint

    points: list[TimelinePoint] = []
    for message in messages:
        if message.role == "assistant" and message.usage and message.model != "<synthetic>":
            last = entries[message.entries[-1]]
            points.append(
                TimelinePoint(
                    line=last.line or None,
                    timestamp=text(last.obj, "timestamp"),
                    tokens=usage_prompt(context_usage(message.usage)),
                    output_tokens=usage_tokens(message.usage, "output_tokens"),
                )
            )
        elif message.compact_summary and points:
            points[-1].compacted_after = True  # learnt once the summary that follows the call is read
    return points
