"""Hypothesis strategies that generate structurally faithful Claude Code sessions.

The shapes follow transcript-format.md: one content block per assistant line sharing message.id,
usage growing on the last fragment, tool results chained (1.0.x) or branched off their tool_use
lines (2.1.x), progress lines inside the chain, non-tree entries, unknown types, compact
boundaries with their summary, inline sidechains, and sometimes a final tool_use left unanswered.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import orjson
from ctxpipe.core.microcompact import PLACEHOLDER
from ctxpipe.core.placeholders import UNCHANGED_STUB
from hypothesis import strategies as st

TOOLS = ("Read", "Bash", "Grep", "Edit", "Task", "mcp__github__search")
words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=40)


@dataclass
class SessionBuilder:
    lines: list[dict[str, Any]] = field(default_factory=list)
    counter: itertools.count = field(default_factory=itertools.count)
    parent: str | None = None
    clock: int = 0

    def uuid(self) -> str:
        return f"00000000-0000-4000-8000-{next(self.counter):012d}"

    def add(self, kind: str, parent: str | None, sidechain: bool = False, **fields: Any) -> str:
        self.clock += 1
        line_uuid = self.uuid()
        line = {
            "parentUuid": parent,
            "isSidechain": sidechain,
            "userType": "external",
            "cwd": "/w",
            "sessionId": "99999999-9999-4999-8999-999999999999",
            "version": "2.1.39",
            "type": kind,
            **fields,
            "uuid": line_uuid,
            "timestamp": f"2026-01-01T00:{self.clock // 60 % 60:02d}:{self.clock % 60:02d}.000Z",
        }
        self.lines.append(line)
        return line_uuid

    def to_bytes(self) -> bytes:
        return b"".join(orjson.dumps(line) + b"\n" for line in self.lines)


def _usage(draw: Any, output: int) -> dict[str, int]:
    return {
        "input_tokens": draw(st.integers(1, 50)),
        "cache_creation_input_tokens": draw(st.integers(0, 5000)),
        "cache_read_input_tokens": draw(st.integers(0, 100_000)),
        "output_tokens": output,
    }


@st.composite
def claude_sessions(draw: Any, max_turns: int = 6) -> bytes:
    """The bytes of one Claude Code session JSONL file."""
    b = SessionBuilder()
    if draw(st.booleans()):
        b.lines.append({"type": "summary", "summary": draw(words), "leafUuid": "00000000-0000-4000-8000-ffffffffffff"})
    parent = b.add("user", None, message={"role": "user", "content": draw(words) or "start"})
    tool_number = itertools.count()
    message_number = itertools.count()
    turns = draw(st.integers(1, max_turns))
    for turn in range(turns):
        if turn and draw(st.integers(0, 9)) == 0:  # a compact boundary, then the summary
            boundary = b.add(
                "system",
                None,
                subtype="compact_boundary",
                content="Conversation compacted",
                logicalParentUuid=parent,
                compactMetadata={"trigger": "auto", "preTokens": 1000},
            )
            parent = b.add(
                "user",
                boundary,
                isCompactSummary=True,
                isVisibleInTranscriptOnly=True,
                message={"role": "user", "content": "This session is being continued from a previous conversation. " + draw(words)},
            )
        message_id = f"msg_{next(message_number):04d}"
        blocks: list[dict[str, Any]] = []
        if draw(st.booleans()):
            blocks.append({"type": "thinking", "thinking": draw(words), "signature": "EqsigAA=="})
        if draw(st.booleans()):
            blocks.append({"type": "text", "text": draw(words) or "ok"})
        calls = draw(st.integers(0, 3))
        tool_ids = [f"toolu_{next(tool_number):04d}" for _ in range(calls)]
        for tool_id in tool_ids:
            name = draw(st.sampled_from(TOOLS))
            blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": {"file_path": f"/w/{draw(st.integers(0, 3))}.py"}})
        if not blocks:
            blocks.append({"type": "text", "text": "done"})
        branched = draw(st.booleans())  # 2.1.x: results hang off their own tool_use lines
        tool_lines: dict[str, str] = {}
        output = 1
        for block in blocks:
            output += draw(st.integers(0, 300))
            parent = b.add(
                "assistant",
                parent,
                requestId="req_" + message_id,
                message={
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [block],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": _usage(draw, output),
                },
            )
            if block["type"] == "tool_use":
                tool_lines[block["id"]] = parent
            if draw(st.integers(0, 3)) == 0:
                parent = b.add("progress", parent, data={"type": "hook_progress", "hookEvent": "PostToolUse"}, toolUseID="x")
        last_turn = turn == turns - 1
        interrupted = last_turn and tool_ids and draw(st.integers(0, 4)) == 0
        if interrupted:
            break
        if tool_ids and draw(st.integers(0, 5)) == 0:  # an inline 1.0.x sidechain before the results
            side = b.add("user", None, sidechain=True, message={"role": "user", "content": "subagent task"})
            b.add(
                "assistant",
                side,
                sidechain=True,
                requestId="req_side",
                message={
                    "id": f"msg_side{turn}",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "sub"}],
                    "usage": _usage(draw, 3),
                },
            )
        if draw(st.booleans()):
            b.lines.append({"type": "file-history-snapshot", "messageId": parent, "snapshot": {"trackedFileBackups": {}}, "isSnapshotUpdate": False})
        for tool_id in tool_ids:
            result_parent = tool_lines[tool_id] if branched else parent
            content: Any = draw(st.one_of(words, st.just([{"type": "text", "text": "x" * 50}])))
            result = b.add(
                "user",
                result_parent,
                message={"role": "user", "content": [{"tool_use_id": tool_id, "type": "tool_result", "content": content}]},
                toolUseResult={"stdout": "", "stderr": ""},
            )
            if not branched or tool_id == tool_ids[-1]:
                parent = result
        if draw(st.integers(0, 4)) == 0:
            parent = b.add("custom-future-entry", parent, payloadV9={"n": draw(st.integers(-(2**63), 2**63 - 1))})
        if not last_turn and draw(st.booleans()):
            parent = b.add("user", parent, message={"role": "user", "content": draw(words) or "next"})
    return b.to_bytes()


LISTING = "".join(f"     {n}\tdef function_{n}(value):\n" for n in range(1, 30))
POOL = [
    LISTING,
    "On branch main\nnothing to commit, working tree clean\n" * 3,
    [{"type": "text", "text": "Found 12 matches\n" + "src/x.py:1: TODO\n" * 12}],
    [
        {"type": "text", "text": "Screenshot of the page, 1280x800, and its caption"},
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==",
            },
        },
    ],
    UNCHANGED_STUB + " The content from the earlier Read tool_result in this conversation is still current \u2014 refer to that instead of re-reading.",
    PLACEHOLDER,
    "short",
    "",
]


@st.composite
def stage_sessions(draw: Any, max_turns: int = 8) -> bytes:
    """claude_sessions() with tool results from POOL (or kept), and sometimes a big toolUseResult."""
    data = draw(claude_sessions(max_turns=max_turns))
    lines = [orjson.loads(line) for line in data.splitlines()]
    files = draw(st.integers(1, 4))  # fewer files: the same call (and so the same result) comes back more often
    calls: dict[str, tuple[str, str]] = {}
    for line in lines:
        message = line.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                block["input"] = {"file_path": f"/w/{int(block['input']['file_path'][3]) % files}.py"}
                calls[block["id"]] = (block["name"], block["input"]["file_path"])
            if isinstance(block, dict) and block.get("type") == "tool_result" and draw(st.integers(0, 4)):
                if block["tool_use_id"] in calls and draw(st.integers(0, 3)):
                    # The same call gives the same result (a file read again with nothing changed).
                    block["content"] = POOL[sum(map(ord, "".join(calls[block["tool_use_id"]]))) % 4]
                else:
                    block["content"] = draw(st.sampled_from(POOL))
                if "toolUseResult" in line and draw(st.booleans()):
                    line["toolUseResult"] = {"file": {"content": LISTING, "numLines": 29}, "type": "text"}
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)
