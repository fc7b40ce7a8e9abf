"""Codex CLI rollout JSONL (~/.codex/sessions/YYYY/MM/DD/rollout-…-<uuid>.jsonl): read and written.

Each line is {"timestamp", "type", "payload"}. Conversation items are `response_item` lines
(messages, function calls and their outputs, linked by `call_id`); `event_msg` lines are UI
events, except `token_count`, which carries the usage of the last model call; a top-level
`compacted` line replaces the history before it with its `replacement_history`.

    {"timestamp":"…","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\\"command\\":[\\"ls\\"]}","call_id":"call_1"}}

What ctxpipe writes is what Codex itself writes, so Codex resumes it: a cleared or folded tool
output is the same item with its output text replaced; a summary is Codex's own compaction (a
`compacted` line whose replacement_history is the initial context, the recent user messages and
the summary as a user message, then an `event_msg` context_compacted, the kept tail's items again,
and a `token_count` with the new context size); a stage's record is a `token_count` with the size
the stage left, which Codex reads as its current context (so it does not compact again on resume)
and ctxpipe reads by its added `ctxpipe` field (never as a billed call).
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

import orjson

from ..core.blocks import call_id, content_of, input_of, is_text, is_tool_result, is_tool_use, kind_of, name_of, text_of
from ..core.count import Compaction, Marker, is_real_response
from ..core.fields import count, moment, times_from
from ..core.fields import text as field_text
from ..core.jsonl import Entry, dumps
from ..core.model import Finding, Message
from ..core.placeholders import RESTORED_PREFIX
from .base import CTXPIPE_NAMESPACE, SUMMARY_MARKER, CompactionSpan, WholeFileContext, WriteOptions, lone_response

# Tuples, not sets: a line's `type` may be a list or an object, which a set lookup cannot hash.
LINE_TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
TEXT_PARTS = ("input_text", "output_text", "text")
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")
# A user message Codex injects (its initial context), not one the user typed; and what restore adds.
INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md", RESTORED_PREFIX)
# Codex's SUMMARY_PREFIX (codex-rs core/templates/compact/summary_prefix.md, as its 0.171 binary holds it):
# the user message of a compaction is this, a newline, then the summary.
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking process. "
    "You also have access to the state of the tools that were used by that language model. "
    "Use this to build on the work that has already been done and avoid duplicating work. "
    "Here is the summary produced by the other language model, use the information in this summary to assist with your own analysis:"
)
# Codex's compaction keeps the most recent user messages verbatim up to this many tokens
# (COMPACT_USER_MESSAGE_MAX_TOKENS), counted its way: a token per 4 bytes.
USER_MESSAGES_BUDGET = 20_000
# Codex compacts on its own before a turn once its last token_count reaches this share of the model's
# window (0.171.0, measured by tests/test_codex_resume.py: 244,800 for gpt-5.5's 272,000).
AUTO_COMPACT_SHARE = 0.9
# Newer Codex records 95 % of the model's window as model_context_window (its effective window:
# 258,400 for 272,000); older releases recorded the window itself. A recorded figure that is 95 % of a
# whole number of thousands is read as such (no catalog window of Codex's models is one).
EFFECTIVE_WINDOW_PERCENT = 95
CTXPIPE = "ctxpipe"  # the field ctxpipe adds to a token_count it writes: its record, not a billed call


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif _is_image_part(part):
            blocks.append({"type": "image", "source": {"type": "url", "url": field_text(part, "image_url") or ""}})
    return blocks


def _is_image_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "input_image"


def _image_part(block: dict[str, Any]) -> dict[str, Any] | None:
    """An image block as the content part a rollout holds (a data URL for base64 data), or None for
    a source a rollout cannot say."""
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        return {"type": "input_image", "image_url": f"data:{field_text(source, 'media_type') or 'image/png'};base64,{source['data']}"}
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return {"type": "input_image", "image_url": source["url"]}
    return None


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


def _wrapped(output: str) -> dict[str, Any] | None:
    """Older rollouts store the shell result as a JSON string {"output": …, "metadata": …}."""
    if not output.startswith('{"output"'):
        return None
    try:
        wrapped = orjson.loads(output)
    except orjson.JSONDecodeError:
        return None
    return wrapped if isinstance(wrapped, dict) and isinstance(wrapped.get("output"), str) else None


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        wrapped = _wrapped(output)
        return str(wrapped["output"]) if wrapped is not None else output
    if isinstance(output, dict) and isinstance(output.get("output"), str):
        return str(output["output"])
    if isinstance(output, list):
        return "".join(field_text(part, "text") or "" for part in output if isinstance(part, dict))
    return dumps(output).decode()


def _with_output(output: Any, text: str) -> Any:
    """`output` in its own shape (a plain string, the old JSON string, an object, content items)
    holding `text` instead of what it held."""
    if isinstance(output, str):
        wrapped = _wrapped(output)
        return text if wrapped is None else dumps({**wrapped, "output": text}).decode()
    if isinstance(output, dict) and isinstance(output.get("output"), str):
        return {**output, "output": text}
    if isinstance(output, list):
        return [{"type": "input_text", "text": text}]
    return text


def _message_text(item: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in _text_blocks(item.get("content")))


def _is_summary(item: dict[str, Any]) -> bool:
    return item.get("type") == "message" and item.get("role") == "user" and _message_text(item).startswith(SUMMARY_PREFIX)


def _is_injected(item: dict[str, Any]) -> bool:
    return item.get("role") == "user" and _message_text(item).lstrip().startswith(INJECTED)


def _item_message(item: dict[str, Any], position: int, index: int = 0) -> Message | None:
    """The message of one response item; `index` is its place in the line (a compacted line's
    replacement_history holds many), where a stage's edit of its output goes (Message.refs)."""
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "assistant"):
            return None  # developer/system instructions are not conversation turns
        blocks = _text_blocks(item.get("content"))
        summary = _is_summary(item)
        return Message(role, blocks, [position], meta=_is_injected(item) and not summary, compact_summary=summary, refs=[(position, -1)] * len(blocks))
    if kind in CALLS:
        tool_id = field_text(item, "call_id") or field_text(item, "id")
        if kind == "function_call":
            tool_input = _arguments(item.get("arguments"))
        elif kind == "custom_tool_call":
            tool_input = {"input": item.get("input")}
        else:
            tool_input = {"action": item.get("action")}
        name = field_text(item, "name") or ("local_shell" if kind == "local_shell_call" else "tool")
        block = {"type": "tool_use", "id": str(tool_id), "name": str(name), "input": tool_input}
        return Message("assistant", [block], [position], refs=[(position, index)])
    if kind in OUTPUTS:
        output = item.get("output")
        # Content items holding an image (view_image, an MCP result) are blocks, so the image is
        # priced as one; any other output is the text the model read.
        content: str | list[dict[str, Any]] = _text_blocks(output) if isinstance(output, list) and any(map(_is_image_part, output)) else _output_text(output)
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": str(field_text(item, "call_id")), "content": content}
        return Message("user", [result], [position], refs=[(position, index)])
    return None  # reasoning (encrypted), web_search_call, ghost_snapshot, …


