"""`summarize`: replace the older part of the active context with a summary, keep a verbatim tail.

The split follows Claude Code's session-memory keep window: the tail holds at least
`keep_min_tokens` (4/3-padded estimate) **and** `keep_min_text_messages` messages with text, at
most `keep_max_tokens`, and starts where no tool pair and no response is cut. Engines turn the
history into the summary text; this module holds the split, the offline engine, the verifier and
the shapes written back. The LLM and session-memory engines live in summarize_engines.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .blocks import is_text, kind_of
from .errors import CtxpipeError
from .fields import rounded_down
from .jsonl import as_text
from .model import Message
from .placeholders import SUMMARY_PREAMBLE
from .setting import setting
from .tokens import RoughCounter, estimate_blocks

if TYPE_CHECKING:
    from .facts import Facts, Failure, Typed
    from .reports import FactKind, KindRecall, VerificationReport

SECTIONS = (
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and fixes",
    "Problem Solving",
    "All user messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
)
GIANT_PASTE = 2000  # characters of a typed message kept verbatim before the rest is trimmed


def padded_tokens(message: Message) -> int:
    """Claude Code's estimateMessageTokens: the rough estimate × 4/3, rounded up."""
    return math.ceil(estimate_blocks(message.content, RoughCounter()) * 4 / 3)


def has_text(message: Message) -> bool:
    return any(is_text(block) and str(block.get("text", "")).strip() for block in message.content)


def _pairs_inside(messages: Sequence[Message], start: int) -> int:
    """The latest start at or before `start` whose tail holds the tool_use of every tool_result in it.

    One walk from the end (sets grow as it goes): recomputing the tail's pairs at each candidate
    start was quadratic. A result whose id no tool_use has at all cannot be paired and is let be.
    """
    if start <= 0 or start >= len(messages):
        return start

    def ids(message: Message, kind: str, key: str) -> set[str]:
        return {str(b.get(key)) for b in message.content if kind_of(b) == kind}

    used_anywhere = {tool_id for message in messages for tool_id in ids(message, "tool_use", "id")}
    uses: set[str] = set()  # tool_use ids in messages[s:]
    waiting: set[str] = set()  # result ids in messages[s:] whose tool_use is not
    for s in range(len(messages) - 1, 0, -1):
        asked = ids(messages[s], "tool_use", "id")
        uses |= asked
        waiting -= asked
        waiting |= {tool_id for tool_id in ids(messages[s], "tool_result", "tool_use_id") if tool_id in used_anywhere and tool_id not in uses}
        if s <= start and not waiting:
            return s
    return 0


def tail_start(messages: Sequence[Message], settings: SummarizeSettings) -> int:
    """Index of the first message kept verbatim (len(messages) keeps nothing)."""
    floor = 1 if messages and messages[0].compact_summary else 0  # an earlier summary is summarized, not kept
    count = len(messages)
    if settings.keep_last is not None:
        start = count - settings.keep_last
    elif settings.keep_fraction is not None:
        sizes = [padded_tokens(m) for m in messages]
        goal, total, start = settings.keep_fraction * sum(sizes), 0, count
        while start > floor and total < goal:
            start -= 1
            total += sizes[start]
    else:
        start, tokens, texts = count, 0, 0
        while start > floor:
            if tokens >= settings.keep_max_tokens:
                break
            if tokens >= settings.keep_min_tokens and texts >= settings.keep_min_text_messages:
                break
            start -= 1
            tokens += padded_tokens(messages[start])
            texts += has_text(messages[start])
    return max(floor, _pairs_inside(messages, max(0, start)))


# --- the offline summary ------------------------------------------------------------------------

FULL_FAILURES = 40  # failures listed with their fix and explanation; up to LISTED_FAILURES more on one line each
LISTED_FAILURES = 240


