"""Gemini CLI chats (~/.gemini/tmp/<project hash>/chats/session-<time>-<id8>.json or .jsonl), read
only: a reader without an editor (core.transcript_format).

Gemini CLI (google-gemini/gemini-cli, packages/core/src/services/chatRecordingService.ts) keeps a
session as one ConversationRecord: {sessionId, projectHash, startTime, lastUpdated, messages, …},
each message {id, timestamp, type: user|gemini|info|error|warning, content, …}, a `gemini` one with
its `toolCalls` [{id, name, args, result, status, …}], `thoughts`, `tokens` {input, output, cached,
thoughts, tool, total} (the API's usageMetadata) and `model`. Until 2026-04 it wrote the record whole,
`JSON.stringify(record, null, 2)`, into a .json file; since, as JSONL (.jsonl): the record's metadata on
the first line, then a line a message (a message written again under its id replaces it in place),
`{"$set": {…}}` lines updating the metadata (a `messages` array among them replaces every message)
and `{"$rewindTo": id}` lines dropping that message and all after it.

The reading layer is line-oriented, so a .json chat is read as Gemini CLI itself migrates one to
JSONL (ChatRecordingService.initialize): its metadata on one line, then a line a message, each
message on the line where it starts in the document (document_lines): every error and finding names
the line of the file. From there one reader serves both forms.

Gemini CLI compresses a chat once its last prompt reaches a fraction of the model's window
(chatCompressionService.ts: DEFAULT_COMPRESSION_TOKEN_THRESHOLD 0.5, the `model.compressionThreshold`
setting): the summary becomes a user turn opening with `<state_snapshot>`, recorded in the .jsonl
form by a `$set` of the messages that follow the compression; the CLI also records an `info` message
saying so ("Context compressed from 61% to 9%."). The .json form keeps every message and records the
info line only: what the compression kept is not in the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from ..core.count import Compaction, Marker, is_real_response
from ..core.errors import InputError
from ..core.fields import count
from ..core.fields import text as field_text
from ..core.jsonl import BOM, Entry, as_text, dumps
from ..core.model import Finding, Message
from .base import CompactionSpan, WholeFileContext, lone_response

MESSAGE_TYPES = ("user", "gemini", "info", "error", "warning")
SPOKEN = ("user", "gemini")  # the types sent to the model; info, error and warning are the CLI's own lines
# chatCompressionService.ts: Gemini CLI compresses at this fraction of tokenLimit(model) unless
# `model.compressionThreshold` (or a server-side experiment) says otherwise.
COMPRESSION_THRESHOLD = 0.5
SNAPSHOT = "<state_snapshot>"  # how the summary a compression writes opens (core/prompts.ts)
# The info line the CLI records after an automatic compression (useGeminiStream.ts): since 2026-03 in
# percent of the window, before in tokens.
COMPRESSED = re.compile(
    r"Context compressed from \d+% to \d+%\."
    r"|IMPORTANT: This conversation exceeded the compress threshold\. "
)


def _is_metadata(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("sessionId"), str) and isinstance(obj.get("projectHash"), str)


def _is_record(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("id"), str)


# --- the document form, as lines ----------------------------------------------------------------


def is_document(head: bytes) -> bool:
    """Whether the input's first bytes start a Gemini CLI chat written as one pretty-printed document:
    a first line `{` alone (JSON.stringify(record, null, 2)) and the record's two keys in the head.
    Cheap, for every input: a JSONL file's first line is a whole object."""
    text = head.removeprefix(BOM).lstrip(b" \t\r\n")
    if text[:2] == b'{"':  # a JSONL file's first object (its first key on the same line): told without splitting the head
        return False
    line = text.split(b"\n", 1)[0].strip()
    return line == b"{" and b'"sessionId"' in text and b'"projectHash"' in text


