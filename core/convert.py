"""Turn a transcript's messages into a valid Messages API conversation.

Rules (transcript-format.md §16): consecutive same-role messages merge (the API would merge them
anyway); in a merged user message the tool_result blocks come first; every tool_use must be
answered in the very next user message. What breaks that last rule is reported, and repaired
with an explicit synthetic error result only when asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .blocks import call_id, is_tool_result, is_tool_use, tool_event
from .jsonl import Entry
from .model import Message

MISSING_RESULT_TEXT = "[ctxpipe: no result was recorded for this tool call; the session ended or was interrupted before it returned]"


@dataclass
class ToolProblem:
    tool_use_id: str
    line: int | None
    why: str = ""  # for an orphan result: EARLY, UNASKED or NOT_PREVIOUS


# A tool_result answers a tool_use that came before it. One with no tool_use before it is early
# (its tool_use comes later) or unasked (nothing has its id). This is the one definition: convert's
# warnings and validate's findings (every format's check) read it from here.
EARLY = "comes before its tool_use"
UNASKED = "has no tool_use"
NOT_PREVIOUS = "answers no tool_use in the previous message"


def unasked_results(events: Sequence[tuple[bool, str]]) -> dict[int, str]:
    """From (is a tool_use, tool id) in file order: the index of each tool_result that no earlier
    tool_use asked for, with why (EARLY or UNASKED)."""
    used = {tool_id for is_use, tool_id in events if is_use}
    asked: set[str] = set()
    found: dict[int, str] = {}
    for index, (is_use, tool_id) in enumerate(events):
        if is_use:
            asked.add(tool_id)
        elif tool_id not in asked:
            found[index] = EARLY if tool_id in used else UNASKED
    return found


@dataclass
class ConvertReport:
    unanswered: list[ToolProblem] = field(default_factory=list)
    orphans: list[ToolProblem] = field(default_factory=list)
    repaired: int = 0
    dropped_orphans: int = 0
    messages: int = 0


@dataclass
class _Turn:
    role: str
    blocks: list[dict[str, Any]]
    lines: list[int | None]  # source line of each block
    text: str | None  # the plain string content, when the turn is exactly one string message
    recorded: dict[str, Any] = field(default_factory=dict)  # what its source recorded beside it (RECORDED)


# What a conversion keeps of a turn's source besides its content, when asked (to_api_messages'
# `recorded`): when it was written, and of a response its id, model and usage (the newest one's,
# of the responses merged into the turn; never a usage measured before a compaction).
RECORDED = ("timestamp", "id", "model", "usage")


def _recorded(message: Message, entries: Sequence[Entry]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    first = message.entries[0] if message.entries else None
    if first is not None and 0 <= first < len(entries) and isinstance(entries[first].obj.get("timestamp"), str):
        found["timestamp"] = entries[first].obj["timestamp"]
    if message.role == "assistant":
        if message.model:
            found["model"] = message.model
        if message.usage is not None and not message.usage_stale:
            found["usage"] = message.usage
            if message.message_id:
                found["id"] = message.message_id
    return found


def _line(entries: Sequence[Entry], index: int | None) -> int | None:
    return entries[index].line if index is not None and 0 <= index < len(entries) else None


def _merge_turns(messages: Sequence[Message], entries: Sequence[Entry]) -> list[_Turn]:
    turns: list[_Turn] = []
    for message in messages:
        if not message.content:
            continue
        # An assistant message built from several lines: each block sits on its own line.
        if len(message.entries) == len(message.content):
            lines = [_line(entries, i) for i in message.entries]
        else:
            lines = [_line(entries, message.first_line)] * len(message.content)
        recorded = _recorded(message, entries)
        if turns and turns[-1].role == message.role:
            turns[-1].blocks.extend(message.content)
            turns[-1].lines.extend(lines)
            turns[-1].text = None
            merged = turns[-1].recorded  # the first line's time; the newest model; the newest response's id and usage together
            if "timestamp" in recorded:
                merged.setdefault("timestamp", recorded["timestamp"])
            if "model" in recorded:
                merged["model"] = recorded["model"]
            if "usage" in recorded:
                merged.pop("id", None)
                merged.update({key: recorded[key] for key in ("id", "usage") if key in recorded})
        else:
            turns.append(_Turn(message.role, list(message.content), lines, message.text_content, recorded))
    for turn in turns:
        if turn.role == "user" and len(turn.blocks) > 1:
            order = sorted(range(len(turn.blocks)), key=lambda k: not is_tool_result(turn.blocks[k]))
            turn.blocks = [turn.blocks[k] for k in order]
            turn.lines = [turn.lines[k] for k in order]
    return turns


def _tool_use_ids(turn: _Turn) -> list[tuple[str, int | None]]:
    return [(tool_id, line) for block, line in zip(turn.blocks, turn.lines) if is_tool_use(block) and (tool_id := call_id(block)) is not None]


def to_api_messages(
    messages: Sequence[Message], entries: Sequence[Entry], repair: bool = False, recorded: bool = False
) -> tuple[list[dict[str, Any]], ConvertReport]:
    """Messages API form of `messages`, plus what was wrong with their tool pairs. With `recorded`
    each message also carries what its source recorded (RECORDED: for a conversion, which a
    format's from_messages writes back in its own fields); without, it is fit to send."""
    report = ConvertReport()
    turns = _merge_turns(messages, entries)
    refs = [(k, i, event) for k, turn in enumerate(turns) for i, block in enumerate(turn.blocks) if (event := tool_event(block)) is not None]
    why = {refs[n][:2]: text for n, text in unasked_results([event for _, _, event in refs]).items()}
    for k, turn in enumerate(turns):
        if turn.role != "user":
            continue
        previous = turns[k - 1] if k > 0 and turns[k - 1].role == "assistant" else None
        asked = {tool_id for tool_id, _ in _tool_use_ids(previous)} if previous else set()
        kept_blocks, kept_lines = [], []
        for i, (block, line) in enumerate(zip(turn.blocks, turn.lines)):
            if is_tool_result(block) and (tool_id := call_id(block)) not in asked:
                report.orphans.append(ToolProblem(str(tool_id), line, why.get((k, i), NOT_PREVIOUS)))
                if repair:
                    report.dropped_orphans += 1
                    continue
            kept_blocks.append(block)
            kept_lines.append(line)
        if len(kept_blocks) != len(turn.blocks):
            turn.blocks, turn.lines, turn.text = kept_blocks, kept_lines, None
    for k, turn in enumerate(turns):
        if turn.role != "assistant":
            continue
        following = turns[k + 1] if k + 1 < len(turns) else None
        answered = {call_id(block) for block in following.blocks if is_tool_result(block)} if following else set()
        missing = [(tool_id, line) for tool_id, line in _tool_use_ids(turn) if tool_id not in answered]
        for tool_id, line in missing:
            report.unanswered.append(ToolProblem(tool_id, line))
        if repair and missing:
            synthetic = [{"type": "tool_result", "tool_use_id": tool_id, "content": MISSING_RESULT_TEXT, "is_error": True} for tool_id, _ in missing]
            if following is None:
                following = _Turn("user", [], [], None)
                turns.insert(k + 1, following)
            following.blocks[:0] = synthetic
            following.lines[:0] = [None] * len(synthetic)
            following.text = None
            report.repaired += len(synthetic)
    out: list[dict[str, Any]] = []
    for turn in turns:
        if not turn.blocks:
            continue
        content: Any = turn.text if turn.text is not None else turn.blocks
        out.append({"role": turn.role, "content": content, **(turn.recorded if recorded else {})})
    report.messages = len(out)
    return out, report