def listed_failures(facts: Facts) -> tuple[list[Failure], list[Failure], int]:
    """The failures a summary carries (and the verifier checks): every unresolved one, then the
    latest fixed ones, LISTED_FAILURES in all; and how many older fixed ones are left out."""
    unresolved = facts.unresolved[-LISTED_FAILURES:]
    fixed = [f for f in reversed(facts.failures) if f.resolved][: LISTED_FAILURES - len(unresolved)]
    return unresolved, fixed, len(facts.failures) - len(unresolved) - len(fixed)


PLAN_CHARS = 1500


def _trim(text: str) -> str:
    if len(text) <= GIANT_PASTE:
        return text
    return text[:GIANT_PASTE] + f" [… {len(text) - GIANT_PASTE:,} more characters of a long paste trimmed …]"


def _typed_item(typed: Typed) -> str:
    note = {"queued": " (typed while the agent was busy)", "command": " (slash command)", "shell": " (shell command typed by the user)"}.get(typed.source, "")
    return f"   - {_trim(typed.text)}{note}"


def _failure_fact(failure: Failure) -> str:
    """What the summary must carry of a failure: the line naming it (the call, when it printed nothing)."""
    from .facts import NO_OUTPUT  # on first use: the commands start without the summary's readers

    return failure.call if failure.line == NO_OUTPUT else failure.line


def _failure_item(failure: Failure) -> str:
    times = f" (×{failure.times})" if failure.times > 1 else ""
    if failure.resolved:
        how = "the same call later succeeded" if failure.fixed_by == failure.call else f"then succeeded: {failure.fixed_by}"
        how += f" — {failure.explanation}" if failure.explanation else ""
        return f"   - [fixed] {failure.call}{times}\n     error: {failure.line}\n     {how}"
    why = f"\n     noted: {failure.explanation}" if failure.explanation else ""
    return f"   - [UNRESOLVED] {failure.call}{times}\n     error: {failure.line}{why}"


def _plan_lines(plan: tuple[str, str]) -> list[str]:
    where, text = plan
    body = text.strip()
    if len(body) > PLAN_CHARS:
        body = body[:PLAN_CHARS].rsplit("\n", 1)[0] + f"\n[… {len(text.strip()) - PLAN_CHARS:,} more characters; read {where} for the rest …]"
    return [f"   - Plan ({where}):"] + [f"     {line}" for line in body.splitlines() if line.strip()]


def first_position(messages: Sequence[Message]) -> int | None:
    """The first entry position of `messages` (the kept tail's start; None: no tail)."""
    return min((p for m in messages for p in m.entries), default=None)


def _before(side_inputs: Sequence[tuple[int, Any]], tail: Sequence[Message]) -> list[tuple[int, Any]]:
    cut = first_position(tail)
    return [item for item in side_inputs if cut is None or item[0] < cut]