def _document_error(source: str, data: bytes, error: orjson.JSONDecodeError) -> InputError:
    if error.msg.startswith("depth limit"):
        return InputError(source, error.lineno, "a Gemini CLI chat nested deeper than a JSON reader takes")
    if not data[error.pos :].strip(b" \t\r\n"):
        return InputError(source, error.lineno, "a Gemini CLI chat cut off: the file ends inside the document (it was probably being written)")
    return InputError(source, error.lineno, f"a Gemini CLI chat that is not valid JSON: {error.msg} (column {error.colno})")


def _message_lines(data: bytes, messages: int) -> list[int] | None:
    """The line each message starts on in a document written as JSON.stringify(record, null, 2)
    writes it: the lines `    {` between `  "messages": [` and its `  ]`. None when the document is
    laid out otherwise."""
    lines = data.split(b"\n")
    starts: list[int] = []
    inside = False
    for number, line in enumerate(lines, 1):
        line = line.rstrip(b"\r")
        if not inside:
            inside = line.startswith(b'  "messages": [')
            if inside and line.endswith(b"[]"):
                break
        elif line in (b"  ]", b"  ],"):
            break
        elif line == b"    {":
            starts.append(number)
    return starts if len(starts) == messages else None


def document_lines(data: bytes, source: str) -> bytes | None:
    """A Gemini CLI chat written as one document (is_document), as the JSONL its own migration
    writes: the metadata, then a line a message, each on the line where it starts in the document
    (blank lines between, which every reader skips and counts), so a line number names the file's
    line. None when `data` is no such chat (the caller goes on to refuse it as a document). A chat
    that is not whole JSON is an InputError naming the line where it breaks."""
    body = data.removeprefix(BOM)
    try:
        record = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _document_error(source, body, exc) from None
    if not isinstance(record, dict) or not _is_metadata(record):
        return None
    messages = record.get("messages")
    if not isinstance(messages, list):
        return None
    starts = _message_lines(body, len(messages))
    if starts is None:  # laid out otherwise: the whole record on its first line, as Gemini CLI reads that too
        return dumps(record) + b"\n"
    out = [dumps({key: value for key, value in record.items() if key != "messages"})]
    line = 1
    for start, message in zip(starts, messages, strict=True):
        out.append(b"\n" * (start - line) + (dumps(message) if isinstance(message, dict) else b'{"$invalid":' + dumps(message) + b"}"))
        line = start
    return b"".join(out) + b"\n"


# --- the conversation the lines make -------------------------------------------------------------


def _conversation(entries: Sequence[Entry], history: bool) -> list[tuple[int, dict[str, Any]]]:
    """(position of the line, message record) of the chat as Gemini CLI loads it
    (loadConversationRecord): a message written again replaces the earlier one in its place, a
    `$set` of `messages` replaces them all, `$rewindTo` drops that message and every one after it (all
    of them when the id is not there). With `history`, every message the file records, each once
    in its last version at the line it first came on, nothing dropped (what was sent and billed
    before a rewind or a compression)."""
    found: dict[str, tuple[int, dict[str, Any]]] = {}

    def put(position: int, record: dict[str, Any]) -> None:
        first = found.get(record["id"]) if history else None
        found[record["id"]] = (first[0] if first else position, record)

    for position, entry in enumerate(entries):
        obj = entry.obj
        rewind = obj.get("$rewindTo")
        update = obj.get("$set")
        if isinstance(rewind, str):
            if history:
                continue
            ids = list(found)
            cut = ids.index(rewind) if rewind in found else 0
            for gone in ids[cut:]:
                del found[gone]
        elif isinstance(update, dict):
            replaced = update.get("messages")
            if isinstance(replaced, list):
                if not history:
                    found.clear()
                for record in replaced:
                    if _is_record(record):
                        put(position, record)
        elif _is_metadata(obj):
            records = obj.get("messages")  # the whole record on one line (Gemini CLI reads that too)
            for record in records if isinstance(records, list) else []:
                if _is_record(record):
                    put(position, record)
        elif _is_record(obj):
            put(position, obj)
    return list(found.values())


def _parts(content: Any) -> list[Any]:
    """A PartListUnion as a list of parts: a string is one text part."""
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if isinstance(content, dict):
        return [content]
    return content if isinstance(content, list) else []