def _typed_kept(before: Sequence[Message]) -> list[Message]:
    """The user messages typed before an older summary-only compaction that Codex keeps with it:
    the newest within its budget, in their order (its build_compacted_history)."""
    typed = [m for m in before if m.role == "user" and not m.meta and not m.compact_summary and m.content and all(is_text(b) for b in m.content)]
    kept: list[Message] = []
    budget = USER_MESSAGES_BUDGET
    for message in reversed(typed):
        cost = (len("".join(text_of(b) or "" for b in message.content).encode()) + 3) // 4
        if cost > budget:
            break
        budget -= cost
        kept.insert(0, message)
    return kept


def _kept_before(entries: Sequence[Entry], position: int) -> list[int]:
    """The lines of the user messages a summary-only `compacted` line at `position` keeps (none for
    one with a replacement_history, which holds them itself)."""
    payload = entries[position].obj.get("payload")
    if not isinstance(payload, dict) or isinstance(payload.get("replacement_history"), list) or not isinstance(payload.get("message"), str):
        return []
    left = CodexFormat().messages(entries[: position + 1])
    return sorted({p for m in left if not m.compact_summary for p in m.entries})


def _is_compacted(obj: dict[str, Any]) -> bool:
    return obj.get("type") == "compacted" and isinstance(obj.get("payload"), dict)