def offline_summary(history: Sequence[Message], side_inputs: Sequence[tuple[int, Any]] = (), tail: Sequence[Message] = (), whole: Facts | None = None) -> str:
    """A deterministic summary under the nine headings, built from the transcript alone.

    Written for a developer (or model) who must carry on from it: every typed message, open work
    from every source with its state, each failure with the line that names it and whether it was
    fixed (open ones first), the assistant's findings and decisions, and what was being done last.
    The open work, the current work and the next step are as of the end of the kept `tail` (its
    tool results may be cleared); the rest is the history's. `side_inputs` and `whole`: see key_facts.
    """
    from .facts import chosen_findings, gather, one_line, plan_steps  # on first use: the commands start without the summary's readers

    facts = gather(history, _before(side_inputs, tail))
    now = whole or (gather(list(history) + list(tail), side_inputs) if tail else facts)
    out: list[str] = []

    def section(number: int, lines: list[str]) -> None:
        out.append(f"{number}. {SECTIONS[number - 1]}:")
        out.extend(lines or ["   (none recorded)"])
        out.append("")

    typed = facts.typed
    intent = [f"   {_trim(typed[0].text)}"] if typed else []
    if len(typed) > 1:
        intent.append(f"   Latest request: {_trim(typed[-1].text)}")
        if len(typed) > 2:
            intent.append(f"   ({len(typed) - 2} other message(s) in between, listed in section 6.)")
    section(1, intent)
    kinds = sorted({p.rsplit(".", 1)[-1] for p in facts.files if "." in p.rsplit("/", 1)[-1]})
    section(
        2,
        [f"   - Tools used: {', '.join(f'{n} ×{c}' for n, c in sorted(facts.tools.items(), key=lambda i: -i[1]))}"] * bool(facts.tools)
        + [f"   - Commands run: {', '.join(f'{p} ×{c}' for p, c in sorted(facts.programs.items(), key=lambda i: -i[1])[:12])}"] * bool(facts.programs)
        + [f"   - File types: {', '.join('.' + k for k in kinds)}"] * bool(kinds),
    )
    changed = [f"   - {path} — {facts.files[path]}" + (f" ({facts.changes[path]} changes)" if facts.changes.get(path, 0) > 1 else "") for path in facts.edited]
    changed_paths = set(facts.edited)
    looked = [path for path in facts.files if path not in changed_paths]
    section(3, changed + [f"   - {path} — {facts.files[path]}" for path in looked])
    unresolved, fixed, left = listed_failures(now)  # the tail's too: a stage may have cleared them there
    listed = unresolved + fixed
    section(
        4,
        [_failure_item(f) for f in listed[:FULL_FAILURES]]
        + [f"   - [{'fixed' if f.resolved else 'UNRESOLVED'}] {f.call} — error: {f.line}" for f in listed[FULL_FAILURES:]]
        + ([f"   ({left} earlier fixed failure(s) not listed)"] if left > 0 else [])
        + [f"   - The user declined: {call}" for call in now.declined[-5:]],
    )
    section(5, [f"   - {finding}" for finding in chosen_findings(facts.findings)])
    # A prompt queued during the kept tail has no message there: it is listed here too.
    cut = first_position(tail)
    section(6, [_typed_item(t) for t in typed] + [_typed_item(t) for t in now.typed if t.source == "queued" and cut is not None and t.position >= cut])
    pending: list[str] = []
    for task in now.open_tasks:
        pending.append(f"   - [{task.status or 'pending'}] {task.text}" + (f" ({task.key})" if task.source == "task" else ""))
    closed = [task.key for task in now.tasks.values() if task.source == "tracker" and not task.open]
    if closed:
        pending.append(f"   - Closed in this session: {', '.join(closed)}")
    if now.plan is not None and now.plan[1].strip():
        pending += _plan_lines(now.plan)
        pending += [f"   - Plan step not done: {step}" for step in plan_steps(now.plan[1])]
    for request in now.pending_requests[-3:]:
        pending.append(f'   - Request not yet shown done: "{_trim(one_line(request.typed.text, 400))}"')
    section(7, pending)
    current: list[str] = []
    if now.in_progress:
        current.append(f"   Working on: {now.in_progress}")
    if now.last_edit:
        current.append(f"   Last file changed: {now.last_edit}")
    if now.last_text:
        current.append(f"   Last said: {one_line(now.last_text, 600)}")
    current += [f"   - recent call: {call}" for call in now.last_calls]
    section(8, current)
    step = []
    if now.requests and now.requests[-1].shown_done:
        latest = now.requests[-1]
        step.append(
            f'   Latest request: "{_trim(latest.typed.text)}" — the last words suggest it is done ("{one_line(latest.done_by or "", 300)}"); '
            "check before doing it again."
        )
    elif now.typed:
        step.append(f'   Continue with the latest request: "{_trim(now.typed[-1].text)}"')
    if now.in_progress:
        step.append(f"   In progress: {now.in_progress}")
    if unresolved:
        step.append(f"   Unresolved: {unresolved[-1].call} — {unresolved[-1].line}")
    section(9, step)
    return "Summary:\n" + "\n".join(out).strip()  # earlier summaries are appended by the caller, for every engine