def _response_text(response: Any) -> str:
    """A functionResponse's response as the model reads it: its output (or error) when a string."""
    if isinstance(response, dict):
        for key in ("output", "error", "content"):
            if isinstance(response.get(key), str):
                return str(response[key])
    return as_text(response)


def _result_block(part: dict[str, Any], error: bool = False) -> dict[str, Any] | None:
    call = part.get("functionResponse")
    if not isinstance(call, dict):
        return None
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": field_text(call, "id") or "", "content": _response_text(call.get("response"))}
    if error:
        block["is_error"] = True
    return block


def _blocks(content: Any, answered: set[str]) -> list[dict[str, Any]]:
    """The blocks of a message's parts: text, the model's thought parts, tool results (those a tool
    call's record already answered left out), inline data as what it is."""
    blocks: list[dict[str, Any]] = []
    for part in _parts(content):
        if isinstance(part, str):
            blocks.append({"type": "text", "text": part})
        elif not isinstance(part, dict):
            continue
        elif isinstance(part.get("text"), str):
            blocks.append({"type": "thinking", "thinking": part["text"]} if part.get("thought") is True else {"type": "text", "text": part["text"]})
        elif (result := _result_block(part)) is not None:
            if result["tool_use_id"] not in answered:
                blocks.append(result)
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            args = call.get("args")
            blocks.append(
                {
                    "type": "tool_use",
                    "id": field_text(call, "id") or "",
                    "name": field_text(call, "name") or "tool",
                    "input": args if isinstance(args, dict) else {},
                }
            )
        elif isinstance(part.get("inlineData"), dict):
            blocks.append({"type": "text", "text": f"[{field_text(part['inlineData'], 'mimeType') or 'inline data'}]"})
    return blocks


def _usage(tokens: Any) -> dict[str, Any] | None:
    """A reply's `tokens` (usageMetadata) in the Messages API's terms. Gemini counts the cached part
    inside `input` (promptTokenCount); `thoughts` and `tool` (tool-use prompt) are billed but not part
    of the chat the next prompt holds. So the top-level figures are what was billed, and the one
    `iterations` entry what measures the context (core.count.context_usage): the prompt and the reply."""
    if not isinstance(tokens, dict):
        return None
    prompt = count(tokens, "input")
    cached = min(count(tokens, "cached"), prompt)
    output = count(tokens, "output")
    return {
        "input_tokens": prompt - cached + count(tokens, "tool"),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": output + count(tokens, "thoughts"),
        "iterations": [{"input_tokens": prompt - cached, "cache_read_input_tokens": cached, "output_tokens": output}],
    }


def _calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    calls = record.get("toolCalls")
    return [call for call in calls if isinstance(call, dict)] if isinstance(calls, list) else []


def _thought_text(thought: Any) -> str | None:
    if not isinstance(thought, dict):
        return None
    subject, description = field_text(thought, "subject"), field_text(thought, "description")
    return f"{subject}: {description}" if subject and description else subject or description


def _reply(record: dict[str, Any], position: int) -> Iterator[Message]:
    """A `gemini` record: the response (its thoughts, text and calls, with its tokens), then the
    results its tool calls record, as the user turn that answered them."""
    thoughts = record.get("thoughts")
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": text} for text in map(_thought_text, thoughts if isinstance(thoughts, list) else []) if text
    ]
    blocks += _blocks(record.get("content"), set())
    results: list[dict[str, Any]] = []
    for call in _calls(record):
        call_id = field_text(call, "id") or ""
        args = call.get("args")
        blocks.append({"type": "tool_use", "id": call_id, "name": field_text(call, "name") or "tool", "input": args if isinstance(args, dict) else {}})
        error = call.get("status") == "error"
        parts = [part for part in _parts(call.get("result")) if isinstance(part, dict)]
        answers = [block for part in parts if (block := _result_block(part, error)) is not None]
        if not answers and parts:  # a result given as text, not as functionResponse parts
            text = "".join(part["text"] for part in parts if isinstance(part.get("text"), str))
            answers = [{"type": "tool_result", "tool_use_id": call_id, "content": text, **({"is_error": True} if error else {})}]
        results += [{**block, "tool_use_id": block["tool_use_id"] or call_id} for block in answers]
    usage = _usage(record.get("tokens"))
    if blocks or usage is not None:
        yield Message("assistant", blocks, [position], message_id=field_text(record, "id"), usage=usage, model=field_text(record, "model"))
    if results:
        yield Message("user", results, [position])