def _token_count(obj: dict[str, Any]) -> dict[str, Any] | None:
    payload = obj.get("payload")
    if obj.get("type") == "event_msg" and isinstance(payload, dict) and payload.get("type") == "token_count":
        return payload
    return None


def _record(obj: dict[str, Any]) -> dict[str, Any] | None:
    """What ctxpipe recorded on a token_count it wrote (None: Codex's own, a billed call)."""
    payload = _token_count(obj)
    recorded = payload.get(CTXPIPE) if payload is not None else None
    return recorded if isinstance(recorded, dict) else None


def _usage(info: Any) -> dict[str, Any] | None:
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    if not isinstance(last, dict):
        return None
    given = last.get("input_tokens")
    if type(given) is not int or given < 0:  # no prompt's size (missing, null, a string): it measures nothing, the context is estimated
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


def _openai_usage(usage: Any) -> dict[str, int]:
    """A Messages-API usage as Codex records it (input_tokens includes the cached part)."""
    usage = usage if isinstance(usage, dict) else {}
    cached = count(usage, "cache_read_input_tokens")
    prompt = count(usage, "input_tokens") + count(usage, "cache_creation_input_tokens") + cached
    output = count(usage, "output_tokens")
    return {"input_tokens": prompt, "cached_input_tokens": cached, "output_tokens": output, "reasoning_output_tokens": 0, "total_tokens": prompt + output}


def _last_info(entries: Sequence[Entry]) -> dict[str, Any] | None:
    """The newest token_count info the rollout records (Codex's or ctxpipe's)."""
    for entry in reversed(entries):
        payload = _token_count(entry.obj)
        if payload is not None and isinstance(payload.get("info"), dict):
            info: dict[str, Any] = payload["info"]
            return info
    return None


def _context_size(info: dict[str, Any] | None, tokens: int) -> dict[str, Any]:
    """A token_count info saying the context now holds `tokens`, as Codex writes one after its own
    compaction: the running total kept, the last usage all zeros but its total, the window kept."""
    info = info or {}
    total = info.get("total_token_usage")
    size = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0, "total_tokens": max(0, tokens)}
    return {
        "total_token_usage": total if isinstance(total, dict) else dict(size),
        "last_token_usage": size,
        "model_context_window": info.get("model_context_window") if isinstance(info.get("model_context_window"), int) else None,
    }


def model_window_of(recorded: int) -> int:
    """The model's window behind a recorded model_context_window (see EFFECTIVE_WINDOW_PERCENT)."""
    whole, rest = divmod(recorded * 100, EFFECTIVE_WINDOW_PERCENT)
    return whole if rest == 0 and whole % 1000 == 0 else recorded


