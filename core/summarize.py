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
from dataclasses import dataclass, field
from typing import Any

from .jsonl import as_text
from .model import Message
from .tokens import RoughCounter, estimate_blocks

PREAMBLE = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation."
)
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
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
INJECTED_PREFIXES = ("<local-command-stdout>", "<local-command-stderr>", "<command-name>", "<command-message>", "Caveat:", "<system-reminder>", "<task-notification>")


@dataclass(frozen=True)
class SplitConfig:
    keep_min_tokens: int = 10_000
    keep_min_text_messages: int = 5
    keep_max_tokens: int = 40_000
    keep_last: int | None = None
    keep_fraction: float | None = None


def padded_tokens(message: Message) -> int:
    """Claude Code's estimateMessageTokens: the rough estimate × 4/3, rounded up."""
    return math.ceil(estimate_blocks(message.content, RoughCounter()) * 4 / 3)


def has_text(message: Message) -> bool:
    return any(block.get("type") == "text" and str(block.get("text", "")).strip() for block in message.content)


def _pairs_inside(messages: Sequence[Message], start: int) -> int:
    """The latest start at or before `start` whose tail holds the tool_use of every tool_result in it.

    One walk from the end (sets grow as it goes): recomputing the tail's pairs at each candidate
    start was quadratic. A result whose id no tool_use has at all cannot be paired and is let be.
    """
    if start <= 0 or start >= len(messages):
        return start

    def ids(message: Message, kind: str, key: str) -> set[str]:
        return {str(b.get(key)) for b in message.content if b.get("type") == kind}

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


def tail_start(messages: Sequence[Message], config: SplitConfig) -> int:
    """Index of the first message kept verbatim (len(messages) keeps nothing)."""
    floor = 1 if messages and messages[0].compact_summary else 0  # an earlier summary is summarized, not kept
    count = len(messages)
    if config.keep_last is not None:
        start = count - config.keep_last
    elif config.keep_fraction is not None:
        sizes = [padded_tokens(m) for m in messages]
        goal, total, start = config.keep_fraction * sum(sizes), 0, count
        while start > floor and total < goal:
            start -= 1
            total += sizes[start]
    else:
        start, tokens, texts = count, 0, 0
        while start > floor:
            if tokens >= config.keep_max_tokens:
                break
            if tokens >= config.keep_min_tokens and texts >= config.keep_min_text_messages:
                break
            start -= 1
            tokens += padded_tokens(messages[start])
            texts += has_text(messages[start])
    return max(floor, _pairs_inside(messages, max(0, start)))


# --- what a transcript says, for the offline summary and the verifier ---------------------------


@dataclass
class Facts:
    typed: list[str] = field(default_factory=list)  # every message the user typed, in order
    files: dict[str, str] = field(default_factory=dict)  # path -> last action
    edited: list[str] = field(default_factory=list)  # paths edited or written, in order
    commands: list[tuple[str, bool]] = field(default_factory=list)  # (command, failed)
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (tool, first error line, what followed)
    todos: list[tuple[str, str]] = field(default_factory=list)  # last list: (content, status)
    tools: dict[str, int] = field(default_factory=dict)
    assistant_notes: list[str] = field(default_factory=list)
    last_calls: list[str] = field(default_factory=list)
    earlier_summaries: list[str] = field(default_factory=list)
    unresolved_error: str | None = None


def _text_of(message: Message) -> str:
    return "\n".join(str(b.get("text", "")) for b in message.content if b.get("type") == "text").strip()


def typed_text(message: Message) -> str | None:
    """The text of a message the human typed (not a tool result, injected context or a summary)."""
    if message.role != "user" or message.meta or message.compact_summary:
        return None
    text = _text_of(message)  # a Messages-API user turn may carry typed text beside tool results
    if not text or text.startswith(INJECTED_PREFIXES) or text.startswith("[Request interrupted"):
        return None
    return text


def _first_line(content: Any) -> str:
    """The line that says what went wrong: the first naming an error or failure, else the first."""
    if isinstance(content, list):
        content = " ".join(as_text(b.get("text", "")) for b in content if isinstance(b, dict))
    lines = [line.strip() for line in as_text(content or "").splitlines() if line.strip()]
    telling = next((line for line in lines if re.search(r"error|fail|exception|traceback", line, re.I)), None)
    return (telling or (lines[0] if lines else ""))[:200]


def describe_call(name: str, tool_input: Any) -> str:
    if isinstance(tool_input, dict):
        for key in ("file_path", "notebook_path", "command", "pattern", "url", "query", "description"):
            if isinstance(tool_input.get(key), str):
                return f"{name} {tool_input[key][:160]}"
    return name


