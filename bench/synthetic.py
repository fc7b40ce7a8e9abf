"""Generated Claude Code transcripts of any size, for the linearity benchmark (bench/linearity.py).

    python bench/synthetic.py turns N OUT.jsonl   # N user/assistant turns with tool calls
    python bench/synthetic.py chain N OUT.jsonl   # one parentUuid chain N lines deep

A turn is: a typed request, a response with a text block and a tool call (Read, Edit or Bash in
turn), the tool result (every 7th one an error), and a closing text: 4 messages and 5 lines, all
on one uuid/parentUuid chain, so a file of N turns is also a chain 5N lines deep. The chain form
is the smallest line that still walks: alternating one-line user and assistant messages.
Deterministic: the same N gives the same bytes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

SESSION = "77777777-7777-4777-8777-777777777777"
MODEL = "claude-sonnet-4-5-20250929"
WORDS = (
    "parser",
    "cache",
    "retry",
    "budget",
    "schema",
    "index",
    "stream",
    "token",
    "window",
    "marker",
    "buffer",
    "header",
    "socket",
    "worker",
    "config",
    "report",
)


def _uuid(number: int) -> str:
    return f"00000000-0000-4000-8000-{number:012d}"


def _stamp(number: int) -> str:
    return f"2026-05-04T{number // 3_600_000 % 24:02d}:{number // 60_000 % 60:02d}:{number // 1000 % 60:02d}.{number % 1000:03d}Z"


class _Writer:
    def __init__(self) -> None:
        self.count = 0

    def line(self, kind: str, root: bool = False, **fields: Any) -> bytes:
        self.count += 1
        obj = {
            "parentUuid": _uuid(self.count - 1) if self.count > 1 and not root else None,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/app",
            "sessionId": SESSION,
            "version": "2.1.39",
            "gitBranch": "main",
            "type": kind,
            **fields,
            "uuid": _uuid(self.count),
            "timestamp": _stamp(self.count),
        }
        return orjson.dumps(obj) + b"\n"


def _usage(total: int) -> dict[str, int]:
    return {"input_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": max(0, total - 155), "output_tokens": 50}


def turns(n: int, compact_every: int | None = None) -> Iterator[bytes]:
    """The lines of n user/assistant turns with tool calls; with compact_every, a compaction (a
    compact_boundary and its summary, as Claude Code writes them) after every that many turns, so
    the prompt stays the size a real session's does (300 turns: about 170K tokens)."""
    w = _Writer()
    total = 20_000
    for k in range(n):
        if compact_every and k and k % compact_every == 0:
            yield w.line(
                "system",
                root=True,
                subtype="compact_boundary",
                content="Conversation compacted",
                isMeta=False,
                level="info",
                logicalParentUuid=_uuid(w.count),
                compactMetadata={"trigger": "auto", "preTokens": total},
            )
            summary = f"This session is being continued from a previous conversation that ran out of context. Summary: cases up to {k} are done."
            yield w.line("user", message={"role": "user", "content": summary}, isCompactSummary=True, isVisibleInTranscriptOnly=True)
            total = 22_000
        a, b = WORDS[k % len(WORDS)], WORDS[(k * 7 + 3) % len(WORDS)]
        path = f"/home/dev/app/src/{a}/{b}_{k % 97}.py"
        yield w.line("user", message={"role": "user", "content": f"Request {k}: make the {a} {b} handle case {k} and keep the {b} tests green"})
        total += 300
        message_id = f"msg_01S{k:07d}"
        tool_id = f"toolu_01S{k:07d}"
        kind = k % 3
        name, tool_input = (
            ("Read", {"file_path": path})
            if kind == 0
            else ("Edit", {"file_path": path, "old_string": f"{a} = 1", "new_string": f"{a} = {k}"})
            if kind == 1
            else ("Bash", {"command": f"pytest tests/test_{a}.py -k {b}_{k}", "description": f"run the {a} tests"})
        )
        for block in (
            {"type": "text", "text": f"I'll look at the {a} {b} code for case {k}."},
            {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input},
        ):
            yield w.line(
                "assistant",
                message={
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [block],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": _usage(total),
                },
                requestId=f"req_{message_id}",
            )
        failed = k % 7 == 6
        result = f"Error: {b} test {k} failed with AssertionError" if failed else f"{path}: {k * 3} lines, ok"
        yield w.line(
            "user",
            message={"role": "user", "content": [{"tool_use_id": tool_id, "type": "tool_result", "content": result, "is_error": failed}]},
            toolUseResult={"stdout": result, "stderr": ""},
        )
        total += 200
        closing_id = f"msg_01T{k:07d}"
        yield w.line(
            "assistant",
            message={
                "id": closing_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [{"type": "text", "text": f"Done with case {k}: the {a} {b} change is in."}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": _usage(total),
            },
            requestId=f"req_{closing_id}",
        )


def chain(depth: int) -> Iterator[bytes]:
    """One parentUuid chain `depth` lines deep: short user and assistant lines in turn."""
    w = _Writer()
    for k in range(depth):
        if k % 2 == 0:
            yield w.line("user", message={"role": "user", "content": f"step {k}"})
        else:
            message_id = f"msg_01C{k:07d}"
            yield w.line(
                "assistant",
                message={
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [{"type": "text", "text": f"ok {k}"}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": _usage(1000 + k),
                },
                requestId=f"req_{message_id}",
            )


def write(path: Path, lines: Iterator[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        out.writelines(lines)
    return path


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("turns", "chain"):
        print(__doc__, file=sys.stderr)
        return 2
    write(Path(argv[2]), (turns if argv[0] == "turns" else chain)(int(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
