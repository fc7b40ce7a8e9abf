"""Codex CLI rollout JSONL (~/.codex/sessions/YYYY/MM/DD/rollout-…-<uuid>.jsonl), read only: a
reader without an editor (core.transcript_format).

Each line is {"timestamp", "type", "payload"}. Conversation items are `response_item` lines
(messages, function calls and their outputs, linked by `call_id`); `event_msg` lines are UI
events, except `token_count`, which carries the usage of the last model call; a top-level
`compacted` line replaces the history before it.

    {"timestamp":"…","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\\"command\\":[\\"ls\\"]}","call_id":"call_1"}}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from ..core.convert import EARLY, unasked_results
from ..core.count import Compaction, Marker, is_real_response
from ..core.fields import count
from ..core.fields import text as field_text
from ..core.jsonl import Entry, dumps
from ..core.model import Finding, Message
from .base import CompactionSpan, WholeFileContext, lone_response

# Tuples, not sets: a line's `type` may be a list or an object, which a set lookup cannot hash.
LINE_TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
TEXT_PARTS = ("input_text", "output_text", "text")


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif isinstance(part, dict) and part.get("type") == "input_image":
            blocks.append({"type": "image", "source": {"type": "url", "url": field_text(part, "image_url") or ""}})
    return blocks


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {"arguments": raw}
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    return {}


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        # Older rollouts store the shell result as a JSON string {"output": …, "metadata": …}.
        if output.startswith('{"output"'):
            try:
                wrapped = orjson.loads(output)
            except orjson.JSONDecodeError:
                return output
            if isinstance(wrapped, dict) and isinstance(wrapped.get("output"), str):
                return str(wrapped["output"])
        return output
    if isinstance(output, dict) and isinstance(output.get("output"), str):
        return str(output["output"])
    if isinstance(output, list):
        return "".join(field_text(part, "text") or "" for part in output if isinstance(part, dict))
    return dumps(output).decode()


def _item_message(item: dict[str, Any], position: int) -> Message | None:
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "assistant"):
            return None  # developer/system instructions are not conversation turns
        blocks = _text_blocks(item.get("content"))
        text = "".join(b.get("text", "") for b in blocks)
        injected = role == "user" and text.lstrip().startswith(("<environment_context>", "<user_instructions>", "# AGENTS.md"))
        return Message(role, blocks, [position], meta=injected)
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        call_id = field_text(item, "call_id") or field_text(item, "id")
        if kind == "function_call":
            tool_input = _arguments(item.get("arguments"))
        elif kind == "custom_tool_call":
            tool_input = {"input": item.get("input")}
        else:
            tool_input = {"action": item.get("action")}
        name = field_text(item, "name") or ("local_shell" if kind == "local_shell_call" else "tool")
        return Message("assistant", [{"type": "tool_use", "id": str(call_id), "name": str(name), "input": tool_input}], [position])
    if kind in ("function_call_output", "custom_tool_call_output"):
        block = {"type": "tool_result", "tool_use_id": str(field_text(item, "call_id")), "content": _output_text(item.get("output"))}
        return Message("user", [block], [position])
    return None  # reasoning (encrypted), web_search_call, ghost_snapshot, …


def _is_compacted(obj: dict[str, Any]) -> bool:
    return obj.get("type") == "compacted" and isinstance(obj.get("payload"), dict)


def _usage(info: Any) -> dict[str, Any] | None:
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    if not isinstance(last, dict):
        return None
    total_input = count(last, "input_tokens")
    cached = min(count(last, "cached_input_tokens"), total_input)
    # OpenAI counts cached tokens inside input_tokens; Anthropic's usage keeps them apart.
    return {
        "input_tokens": total_input - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": count(last, "output_tokens"),
    }


class CodexFormat(WholeFileContext):
    name = "codex"
    summary = "Codex CLI rollout JSONL (~/.codex/sessions/…/rollout-*.jsonl), read only"
    schema = "codex.line.schema.json"
    writable = False
    has_usage = True  # `token_count` events
    has_tree = False
    keeps_history = True  # a `compacted` line is appended; the history above it stays
    lines_are_messages = False
    compacts_at: float | None = None  # Claude Code's thresholds (core.budget)

    def sniff(self, obj: dict[str, Any]) -> bool | None:
        return obj.get("type") in LINE_TYPES and isinstance(obj.get("payload"), dict)

    def messages(self, entries: Sequence[Entry], history: bool = False) -> list[Message]:
        messages: list[Message] = []
        model: str | None = None
        for position, entry in enumerate(entries):
            obj = entry.obj
            kind, payload = obj.get("type"), obj.get("payload")
            if not isinstance(payload, dict):
                continue
            if kind == "turn_context" and isinstance(payload.get("model"), str):
                model = payload["model"]
            elif kind == "response_item":
                message = _item_message(payload, position)
                if message is not None:
                    if message.role == "assistant":
                        message.model = model
                    messages.append(message)
            elif kind == "event_msg" and payload.get("type") == "token_count":
                usage = _usage(payload.get("info"))
                last_assistant = next((m for m in reversed(messages) if m.role == "assistant"), None)
                if usage is not None and last_assistant is not None:
                    last_assistant.usage = usage
            elif kind == "compacted" and not history:
                replacement = payload.get("replacement_history")
                messages = []
                if isinstance(replacement, list):
                    for item in replacement:
                        message = _item_message(item, position) if isinstance(item, dict) else None
                        if message is not None:
                            messages.append(message)
                elif isinstance(payload.get("message"), str):
                    messages.append(Message("user", [{"type": "text", "text": payload["message"]}], [position], compact_summary=True))
        return messages

    def api_calls(self, entries: Sequence[Entry]) -> list[Message]:
        # One rollout has one chain: every model call is on it, history included.
        return [message for message in self.messages(entries, history=True) if is_real_response(message)]

    def context_positions(self, entries: Sequence[Entry], history: bool = False) -> list[int]:
        """From the last `compacted` line (which stands for the history it replaced) to the end;
        with history, every line (one rollout is one chain)."""
        start = 0 if history else next((p for p in range(len(entries) - 1, -1, -1) if _is_compacted(entries[p].obj)), 0)
        return list(range(start, len(entries)))

    def split_at_compaction(self, entries: Sequence[Entry]) -> tuple[list[Message], list[Message]] | None:
        return None  # Codex re-injects nothing unrecorded after its own compaction: there is nothing to restore or add

    def compactions(self, entries: Sequence[Entry]) -> list[CompactionSpan]:
        """Each `compacted` line: it replaced every message above it and left its replacement
        history (or its summary message); its line records no trigger and no size."""
        every = self.messages(entries, history=True)
        places = [p for p, entry in enumerate(entries) if _is_compacted(entry.obj)]
        spans = []
        for number, place in enumerate(places):
            following = places[number + 1] if number + 1 < len(places) else len(entries)
            left = self.messages(entries[: place + 1])  # the context right after it: what it left
            spans.append(
                CompactionSpan(
                    position=place,
                    line=entries[place].line or None,
                    timestamp=field_text(entries[place].obj, "timestamp"),
                    trigger=None,
                    pre_tokens=None,
                    by="codex",
                    before=[m for m in every if m.entries and m.entries[0] < place],
                    left=left,
                    after=[m for m in every if m.entries and place < m.entries[0] < following],
                    typed_before=[],
                )
            )
        return spans

    def boundary_metadata(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        return None  # a `compacted` line carries its replacement history, which messages() reads in place

    def markers(self, entries: Sequence[Entry]) -> list[Marker]:
        return []

    def typed_elsewhere(self, entries: Sequence[Entry]) -> list[tuple[int, Any]]:
        return []  # a user turn is a message item

    def opening(self, entries: Sequence[Entry]) -> Compaction | None:
        return None  # Codex records its own compaction's usage in the next turn; nothing is re-injected unrecorded

    def is_lone_response(self, entry: Entry) -> bool:
        return lone_response(self, entry)

    def continues_earlier(self, head: Sequence[Entry]) -> bool:
        return False  # its lines name no earlier line

    def recorded_window(self, entries: Sequence[Entry]) -> int | None:
        """Codex writes the model's window into every token_count event (258,400 or 272,000 for its models)."""
        for entry in reversed(entries):
            payload = entry.obj.get("payload") if isinstance(entry.obj, dict) else None
            info = payload.get("info") if isinstance(payload, dict) and payload.get("type") == "token_count" else None
            window = count(info, "model_context_window") if isinstance(info, dict) else 0
            if window > 0:
                return window
        return None

    def check(self, entries: Sequence[Entry]) -> list[Finding]:
        events: list[tuple[bool, str]] = []  # (is a call, call id), for core.convert's one rule
        lines: list[int] = []
        calls: dict[str, int] = {}
        outputs: dict[str, int] = {}
        for entry in entries:
            payload = entry.obj.get("payload")
            if entry.obj.get("type") != "response_item" or not isinstance(payload, dict):
                continue
            call_id = payload.get("call_id")
            if not isinstance(call_id, str):
                continue
            if payload.get("type") in ("function_call", "custom_tool_call", "local_shell_call"):
                calls.setdefault(call_id, entry.line)
                events.append((True, call_id))
            elif payload.get("type") in ("function_call_output", "custom_tool_call_output"):
                outputs.setdefault(call_id, entry.line)
                events.append((False, call_id))
            else:
                continue
            lines.append(entry.line)
        findings: list[Finding] = []
        reported: set[str] = set()  # one finding per call id, at its first bad output
        for index, why in unasked_results(events).items():
            call_id = events[index][1]
            if call_id not in reported:
                reported.add(call_id)
                findings.append(
                    Finding("error", "result-before-use", f"output for call {call_id} comes before its call (line {calls[call_id]})", lines[index])
                    if why == EARLY
                    else Finding("error", "orphan-tool-result", f"output for call {call_id} has no call", lines[index])
                )
        findings += [
            Finding("warning", "unanswered-tool-use", f"call {call_id} has no output (interrupted?)", line)
            for call_id, line in calls.items()
            if call_id not in outputs
        ]
        return findings


FORMAT = CodexFormat()