def gather(messages: Sequence[Message]) -> Facts:
    facts = Facts()
    calls: dict[str, tuple[str, Any]] = {}
    pending_error: tuple[str, str] | None = None
    failed_tool: str | None = None  # the tool of the latest failure, until a later call of it succeeds
    edited: set[str] = set()  # facts.edited as a set: a list lookup per edit would be quadratic
    for message in messages:
        if message.compact_summary:
            facts.earlier_summaries.append(_text_of(message))
            continue
        typed = typed_text(message)
        if typed is not None:
            facts.typed.append(typed)
        for block in message.content:
            kind = block.get("type")
            if kind == "tool_use":
                name, tool_input = str(block.get("name", "")), block.get("input")
                calls[str(block.get("id"))] = (name, tool_input)
                facts.tools[name] = facts.tools.get(name, 0) + 1
                facts.last_calls = (facts.last_calls + [describe_call(name, tool_input)])[-5:]
                path = tool_input.get("file_path") or tool_input.get("notebook_path") if isinstance(tool_input, dict) else None
                if isinstance(path, str):
                    action = "read" if name == "Read" else "written" if name == "Write" else "edited" if name in EDIT_TOOLS else name
                    earlier = facts.files.get(path, "")
                    if action == "read" and earlier.startswith(("edited", "written")):
                        action = f"{earlier.split(' ')[0]}, then read"  # a read must not hide a change
                    facts.files[path] = action
                    if name in EDIT_TOOLS and path not in edited:
                        edited.add(path)
                        facts.edited.append(path)
                if name == "TodoWrite" and isinstance(tool_input, dict) and isinstance(tool_input.get("todos"), list):
                    facts.todos = [(as_text(t.get("content", "")), as_text(t.get("status", ""))) for t in tool_input["todos"] if isinstance(t, dict)]
            elif kind == "tool_result":
                name, tool_input = calls.get(str(block.get("tool_use_id")), ("?", None))
                failed = bool(block.get("is_error"))
                if name == "Bash" and isinstance(tool_input, dict):
                    facts.commands.append((as_text(tool_input.get("command", ""))[:200], failed))
                if failed:
                    pending_error = (name, _first_line(block.get("content")))
                    facts.unresolved_error, failed_tool = pending_error[1], name
                elif failed_tool == name:
                    facts.unresolved_error, failed_tool = None, None
            elif kind == "text" and message.role == "assistant":
                text = str(block.get("text", "")).strip()
                if text:
                    facts.assistant_notes.append(text)
                    if pending_error:
                        facts.errors.append((pending_error[0], pending_error[1], text[:300]))
                        pending_error = None
    if pending_error:
        facts.errors.append((pending_error[0], pending_error[1], "(nothing followed yet)"))
    return facts


def _trim(text: str) -> str:
    if len(text) <= GIANT_PASTE:
        return text
    return text[:GIANT_PASTE] + f" [… {len(text) - GIANT_PASTE:,} more characters of a long paste trimmed …]"


def offline_summary(history: Sequence[Message]) -> str:
    """A deterministic summary under the nine headings, built from the transcript alone."""
    facts = gather(history)
    out: list[str] = []

    def section(number: int, lines: list[str]) -> None:
        out.append(f"{number}. {SECTIONS[number - 1]}:")
        out.extend(lines or ["   (none recorded)"])
        out.append("")

    first = facts.typed[0] if facts.typed else None
    section(1, [f"   {_trim(first)}"] + ([f"   The user made {len(facts.typed) - 1} later request(s), listed in section 6."] if len(facts.typed) > 1 else []) if first else [])
    kinds = sorted({p.rsplit(".", 1)[-1] for p in facts.files if "." in p.rsplit("/", 1)[-1]})
    section(2, [f"   - Tools used: {', '.join(f'{n} ×{c}' for n, c in sorted(facts.tools.items(), key=lambda i: -i[1]))}"] * bool(facts.tools)
            + [f"   - File types: {', '.join('.' + k for k in kinds)}"] * bool(kinds))
    section(3, [f"   - {path} — {action}" for path, action in facts.files.items()])
    section(4, [f"   - {tool} failed: {error}\n     Then: {after}" for tool, error, after in facts.errors[-10:]]
            + [f"   - Command failed: {command}" for command, failed in facts.commands if failed][-5:])
    section(5, [f"   - {_trim(note)[:400]}" for note in facts.assistant_notes[-8:]])
    section(6, [f"   - {_trim(text)}" for text in facts.typed])
    open_todos = [content for content, status in facts.todos if status != "completed"]
    section(7, [f"   - [{status or 'pending'}] {content}" for content, status in facts.todos if status != "completed"] if open_todos else [])
    current = ([f"   {_trim(facts.assistant_notes[-1])[:600]}"] if facts.assistant_notes else []) + [f"   - recent call: {call}" for call in facts.last_calls]
    section(8, current)
    section(9, [f'   Continue with the latest request: "{_trim(facts.typed[-1])}"'] if facts.typed else [])
    return "Summary:\n" + "\n".join(out).strip()  # earlier summaries are appended by the caller, for every engine