def format_llm_summary(text: str) -> str:
    """Drop a tagged <analysis> block; `<summary>X</summary>` becomes `Summary:` + X (as Claude Code)."""
    text = re.sub(r"<analysis>.*?</analysis>", "", text, count=1, flags=re.S)
    match = re.search(r"<summary>(.*?)</summary>", text, flags=re.S)
    if match:
        inner = match.group(1).strip()  # an empty <summary> is no summary: nothing to label
        text = text[: match.start()] + (f"Summary:\n{inner}" if inner else "") + text[match.end() :]
    text = re.sub(r"\n\s*\n+", "\n\n", text)
    return text.strip()


# An automatic compaction interrupts no one: the model resumes the task instead of greeting the user.
CARRY_ON = (
    "Carry on from where the conversation stopped without asking the user anything: do not acknowledge or "
    "recap this summary and do not announce that you are continuing; simply resume the last task you were asked to do."
)


def summary_message_text(
    summary: str, transcript_path: str | None, kept_tail: bool, automatic: bool = False, tools_used: Sequence[str] = (), preamble: str = SUMMARY_PREAMBLE
) -> str:
    """The summary record's text in Claude Code's order: the preamble (the format's agent's own),
    (2.1.332) the tools used before the summary, summary, where the full transcript is, that recent
    messages are kept, and (for an automatic compaction) the instruction to carry on."""
    from .facts import well_formed  # on first use: the commands start without the summary's readers

    parts = [preamble, "", summary]
    if tools_used:
        parts[1:2] = ["", f"<system-reminder>\n<tools-used-before-summary>{', '.join(tools_used)}</tools-used-before-summary>\n</system-reminder>"]
    if transcript_path:
        parts += [
            "",
            f"If you need specific details from before compaction (exact code snippets, error messages, or content you generated), read the full transcript at: {transcript_path}",
        ]
    if kept_tail:
        parts += ["", "Recent messages are preserved verbatim."]
    if automatic:
        parts += ["", CARRY_ON]
    return well_formed("\n".join(parts))


# --- the verifier -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    kind: FactKind
    text: str
    also: tuple[str, ...] = ()  # other spellings that carry it as well (a file's path from its project)


def path_forms(path: str) -> tuple[str, ...]:
    """The shorter spellings of a file's path a summary may use: each tail of two components or more
    ("lib/app/registry.ex" for "/home/me/proj/lib/app/registry.ex"); a bare file name is too common
    a word to count."""
    parts = [part for part in re.split(r"[/\\]", path) if part]
    return tuple("/".join(parts[start:]) for start in range(1, len(parts) - 1))


# What the new context must still hold, by kind (the order facts are listed in).
FACT_KINDS: tuple[FactKind, ...] = ("instruction", "last-request", "file", "error", "fixed-error", "task", "current-work")
FACT_LABELS = {
    "instruction": "User instruction",
    "last-request": "Last request",
    "file": "File edited or written",
    "error": "Unresolved error",
    "fixed-error": "Error met and fixed",
    "task": "Open task",
    "current-work": "Current work",
}


