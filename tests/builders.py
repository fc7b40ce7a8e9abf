"""Small hand-built Claude Code sessions for count/warn tests, where every token is known.

Lines look like Claude Code writes them: compact JSON, one content block per assistant line (the
lines of one response share message.id; output_tokens grows on the later lines), a uuid/parentUuid
chain, sidechains, system markers and compact boundaries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

SONNET = "claude-sonnet-4-5-20250929"
SESSION = "55555555-5555-4555-8555-555555555555"
_SAME = object()


def usage(total: int, output: int = 50, input_tokens: int = 5, cache_creation: int | None = None) -> dict[str, int]:
    """A usage dict whose input + cache_creation + cache_read + output is exactly `total`."""
    creation = min(1000, max(0, total - input_tokens - output)) if cache_creation is None else cache_creation
    read = total - input_tokens - creation - output
    assert read >= 0, (total, output)
    return {"input_tokens": input_tokens, "cache_creation_input_tokens": creation, "cache_read_input_tokens": read, "output_tokens": output}


class Session:
    def __init__(self, model: str = SONNET, version: str = "2.1.39") -> None:
        self.model = model
        self.version = version
        self.lines: list[dict[str, Any]] = []
        self.last: str | None = None  # uuid of the last main-chain line
        self._uuids = 0
        self._messages = 0
        self._tools = 0

    def uuid(self) -> str:
        self._uuids += 1
        return f"00000000-0000-4000-8000-{self._uuids:012d}"

    def line(self, kind: str, parent: Any = _SAME, sidechain: bool = False, **fields: Any) -> str:
        parent = self.last if parent is _SAME else parent
        line_uuid = self.uuid()
        second = len(self.lines)
        self.lines.append(
            {
                "parentUuid": parent,
                "isSidechain": sidechain,
                "userType": "external",
                "cwd": "/home/dev/app",
                "sessionId": SESSION,
                "version": self.version,
                "gitBranch": "main",
                "type": kind,
                **fields,
                "uuid": line_uuid,
                "timestamp": f"2026-05-04T10:{second // 60 % 60:02d}:{second % 60:02d}.000Z",
            }
        )
        if not sidechain:
            self.last = line_uuid
        return line_uuid

    def user(self, content: Any, parent: Any = _SAME, sidechain: bool = False, **fields: Any) -> str:
        return self.line("user", parent, sidechain, message={"role": "user", "content": content}, **fields)

    def tool_id(self) -> str:
        self._tools += 1
        return f"toolu_01T{self._tools:05d}"

    def response(
        self,
        blocks: list[dict[str, Any]],
        final_usage: dict[str, int] | None,
        outputs: list[int] | None = None,
        model: Any = _SAME,
        sidechain: bool = False,
        parent: Any = _SAME,
        message_id: str | None = None,
    ) -> list[str]:
        """One line per block; every line carries the usage, output_tokens from `outputs` (the last
        line gets final_usage's own output_tokens unless `outputs` says otherwise)."""
        self._messages += 1
        message_id = message_id or f"msg_01R{self._messages:05d}"
        model = self.model if model is _SAME else model
        uuids = []
        for number, block in enumerate(blocks):
            payload: dict[str, Any] = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [block],
                "stop_reason": None,
                "stop_sequence": None,
            }
            if final_usage is not None:
                line_usage = dict(final_usage)
                if outputs is not None:
                    line_usage["output_tokens"] = outputs[number]
                elif number < len(blocks) - 1:
                    line_usage["output_tokens"] = 1
                payload["usage"] = line_usage
            uuids.append(self.line("assistant", parent if number == 0 else _SAME, sidechain, message=payload, requestId=f"req_{message_id}"))
            if sidechain:
                parent = uuids[-1]
        return uuids

    def text(self, text: str, final_usage: dict[str, int] | None, **kwargs: Any) -> list[str]:
        return self.response([{"type": "text", "text": text}], final_usage, **kwargs)

    def tool_result(self, tool_id: str, content: Any, parent: Any = _SAME, sidechain: bool = False) -> str:
        return self.user([{"tool_use_id": tool_id, "type": "tool_result", "content": content}], parent, sidechain, toolUseResult={"stdout": "", "stderr": ""})

    def system(self, subtype: str, **fields: Any) -> str:
        return self.line("system", subtype=subtype, isMeta=False, level="info", **fields)

    def compact(self, summary: str = "Summary: the user is adding rate limiting.") -> str:
        previous = self.last
        boundary = self.line(
            "system",
            None,
            subtype="compact_boundary",
            content="Conversation compacted",
            isMeta=False,
            level="info",
            logicalParentUuid=previous,
            compactMetadata={"trigger": "auto", "preTokens": 150000},
        )
        self.user(
            "This session is being continued from a previous conversation that ran out of context. " + summary,
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
        )
        return boundary

    def microcompact(self, saved: int) -> str:
        return self.system(
            "microcompact_boundary",
            content="Context microcompacted",
            microcompactMetadata={"trigger": "auto", "preTokens": 20000, "tokensSaved": saved, "compactedToolIds": []},
        )

    def raw(self, obj: dict[str, Any]) -> None:
        self.lines.append(obj)

    def to_bytes(self) -> bytes:
        return b"".join(orjson.dumps(line) + b"\n" for line in self.lines)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.to_bytes())
        return path


def simple(total: int, model: str = SONNET, text: str = "Done.", output: int = 50) -> Session:
    """A user question and one answer whose usage adds up to `total` (nothing left to estimate)."""
    session = Session(model)
    session.user("Please check the build.")
    session.text(text, usage(total, output=output))
    return session