def _answered(records: Sequence[tuple[int, dict[str, Any]]]) -> set[str]:
    """The call ids whose results a tool call's record holds (a later user turn may hold them again)."""
    return {
        field_text(part["functionResponse"], "id") or ""
        for _, record in records
        for call in _calls(record)
        for part in _parts(call.get("result"))
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict)
    }


def _messages(records: Sequence[tuple[int, dict[str, Any]]], compressions: frozenset[int] = frozenset()) -> list[Message]:
    """The records as messages; a reply a compression kept (placed by the `$set` at one of the
    `compressions`) has its usage marked stale: it measured the context the compression replaced."""
    answered = _answered(records)
    messages: list[Message] = []
    for position, record in records:
        kind = record.get("type")
        if kind == "gemini":
            for message in _reply(record, position):
                message.usage_stale = position in compressions and message.usage is not None
                messages.append(message)
        elif kind == "user":
            blocks = _blocks(record.get("content"), answered)
            if blocks:
                text = "".join(block.get("text", "") for block in blocks)
                messages.append(Message("user", blocks, [position], message_id=field_text(record, "id"), compact_summary=text.lstrip().startswith(SNAPSHOT)))
    return messages


def _snapshot_set(obj: dict[str, Any]) -> list[Any] | None:
    """The messages of a `$set` that a compression wrote (one opens with the summary), else None."""
    update = obj.get("$set")
    replaced = update.get("messages") if isinstance(update, dict) else None
    if not isinstance(replaced, list):
        return None
    for record in replaced:
        if _is_record(record) and record.get("type") == "user":
            text = "".join(part.get("text", "") for part in _parts(record.get("content")) if isinstance(part, dict) and isinstance(part.get("text"), str))
            if text.lstrip().startswith(SNAPSHOT):
                return replaced
    return None


def _compressed_info(obj: dict[str, Any]) -> re.Match[str] | None:
    if not _is_record(obj) or obj.get("type") != "info":
        return None
    content = obj.get("content")
    return COMPRESSED.match(content) if isinstance(content, str) else None