def key_facts(history: Sequence[Message], tail: Sequence[Message], side_inputs: Sequence[tuple[int, Any]] = (), whole: Facts | None = None) -> list[Fact]:
    """What the new context (summary and kept tail) must hold: every message the user typed (from
    every source), the last request, every file edited or written, every error met (the line that
    names it; unresolved and fixed ones apart), the open todos, tasks and tracker issues, and the
    current work. Read from history and tail alike: a tail whose tool results an earlier stage
    cleared no longer shows its errors, so the summary must.

    `side_inputs` is typed input kept outside the messages (queued prompts), with positions;
    `whole` is gather() of history, tail and side_inputs when the caller has it already.
    """
    from .facts import gather, plan_steps  # on first use: the commands start without the summary's readers

    facts = whole or gather(list(history) + list(tail), side_inputs)
    found: list[Fact] = [Fact("instruction", typed.text) for typed in facts.typed]
    if facts.typed:
        found.append(Fact("last-request", facts.typed[-1].text))
    found += [Fact("file", path, path_forms(path)) for path in facts.edited]
    unresolved, fixed, _ = listed_failures(facts)
    found += [Fact("fixed-error" if failure.resolved else "error", _failure_fact(failure)) for failure in unresolved + fixed]
    found += [Fact("task", task.text) for task in facts.open_tasks if task.text]
    if facts.plan is not None:  # the plan file's unchecked steps are open work too
        found += [Fact("task", step) for step in plan_steps(facts.plan[1])]
    if facts.current:
        found.append(Fact("current-work", facts.current, path_forms(facts.current) if facts.current == facts.last_edit else ()))
    unique: dict[tuple[str, str], Fact] = {}
    for fact in found:
        unique.setdefault((fact.kind, fact.text), fact)
    return list(unique.values())


def _normal(text: str) -> str:
    from .facts import spaced, well_formed  # on first use: the commands start without the summary's readers

    return spaced(well_formed(text)).lower()


# Needles longer than this are searched for by their first ANCHOR characters, then compared whole
# where that anchor matched: the automaton (about 40 bytes per character) stays small enough to
# build fast (64 made it twice as slow on 80k messages, out of the CPU's caches).
ANCHOR = 32
CROWD = 8  # needles sharing an anchor beyond this get longer anchors: a hit never compares many
SHORT = 12  # a needle this short with no space is carried only as a whole token ("a.py" is not in "data.py")
# Words of an instruction: runs of 4+ letters, digits or _./'- (so "don't" is a word), and the
# short negations, which change what an instruction means.
_WORD = re.compile(r"[a-z0-9_./'-]{4,}|(?<![\w'])(?:not|no|nor)(?![\w'])")
_TOKEN_EDGE = "\"'()[]{}<>,;:!?`*"


def occurring(needles: Collection[str], haystack: str) -> set[str]:
    """The needles that occur in `haystack` as substrings, found in one pass over it.

    `needle in haystack` for each needle costs needles × haystack, and both grow with the
    transcript (the offline summary lists every typed message); an Aho-Corasick automaton over all
    of them reads the haystack once.
    """
    import ahocorasick  # pyahocorasick (no stubs: typed Any by the mypy config); only a verification needs it

    found: set[str] = {needle for needle in needles if not needle}  # "" is in every string
    anchored: dict[str, list[str]] = {}
    for needle in set(needles) - found:
        anchored.setdefault(needle[:ANCHOR], []).append(needle)
    for length in (4 * ANCHOR, 16 * ANCHOR, None):  # pyright-style errors share long prefixes
        crowded = [anchor for anchor, group in anchored.items() if len(group) > CROWD]
        if not crowded:
            break
        for anchor in crowded:
            for needle in anchored.pop(anchor):
                anchored.setdefault(needle if length is None else needle[:length], []).append(needle)
    if not anchored:
        return found
    automaton = ahocorasick.Automaton()
    for anchor in anchored:
        automaton.add_word(anchor, anchor)
    automaton.make_automaton()
    left = len(anchored)
    for end, anchor in automaton.iter(haystack):
        waiting = anchored[anchor]
        if not waiting:
            continue
        start = end - len(anchor) + 1
        hits = [needle for needle in waiting if haystack.startswith(needle, start)]
        if hits:
            found.update(hits)
            anchored[anchor] = waiting = [needle for needle in waiting if needle not in found]
            left -= not waiting
            if not left:
                break
    return found