class CodexFormat(WholeFileContext):
    name = "codex"
    summary = "Codex CLI rollout JSONL (~/.codex/sessions/…/rollout-*.jsonl)"
    schema = "codex.line.schema.json"
    writable = True
    has_usage = True  # `token_count` events
    has_tree = False
    keeps_history = True  # a `compacted` line is appended; the history above it stays
    state_lines: tuple[str, ...] = ("session_meta", "turn_context")  # the model, the folder, the policies of the turns that follow
    lines_are_messages = False
    summary_preamble = SUMMARY_PREFIX  # Codex's own: the summary it resumes opens so
    compacts_at: float | None = AUTO_COMPACT_SHARE  # of the model's window (recorded_window)

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
            elif kind == "event_msg" and payload.get("type") == "token_count" and not isinstance(payload.get(CTXPIPE), dict):
                usage = _usage(payload.get("info"))
                last_assistant = next((m for m in reversed(messages) if m.role == "assistant"), None)
                if usage is not None and last_assistant is not None:
                    last_assistant.usage = usage
            elif kind == "compacted" and not history:
                messages = self._replacement(payload, position, messages)
        return messages

    def _replacement(self, payload: dict[str, Any], position: int, before: Sequence[Message]) -> list[Message]:
        """The messages a compacted line leaves. The summary is read first, as the message the
        context opens with (Codex sends the kept user messages before it; the count is the same).
        An older line holding only its summary `message` leaves, as Codex rebuilds it, the user
        messages typed before it (the newest, within its budget) and that summary."""
        replacement = payload.get("replacement_history")
        if not isinstance(replacement, list):
            text = payload.get("message")
            if not isinstance(text, str):
                return []
            return [Message("user", [{"type": "text", "text": text}], [position], compact_summary=True), *_typed_kept(before)]
        left = [m for index, item in enumerate(replacement) if isinstance(item, dict) and (m := _item_message(item, position, index)) is not None]
        return [m for m in left if m.compact_summary] + [m for m in left if not m.compact_summary]

    def api_calls(self, entries: Sequence[Entry]) -> list[Message]:
        # One rollout has one chain: every model call is on it, history included.
        return [message for message in self.messages(entries, history=True) if is_real_response(message)]

    def context_positions(self, entries: Sequence[Entry], history: bool = False) -> list[int]:
        """From the last `compacted` line (which stands for the history it replaced) to the end, after
        the lines of the user messages it keeps when it holds only its summary; with history, every
        line (one rollout is one chain)."""
        start = 0 if history else self._last_compacted(entries)
        if start is None:
            return list(range(len(entries)))
        kept = _kept_before(entries, start)
        return [*kept, *range(start, len(entries))]

    def _last_compacted(self, entries: Sequence[Entry]) -> int | None:
        return next((p for p in range(len(entries) - 1, -1, -1) if _is_compacted(entries[p].obj)), None)

    def split_at_compaction(self, entries: Sequence[Entry]) -> tuple[list[Message], list[Message]] | None:
        """The messages above the last `compacted` line and the active context's (restore reads the
        history; Codex re-injects nothing unrecorded, so count adds nothing for it: opening says so)."""
        last = self._last_compacted(entries)
        if last is None:
            return None
        return self.messages(entries[:last]), self.messages(entries)

    def compactions(self, entries: Sequence[Entry]) -> list[CompactionSpan]:
        """Each `compacted` line: it replaced every message above it and left its replacement
        history (or its summary message); Codex's line records no trigger and no size, ctxpipe's
        token_count after it does."""
        every = self.messages(entries, history=True)
        places = [p for p, entry in enumerate(entries) if _is_compacted(entry.obj)]
        spans = []
        for number, place in enumerate(places):
            following = places[number + 1] if number + 1 < len(places) else len(entries)
            left = self.messages(entries[: place + 1])  # the context right after it: what it left
            record = next((r for p in range(place + 1, following) if (r := _record(entries[p].obj)) and r.get("subtype") == SUMMARY_MARKER), None)
            spans.append(
                CompactionSpan(
                    position=place,
                    line=entries[place].line or None,
                    timestamp=field_text(entries[place].obj, "timestamp"),
                    trigger=field_text(record, "trigger") if record else None,
                    pre_tokens=(count(record, "preTokens") or None) if record else None,
                    by="ctxpipe" if record else "codex",
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
        """The token_counts ctxpipe's stages wrote, with the tokens each removed."""
        found = []
        for position, entry in enumerate(entries):
            record = _record(entry.obj)
            if record is not None and count(record, "tokensSaved") > 0:
                found.append(Marker(position, entry.line or None, field_text(record, "subtype") or "marker", count(record, "tokensSaved")))
        return found

    def typed_elsewhere(self, entries: Sequence[Entry]) -> list[tuple[int, Any]]:
        return []  # a user turn is a message item

    def opening(self, entries: Sequence[Entry]) -> Compaction | None:
        """The last `compacted` line: Codex re-injects nothing it did not record. A tail ctxpipe
        kept ends at the token_count it wrote after it."""
        last = self._last_compacted(entries)
        if last is None:
            return None
        kept_until = next((p for p in range(last + 1, len(entries)) if (r := _record(entries[p].obj)) and r.get("subtype") == SUMMARY_MARKER), last)
        return Compaction(last, entries[last].line or None, "nothing", kept_until)

    def is_lone_response(self, entry: Entry) -> bool:
        return lone_response(self, entry)

    def continues_earlier(self, head: Sequence[Entry]) -> bool:
        return False  # its lines name no earlier line

    def recorded_window(self, entries: Sequence[Entry]) -> int | None:
        """The model's window, from the model_context_window every token_count event records (newest
        first): 272,000 for gpt-5 models, whether recorded as is or as its 95 % (258,400)."""
        for entry in reversed(entries):
            payload = _token_count(entry.obj)
            info = payload.get("info") if payload is not None else None
            window = count(info, "model_context_window") if isinstance(info, dict) else 0
            if window > 0:
                return model_window_of(window)
        return None

    def recorded_model(self, entries: Sequence[Entry]) -> str | None:
        """The newest turn_context's model: every turn names it before its first response."""
        for entry in reversed(entries):
            payload = entry.obj.get("payload")
            if entry.obj.get("type") == "turn_context" and isinstance(payload, dict) and isinstance(payload.get("model"), str):
                return str(payload["model"])
        return None

    def recorded_cwd(self, entries: Sequence[Entry]) -> str | None:
        """The working folder of the session: its newest turn_context's, else session_meta's."""
        for entry in reversed(entries):
            payload = entry.obj.get("payload")
            if entry.obj.get("type") in ("turn_context", "session_meta") and isinstance(payload, dict) and isinstance(payload.get("cwd"), str):
                return str(payload["cwd"])
        return None

    def check(self, entries: Sequence[Entry]) -> list[Finding]:
        from ..core.convert import EARLY, unasked_results  # core.convert's rule: loaded when a file is checked (its report types are convert's)

        events: list[tuple[bool, str]] = []  # (is a call, call id), for core.convert's one rule
        lines: list[int] = []
        calls: dict[str, int] = {}
        outputs: dict[str, int] = {}
        for entry in entries:
            payload = entry.obj.get("payload")
            if entry.obj.get("type") != "response_item" or not isinstance(payload, dict):
                continue
            tool_id = payload.get("call_id")
            if not isinstance(tool_id, str):
                continue
            if payload.get("type") in CALLS:
                calls.setdefault(tool_id, entry.line)
                events.append((True, tool_id))
            elif payload.get("type") in OUTPUTS:
                outputs.setdefault(tool_id, entry.line)
                events.append((False, tool_id))
            else:
                continue
            lines.append(entry.line)
        findings: list[Finding] = []
        reported: set[str] = set()  # one finding per call id, at its first bad output
        for index, why in unasked_results(events).items():
            tool_id = events[index][1]
            if tool_id not in reported:
                reported.add(tool_id)
                findings.append(
                    Finding("error", "result-before-use", f"output for call {tool_id} comes before its call (line {calls[tool_id]})", lines[index])
                    if why == EARLY
                    else Finding("error", "orphan-tool-result", f"output for call {tool_id} has no call", lines[index])
                )
        findings += [
            Finding("warning", "unanswered-tool-use", f"call {tool_id} has no output (interrupted?)", line)
            for tool_id, line in calls.items()
            if tool_id not in outputs
        ]
        return findings

    # --- the editor -------------------------------------------------------------------------------

    def replace_blocks(self, entry: Entry, blocks: dict[int, dict[str, Any]]) -> Entry:
        """The output of a tool-output item replaced by the block's text, in the output's own shape;
        on a compacted line, block index n is item n of its replacement_history."""
        obj = dict(entry.obj)
        payload = dict(obj["payload"])
        if obj.get("type") == "compacted":
            items = list(payload["replacement_history"])
            for index, block in blocks.items():
                items[index] = _item_with(items[index], block)
            payload["replacement_history"] = items
        else:
            for block in blocks.values():
                payload = _item_with(payload, block)
        obj["payload"] = payload
        return entry.replace(obj)

    def meta_entries(self, entries: Sequence[Entry], texts: Sequence[str], when: str) -> list[Entry]:
        """User message items holding the injected text (read back as injected by its prefix)."""
        return [_line(when, "response_item", _user_item(text)) for text in texts]

    def marker(self, entries: Sequence[Entry], subtype: str, text: str, metadata_key: str, metadata: dict[str, Any], when: str) -> Entry | None:
        """A token_count saying the context is now the size the stage left (the last recorded usage
        less what it removed), which Codex reads as its current size, with the stage's record in
        its `ctxpipe` field. The summary's record is written by compacted() itself."""
        if subtype == SUMMARY_MARKER:
            return None
        info = _last_info(entries)
        last = info.get("last_token_usage") if info else None
        size = count(last, "total_tokens") if isinstance(last, dict) else 0
        payload = {
            "type": "token_count",
            "info": _context_size(info, size - count(metadata, "tokensSaved")) if info else None,
            "rate_limits": None,
            CTXPIPE: {"subtype": subtype, "content": text, **metadata},
        }
        return _line(when, "event_msg", payload)

    def compacted(self, entries: Sequence[Entry], tail: Sequence[int], summary: str, metadata: dict[str, Any], when: str) -> list[Entry]:
        """Codex's own compaction: a `compacted` line whose replacement_history is the initial
        context, the recent user messages of what it summarizes (verbatim, newest first within
        Codex's budget, in their order) and the summary as a user message; an `event_msg`
        context_compacted; the kept tail's items again (Codex appends them to the replacement);
        then a token_count holding the new context size (metadata's postTokens, once measured)."""
        first_kept = min(tail, default=len(entries))
        if first_kept < len(entries) and _is_compacted(entries[first_kept].obj):
            first_kept += 1  # the tail starts among what the last compaction kept: its line is summarized too
        items: list[dict[str, Any]] = []  # the active context's items before the kept tail
        for position in self.context_positions(entries):
            if position >= first_kept:
                break
            obj = entries[position].obj
            payload = obj.get("payload")
            if not isinstance(payload, dict):
                continue
            if _is_compacted(obj) and isinstance(payload.get("replacement_history"), list):
                items += [item for item in payload["replacement_history"] if isinstance(item, dict)]
            elif obj.get("type") == "response_item":
                items.append(payload)
        initial: list[dict[str, Any]] = []
        for item in items:
            if item.get("type") == "message" and (item.get("role") in ("developer", "system") or _is_injected(item)) and item not in initial:
                initial.append(item)
        typed = [item for item in items if item.get("type") == "message" and item.get("role") == "user" and not _is_injected(item) and not _is_summary(item)]
        kept: list[dict[str, Any]] = []
        budget = USER_MESSAGES_BUDGET
        for item in reversed(typed):
            cost = (len(_message_text(item).encode()) + 3) // 4
            if cost > budget:
                break
            budget -= cost
            kept.insert(0, item)
        # An earlier summary the server made (Codex's remote compaction) is encrypted: ctxpipe cannot
        # fold it into its own, so the item stays, where Codex puts it: after the user messages.
        earlier = [item for item in items if item.get("type") == "compaction"]
        text = summary  # opening with SUMMARY_PREFIX (summary_preamble)
        out = [
            # Codex writes no message beside a replacement_history: the summary is in it.
            _line(when, "compacted", {"message": "", "replacement_history": initial + kept + earlier + [_user_item(text)]}),
            _line(when, "event_msg", {"type": "context_compacted"}),
        ]
        out += [entries[p] for p in tail if entries[p].obj.get("type") == "response_item"]
        record = {"subtype": SUMMARY_MARKER, "content": "Context summarized", "stage": "summarize", "keptUserMessages": len(kept), **metadata}
        info = _context_size(_last_info(entries), count(metadata, "postTokens") or count(metadata, "preTokens"))
        newest = max([when] + [stamp for entry in out if isinstance(stamp := entry.obj.get("timestamp"), str) and moment(stamp) is not None])
        out.append(_line(newest, "event_msg", {"type": "token_count", "info": info, "rate_limits": None, CTXPIPE: record}))
        return out

    def from_messages(self, messages: Sequence[dict[str, Any]], options: WriteOptions) -> list[Entry]:
        """A rollout: session_meta, a turn_context naming the model, then one item a block (text of
        one message together), a token_count after each response that records its usage. Thinking
        is not written: Codex sends reasoning back only as the API encrypted it."""
        start = moment(options.start_time)
        if options.start_time and start is None:
            raise ValueError(f"start_time {options.start_time!r} is not an ISO 8601 time")
        recorded = next((m["timestamp"] for m in messages if moment(m.get("timestamp")) is not None), None)
        clock = times_from(start or moment(recorded))
        first = next(clock)
        session = options.session_id or str(uuidlib.uuid5(CTXPIPE_NAMESPACE, dumps(list(messages)).decode()))
        model = options.model or next((m["model"] for m in messages if isinstance(m.get("model"), str)), None)
        out = [
            _line(
                first,
                "session_meta",
                {
                    "id": session,
                    "timestamp": first,
                    "cwd": options.cwd,
                    "originator": "ctxpipe",
                    "cli_version": "0.0.0",
                    "instructions": None,
                    "source": "cli",
                    "model_provider": None,
                },
            ),
        ]
        if model:
            context = {"cwd": options.cwd, "approval_policy": "on-request", "sandbox_policy": {"type": "read-only"}, "model": model, "summary": "auto"}
            out.append(_line(first, "turn_context", context))
        total = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0, "total_tokens": 0}
        for message in messages:
            when = message["timestamp"] if isinstance(message.get("timestamp"), str) and moment(message["timestamp"]) else next(clock)
            role = message.get("role")
            content = message.get("content")
            parts = [content] if isinstance(content, str) else content if isinstance(content, list) else []
            blocks = [{"type": "text", "text": part} if isinstance(part, str) else part for part in parts if isinstance(part, (str, dict))]
            out += [_line(when, "response_item", item) for item in _items(role == "assistant", blocks)]
            if role == "assistant" and isinstance(message.get("usage"), dict):
                last = _openai_usage(message["usage"])
                total = {key: total[key] + last[key] for key in total}
                info = {"total_token_usage": dict(total), "last_token_usage": last, "model_context_window": None}
                out.append(_line(when, "event_msg", {"type": "token_count", "info": info, "rate_limits": None}))
        return out


def _items(assistant: bool, blocks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The response items of one message's blocks: a run of text (and, from the user, images) is
    one message item, a tool_use a function_call, a tool_result a function_call_output, its images
    kept as content items (thinking and the rest are not written)."""
    items: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for block in [*blocks, None]:
        if block is not None and is_text(block):
            texts.append({"type": "output_text" if assistant else "input_text", "text": text_of(block) or ""})
            continue
        if block is not None and not assistant and kind_of(block) == "image" and (part := _image_part(block)) is not None:
            texts.append(part)
            continue
        if texts:
            items.append({"type": "message", "role": "assistant" if assistant else "user", "content": texts})
            texts = []
        if block is not None and is_tool_use(block):
            arguments = dumps(input_of(block) if input_of(block) is not None else {}).decode()
            items.append({"type": "function_call", "name": name_of(block) or "tool", "arguments": arguments, "call_id": str(call_id(block))})
        elif block is not None and is_tool_result(block):
            result = content_of(block)
            pieces = [piece for piece in result if isinstance(piece, dict)] if isinstance(result, list) else []
            output: Any = result if isinstance(result, str) else "".join(text_of(piece) or "" for piece in pieces)
            if any(kind_of(piece) == "image" and _image_part(piece) is not None for piece in pieces):  # the text and images as content items, in order
                output = [part for piece in pieces if (part := _output_part(piece)) is not None]
            items.append({"type": "function_call_output", "call_id": str(call_id(block)), "output": output})
    return items


def _output_part(piece: dict[str, Any]) -> dict[str, Any] | None:
    if is_text(piece):
        return {"type": "input_text", "text": text_of(piece) or ""}
    return _image_part(piece) if kind_of(piece) == "image" else None


def _line(when: str, kind: str, payload: dict[str, Any]) -> Entry:
    return Entry({"timestamp": when, "type": kind, "payload": payload})


def _user_item(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _item_with(item: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """A tool-output item holding the (cleared or folded) block's text in its output's own shape."""
    if item.get("type") not in OUTPUTS:
        return item  # never: stages replace tool results only
    content = content_of(block)
    text = content if isinstance(content, str) else dumps(content).decode()
    return {**item, "output": _with_output(item.get("output"), text)}


FORMAT = CodexFormat()