class GeminiFormat(WholeFileContext):
    name = "gemini"
    summary = "Gemini CLI chat (~/.gemini/tmp/<hash>/chats/session-*.json or .jsonl), read only"
    schema = "gemini.line.schema.json"
    writable = False
    has_usage = True  # `tokens` on its replies
    has_tree = False
    keeps_history = False  # a compression replaces the messages (`$set`); the .json form keeps them all, unmarked
    state_lines: tuple[str, ...] = ()  # read only: never cut
    lines_are_messages = False
    compacts_at: float | None = COMPRESSION_THRESHOLD

    def sniff(self, obj: dict[str, Any]) -> bool | None:
        if _is_metadata(obj) or isinstance(obj.get("$set"), dict) or isinstance(obj.get("$rewindTo"), str):
            return True
        if _is_record(obj) and obj.get("type") in MESSAGE_TYPES and "uuid" not in obj and "message" not in obj:
            return True if obj.get("type") == "gemini" else None
        return None

    def messages(self, entries: Sequence[Entry], history: bool = False) -> list[Message]:
        if history:  # every reply as billed
            return _messages(_conversation(entries, history))
        records = _conversation(entries, history)
        placed = {position for position, _ in records}
        return _messages(records, frozenset(p for p in placed if _snapshot_set(entries[p].obj) is not None))

    def context_positions(self, entries: Sequence[Entry], history: bool = False) -> list[int]:
        return sorted({position for position, _ in _conversation(entries, history)})

    def api_calls(self, entries: Sequence[Entry]) -> list[Message]:
        # Every reply the file records was billed, a rewound one too (each once: its last version).
        return [message for message in self.messages(entries, history=True) if is_real_response(message)]

    def split_at_compaction(self, entries: Sequence[Entry]) -> tuple[list[Message], list[Message]] | None:
        return None  # Gemini CLI re-injects nothing unrecorded after a compression

    def boundary_metadata(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        return None

    def markers(self, entries: Sequence[Entry]) -> list[Marker]:
        return []

    def opening(self, entries: Sequence[Entry]) -> Compaction | None:
        return None

    def compactions(self, entries: Sequence[Entry]) -> list[CompactionSpan]:
        """Each compression whose summary the file holds: a `$set` of messages opening with a
        `<state_snapshot>` turn (the .jsonl form). The info line the CLI writes after an automatic
        one, when it follows, says it was automatic. Its size before is the last prompt recorded
        before it, which is what Gemini CLI compares with its threshold (getLastPromptTokenCount).
        The .json form holds only that info line, not what the compression kept: nothing to audit."""
        places = [p for p, entry in enumerate(entries) if _snapshot_set(entry.obj) is not None]
        every = self.messages(entries, history=True)
        spans = []
        for number, place in enumerate(places):
            following = places[number + 1] if number + 1 < len(places) else len(entries)
            info = next((match for entry in entries[place + 1 : following] if (match := _compressed_info(entry.obj)) is not None), None)
            before = [m for m in every if m.entries and m.entries[0] < place]
            last = next((m for m in reversed(before) if is_real_response(m)), None)
            prompt = last.usage["iterations"][0] if last is not None and last.usage else None
            update = entries[place].obj.get("$set")
            spans.append(
                CompactionSpan(
                    position=place,
                    line=entries[place].line or None,
                    timestamp=field_text(update, "lastUpdated") if isinstance(update, dict) else None,
                    trigger="auto" if info is not None else None,
                    pre_tokens=count(prompt, "input_tokens") + count(prompt, "cache_read_input_tokens") if prompt else None,
                    by="gemini-cli",
                    before=before,
                    left=self.messages(entries[: place + 1]),
                    after=[m for m in self.messages(entries[:following]) if m.entries and m.entries[0] > place],
                    typed_before=[],
                )
            )
        return spans

    def typed_elsewhere(self, entries: Sequence[Entry]) -> list[tuple[int, Any]]:
        return []

    def recorded_window(self, entries: Sequence[Entry]) -> int | None:
        return None  # a chat records no window: the model's name decides (core.budget.OTHER_WINDOWS)

    def recorded_cwd(self, entries: Sequence[Entry]) -> str | None:
        return None  # a chat records its project folder only as a hash (projectHash)

    def recorded_model(self, entries: Sequence[Entry]) -> str | None:
        return None  # only a reply names its model

    def is_lone_response(self, entry: Entry) -> bool:
        return lone_response(self, entry)

    def continues_earlier(self, head: Sequence[Entry]) -> bool:
        return False

    def check(self, entries: Sequence[Entry]) -> list[Finding]:
        findings: list[Finding] = []
        seen: set[str] = set()
        if entries and not _is_metadata(entries[0].obj):
            findings.append(Finding("warning", "no-metadata", "the chat does not open with its metadata (sessionId, projectHash)", entries[0].line))
        for entry in entries:
            obj = entry.obj
            if "$invalid" in obj:
                findings.append(Finding("error", "not-a-message", "a message of the chat's `messages` is not an object", entry.line))
            rewind = obj.get("$rewindTo")
            if isinstance(rewind, str) and rewind not in seen:
                findings.append(
                    Finding(
                        "warning",
                        "rewind-unknown",
                        f"rewinds to message {rewind}, which no line before it holds: Gemini CLI then drops every message",
                        entry.line,
                    )
                )
            if _is_record(obj):
                seen.add(obj["id"])
                if obj.get("type") not in MESSAGE_TYPES:
                    findings.append(Finding("warning", "unknown-type", f"message {obj['id']} has a type Gemini CLI does not write", entry.line))
        return findings


FORMAT = GeminiFormat()