@dataclass
class Verification:
    facts: list[Fact]
    missing: list[Fact]

    @property
    def recall(self) -> float:
        return 1.0 if not self.facts else 1 - len(self.missing) / len(self.facts)

    def by_kind(self) -> dict[str, KindRecall]:
        """Facts, carried and recall for each kind present."""
        from .reports import KindRecall  # the verifier's report types load when a summary is checked

        totals: dict[str, list[int]] = {}
        for fact in self.facts:
            totals.setdefault(fact.kind, [0, 0])[0] += 1
        for fact in self.missing:
            totals[fact.kind][1] += 1
        return {
            kind: KindRecall(facts=n, carried=n - lost, recall=rounded_down(1 - lost / n))
            for kind in FACT_KINDS
            if kind in totals
            for n, lost in [totals[kind]]
        }

    def report(self) -> VerificationReport:
        from .reports import MissingFact, VerificationReport

        return VerificationReport(
            facts=len(self.facts),
            carried=len(self.facts) - len(self.missing),
            recall=rounded_down(self.recall),
            kinds=self.by_kind(),
            missing=[MissingFact(kind=f.kind, text=f.text[:300]) for f in self.missing],
        )


def _tokens(haystack: str) -> set[str]:
    """The whitespace-separated tokens of `haystack`, with and without the punctuation around them."""
    tokens = set(haystack.split())
    return tokens | {token.strip(_TOKEN_EDGE).rstrip(".") for token in tokens}


def verify(facts: Sequence[Fact], context_text: str) -> Verification:
    """Which facts `context_text` still carries: verbatim (whitespace and case aside; a short one
    as a whole token; a file also by a tail of its path), or, for a long instruction, 80 % of its words as
    whole words, negations included (a "don't push" is not carried by "pushed")."""
    haystack = _normal(context_text)
    # A giant paste is carried as its first GIANT_PASTE characters (see _trim).
    forms = [[_normal(spelling[:GIANT_PASTE]) for spelling in (fact.text, *fact.also)] for fact in facts]
    needles = {needle for spellings in forms for needle in spellings}
    short = {needle for needle in needles if 0 < len(needle) <= SHORT and " " not in needle}
    tokens = _tokens(haystack) if short else set()
    verbatim = occurring(needles - short, haystack) | {needle for needle in short if needle in tokens}
    wordy: dict[int, set[str]] = {}
    for number, (fact, spellings) in enumerate(zip(facts, forms)):
        if spellings[0] not in verbatim and fact.kind in ("instruction", "last-request"):
            words = set(_WORD.findall(spellings[0]))
            if len(words) >= 5:
                wordy[number] = words
    present = set(_WORD.findall(haystack)) if wordy else set()
    missing = [
        fact
        for number, (fact, spellings) in enumerate(zip(facts, forms))
        if not any(spelling in verbatim for spelling in spellings) and (number not in wordy or len(wordy[number] & present) / len(wordy[number]) < 0.8)
    ]
    return Verification(list(facts), missing)


def facts_to_keep(missing: Sequence[Fact]) -> str:
    """The deterministic section appended when a summary lost something."""
    lines = ["Facts to keep (checked by ctxpipe; the summary above did not carry them):"]
    lines += [f"- {FACT_LABELS[fact.kind]}: {_trim(fact.text)}" for fact in missing]
    return "\n".join(lines)


def context_text(messages: Sequence[Message]) -> str:
    """All the text a model would read in these messages, for the verifier."""
    parts: list[str] = []
    for message in messages:
        for block in message.content:
            kind = kind_of(block)
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                parts.append(as_text(block.get("input")))
            elif kind == "tool_result":
                parts.append(as_text(block.get("content")))
    return "\n".join(parts)


# --- the stage's settings, declared once (its run needs the engines: jobs/summary.run) ---------------

ENGINES = ("auto", "session-memory", "llm", "offline")