def format_llm_summary(text: str) -> str:
    """Drop a tagged <analysis> block; `<summary>X</summary>` becomes `Summary:` + X (as Claude Code)."""
    text = re.sub(r"<analysis>.*?</analysis>", "", text, count=1, flags=re.S)
    match = re.search(r"<summary>(.*?)</summary>", text, flags=re.S)
    if match:
        text = text[: match.start()] + "Summary:\n" + match.group(1).strip() + text[match.end() :]
    text = re.sub(r"\n\s*\n+", "\n\n", text)
    return text.strip()


def summary_message_text(summary: str, transcript_path: str | None, kept_tail: bool) -> str:
    parts = [PREAMBLE, "", summary]
    if transcript_path:
        parts += ["", f"If you need specific details from before compaction (exact code snippets, error messages, or content you generated), read the full transcript at: {transcript_path}"]
    if kept_tail:
        parts += ["", "Recent messages are preserved verbatim."]
    return "\n".join(parts)


# --- the verifier -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    kind: str  # instruction | file | last-request | todo | error
    text: str


def key_facts(history: Sequence[Message], tail: Sequence[Message]) -> list[Fact]:
    """What the new context must still hold: every typed instruction, every edited or written file,
    the last request, the open todo items, and the last error if nothing resolved it."""
    everything = list(history) + list(tail)
    facts, earlier = gather(everything), gather(history)
    found: list[Fact] = [Fact("instruction", text) for text in earlier.typed]
    found += [Fact("file", path) for path in earlier.edited]
    if facts.typed:
        found.append(Fact("last-request", facts.typed[-1]))
    found += [Fact("todo", content) for content, status in facts.todos if status != "completed" and content]
    if facts.unresolved_error:
        found.append(Fact("error", facts.unresolved_error))
    unique: dict[tuple[str, str], Fact] = {}
    for fact in found:
        unique.setdefault((fact.kind, fact.text), fact)
    return list(unique.values())


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


# Needles longer than this are searched for by their first ANCHOR characters, then compared whole
# where that anchor matched: the automaton (about 40 bytes per character) stays small enough to
# build fast (64 made it twice as slow on 80k messages, out of the CPU's caches).
ANCHOR = 32
_WORD = re.compile(r"[a-z0-9_./-]{4,}")


def occurring(needles: Collection[str], haystack: str) -> set[str]:
    """The needles that occur in `haystack` as substrings, found in one pass over it.

    `needle in haystack` for each needle costs needles × haystack, and both grow with the
    transcript (the offline summary lists every typed message); an Aho-Corasick automaton over all
    of them reads the haystack once.
    """
    import ahocorasick  # type: ignore[import-not-found]  # pyahocorasick (no stubs); only a verification needs it

    found: set[str] = {needle for needle in needles if not needle}  # "" is in every string
    anchored: dict[str, list[str]] = {}
    for needle in set(needles) - found:
        anchored.setdefault(needle[:ANCHOR], []).append(needle)
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

    def as_dict(self) -> dict[str, Any]:
        return {
            "facts": len(self.facts),
            "carried": len(self.facts) - len(self.missing),
            "recall": round(self.recall, 4),
            "missing": [{"kind": f.kind, "text": f.text[:300]} for f in self.missing],
        }


def verify(facts: Sequence[Fact], context_text: str) -> Verification:
    """Which facts `context_text` still carries: verbatim (whitespace and case aside), or, for a
    long instruction, 80 % of its words (runs of 4+ letters, digits or _./-)."""
    haystack = _normal(context_text)
    # A giant paste is carried as its first GIANT_PASTE characters (see _trim).
    needles = [_normal(fact.text[:GIANT_PASTE]) for fact in facts]
    verbatim = occurring(needles, haystack)
    wordy: dict[int, set[str]] = {}
    for number, (fact, needle) in enumerate(zip(facts, needles)):
        if needle not in verbatim and fact.kind in ("instruction", "last-request"):
            words = set(_WORD.findall(needle))
            if len(words) >= 5:
                wordy[number] = words
    present = occurring({word for words in wordy.values() for word in words}, haystack) if wordy else set()
    missing = [
        fact for number, (fact, needle) in enumerate(zip(facts, needles))
        if needle not in verbatim and (number not in wordy or len(wordy[number] & present) / len(wordy[number]) < 0.8)
    ]
    return Verification(list(facts), missing)


def facts_to_keep(missing: Sequence[Fact]) -> str:
    """The deterministic section appended when a summary lost something."""
    labels = {"instruction": "User instruction", "file": "File edited or written", "last-request": "Last request",
              "todo": "Open task", "error": "Unresolved error"}
    lines = ["Facts to keep (checked by ctxpipe; the summary above did not carry them):"]
    lines += [f"- {labels[fact.kind]}: {_trim(fact.text)}" for fact in missing]
    return "\n".join(lines)


def context_text(messages: Sequence[Message]) -> str:
    """All the text a model would read in these messages, for the verifier."""
    parts: list[str] = []
    for message in messages:
        for block in message.content:
            kind = block.get("type")
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                parts.append(as_text(block.get("input")))
            elif kind == "tool_result":
                parts.append(as_text(block.get("content")))
    return "\n".join(parts)