@dataclass(frozen=True)
class SummarizeSettings:
    """summarize's settings as the command line spells them (see core.setting.Flag)."""

    engine: str = setting(
        "auto",
        "--engine",
        "Summary engine: auto | session-memory | llm | offline. auto: the session's notes if found and written after the history they replace, "
        "else the model if ANTHROPIC_API_KEY is set, else offline.",
        short="-e",
        choices=ENGINES,
    )
    session_memory: str | None = setting(
        None,
        "--session-memory",
        "The session notes for the session-memory engine (default: <project>/<session>/session-memory/summary.md beside the transcript). "
        "Notes last written before the history's last message do not cover it: auto then uses the next engine, --engine session-memory stops "
        "with an error.",
        parse="file",
    )
    model: str | None = setting(None, "--model", "Model for the llm engine (default: the transcript's).", short="-m")
    base_url: str | None = setting(None, "--base-url", "llm engine: a Messages-API-compatible endpoint (default: Anthropic's; ANTHROPIC_BASE_URL is honoured).")
    instructions: str | None = setting(None, "--instructions", "llm engine: custom instructions appended to the summary request.")
    describe_images: bool = setting(False, "--describe-images", "llm engine: send images and ask for a one-line description of each, kept in the summary.")
    timeout: float | None = setting(
        None,
        "--timeout",
        "llm engine: seconds for a whole summary, every request, retry and wait included (default 300); past it the offline engine runs.",
        min=0.0,
    )
    keep_min_tokens: int = setting(
        2_000, "--keep-min-tokens", "The tail kept after the summary holds at least this many tokens (4/3-padded estimate)...", min=0
    )
    keep_min_text_messages: int = setting(2, "--keep-min-text-messages", "...and at least this many messages with text...", min=0)
    keep_max_tokens: int = setting(8_000, "--keep-max-tokens", "...and at most this many tokens.", min=0)
    keep_last: int | None = setting(
        None, "--keep-last", "Keep exactly the last N messages after the summary instead (widened only to keep pairs whole).", min=0
    )
    keep_fraction: float | None = setting(None, "--keep-fraction", "Keep the last F (0-1) of the context's tokens after the summary instead.", min=0.0, max=1.0)
    drop_history: bool = setting(False, "--drop-history", "Leave out the lines before the summary (Claude Code keeps them above the boundary).")
    verify: bool = setting(True, "--verify", "Check the new context still holds the key facts; add what is missing.", off="--no-verify")
    max_retries: int = 4  # the model's retries per request (no flag: the library may ask for fewer, e.g. against a test server)

    def check_key(self, api_key: str | None) -> None:
        """The llm engine asked for without the model's key is an error before anything runs."""
        if self.engine == "llm" and not api_key:
            raise CtxpipeError("--engine llm needs ANTHROPIC_API_KEY in the environment")

    def endpoint(self, from_environment: str | None, api_key: str | None) -> str | None:
        """The model's endpoint (--base-url, else ANTHROPIC_BASE_URL), checked before anything runs
        when the model may be asked (an offline run does not care what the variable holds)."""
        value, named = (self.base_url, "--base-url") if self.base_url else (from_environment, "ANTHROPIC_BASE_URL")
        may_ask = self.engine == "llm" or (self.engine == "auto" and bool(api_key))
        return checked_base_url(value, named) if value and may_ask else value


def checked_base_url(value: str, named: str) -> str:
    """`value` when it is an http(s) URL with a host (and a valid port): anything else is one error
    line naming where it came from, not an internal error from deep in the HTTP client (the CLI's
    error printer escapes the control characters it quotes)."""
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in value):
        raise CtxpipeError(f"{named} {value}: a URL holds no spaces or control characters")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 — a port that is not a number raises here
    except ValueError as exc:
        raise CtxpipeError(f"{named} {value}: not a URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise CtxpipeError(f"{named} {value}: expected an http:// or https:// URL with a host")
    return value
