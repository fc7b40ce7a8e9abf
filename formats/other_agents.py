"""Files other coding agents write, which ctxpipe does not read: told from their first bytes, so that
every command refuses one in a line that names it, instead of reading it as a broken Claude Code
transcript (an error a line) or as a valid one of 0 tokens.

OTHER_AGENTS is the one table: each entry names the file and says how it is recognised. The shapes
come from each agent's source (fixtures/other-agents/README.md says where). `examine` is what the
readers call (inputs.detect_format on a buffer, inputs.stream_entries on a stream, line by line);
a file none of them matches goes on to the formats' own detection.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from ..core.errors import InputError

# How much of the input is looked at: a document's first keys are in its first lines, but a
# pretty-printed one may hold a long history before a key that tells it.
HEAD_BYTES = 1 << 20
FIRST_LOOK = 1 << 16  # what a buffer's first look takes: a JSONL file's first line is nearly always within it
BOM = b"\xef\xbb\xbf"
SQLITE = b"SQLite format 3\x00"  # the first bytes of every SQLite database file
# Key paths are kept this many containers deep ("history[].parts" is 3: an object, an array, an
# object): enough for every signature below.
PATH_DEPTH = 3


@dataclass(frozen=True)
class Head:
    """What the signatures look at: the input's first bytes, its first line's JSON value when that
    line holds one, and the key paths of the input when it is one JSON document ("sessionId",
    "history[].role", "[].ts"; only as far as the head reaches)."""

    text: bytes
    first: Any = None
    paths: frozenset[str] | None = None

    def has(self, *paths: str) -> bool:
        return self.paths is not None and all(path in self.paths for path in paths)

    def first_has(self, **types: type) -> bool:
        return isinstance(self.first, dict) and all(isinstance(self.first.get(key), kind) for key, kind in types.items())


@dataclass(frozen=True)
class OtherAgent:
    name: str  # "a Gemini CLI chat": what the message calls the file
    form: str | None  # how it is written, in brackets after the name
    recognised: Callable[[Head], bool]
    hint: str | None = None  # what to do with it instead, when there is something

    def describe(self) -> str:
        return self.name + (f" ({self.form})" if self.form else "")


OTHER_AGENTS: tuple[OtherAgent, ...] = (
    # Gemini CLI's chats (.json and .jsonl) are read: formats/gemini.py.
    # /chat save <tag> (packages/core/src/core/logger.ts): checkpoint-<tag>.json, {history: Content[],
    # authType} pretty-printed, or (older) the Content[] array alone; Content is {role, parts}.
    OtherAgent(
        "a Gemini CLI saved chat",
        "/chat save: the Gemini API history as one JSON document",
        lambda head: head.has("history[].role", "history[].parts") or head.has("[].role", "[].parts"),
    ),
    # Checkpointing (packages/core/src/utils/checkpointUtils.ts): checkpoints/<time>-<file>-<tool>.json,
    # {history, clientHistory, toolCall: {name, args}, commitHash, messageId} pretty-printed.
    OtherAgent(
        "a Gemini CLI checkpoint",
        "saved before a tool edits a file",
        lambda head: head.has("clientHistory") or head.has("toolCall.name", "toolCall.args"),
    ),
    # logs.json (logger.ts): every prompt typed, [{sessionId, messageId, timestamp, type, message}].
    OtherAgent("a Gemini CLI prompt log", "logs.json", lambda head: head.has("[].sessionId", "[].messageId", "[].message")),
    # pi coding agent (badlogic/pi-mono, packages/coding-agent/src/core/session-manager.ts):
    # ~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl whose first line is the header
    # {"type":"session","version":3,"id",…}; its own test: type "session" and a string id.
    OtherAgent(
        "a pi session",
        "pi coding agent, JSONL",
        lambda head: isinstance(head.first, dict) and head.first.get("type") == "session" and isinstance(head.first.get("id"), str),
    ),
    # Cline (cline/cline, src/core/storage/disk.ts until 2026-05, now apps/vscode/…): the files of
    # tasks/<id>/; ui_messages.json is JSON.stringify of [{ts, type: say|ask, say|ask, text, …}].
    OtherAgent("a Cline task's UI messages", "ui_messages.json", lambda head: head.has("[].ts", "[].type") and (head.has("[].say") or head.has("[].ask"))),
    # Its api_conversation_history.json: the Messages-API messages as one JSON array on one line;
    # any such array (a request body's messages saved on their own) looks the same.
    OtherAgent(
        "one JSON array of Messages-API messages",
        "as Cline's api_conversation_history.json",
        lambda head: head.has("[].role", "[].content"),
        hint="`jq -c '.[]'` writes them one a line, the anthropic format",
    ),
    # aider (Aider-AI/aider, aider/io.py): .aider.chat.history.md, Markdown; every run appends
    # "\n# aider chat started at %Y-%m-%d %H:%M:%S\n\n".
    OtherAgent("an aider chat history", "Markdown", lambda head: head.first is None and _first_text_line(head.text).startswith(b"# aider chat started at ")),
    # Some agents keep their chats in a SQLite database (Cursor's state.vscdb, by the tools that export
    # its chats; its source is closed); every such file starts with these bytes.
    OtherAgent("a SQLite database", None, lambda head: head.text.startswith(SQLITE)),
)

# A JSON document no entry above names, written over several lines: not JSONL either way.
DOCUMENT = OtherAgent("one JSON document over several lines", "not JSONL", lambda head: False)
VALUES = OtherAgent("JSON values written over several lines each", "pretty-printed, not JSONL", lambda head: False, hint="`jq -c .` writes them one a line")


class OtherAgentFile(InputError):
    """An input that is another agent's file (or no JSONL at all): refused in one line naming it.
    Raised in a worker process, it comes back as the InputError of the same line (InputError.__reduce__)."""

    def __init__(self, source: str, what: str, agent: str) -> None:
        super().__init__(source, None, what)
        self.agent = agent  # the name alone, for a status line


def refusal(source: str, agent: OtherAgent, known: Iterable[str]) -> OtherAgentFile:
    what = f"{agent.describe()}, not a transcript ctxpipe reads (known: {', '.join(known)})"
    return OtherAgentFile(source, what + (f"; {agent.hint}" if agent.hint else ""), agent.name)


MORE = object()  # examine's answer when the head read so far cannot tell yet


def examine(head: bytes, final: bool = True, at_end: bool = True) -> OtherAgent | None | object:
    """The other agent's file that `head` (the input's first bytes) starts, or None when it is none
    of them. `final`: no more of the input will be read, so decide (else MORE when more would tell:
    the head stops inside its first line or inside a pretty-printed document); `at_end`: the head is
    the whole input (else it may stop inside a token)."""
    text = head.removeprefix(BOM)
    if text.startswith(SQLITE):  # binary: its first "line" may run for kilobytes
        return _match(Head(text))
    start = len(text) - len(text.lstrip())
    end = text.find(b"\n", start)
    if start == len(text) or end < 0:
        if not final:
            return MORE
        end = len(text)
    line = text[start:end].rstrip(b"\r")
    try:
        first: Any = orjson.loads(line)
    except orjson.JSONDecodeError:
        first = None
    if isinstance(first, dict):
        return _match(Head(text, first))
    if isinstance(first, list):  # one document on one line (a JSONL file of arrays is no document)
        return _match(Head(text, first, frozenset(_paths(first))))
    if first is not None or not line.startswith((b"{", b"[")):
        return _match(Head(text))
    scan = _scan(text, start, cut=not at_end)
    if scan is None:  # not JSON text: a JSONL file whose first line is bad, which its line number tells
        return None
    values, spans_lines, ended, paths = scan
    found = _match(Head(text, None, frozenset(paths)))
    if found is not None:
        return found
    if not ended and not final:
        return MORE
    if not spans_lines:  # JSONL, one object a line, whose first line orjson refused (too deep, say)
        return None
    return VALUES if values > 1 else DOCUMENT


def _match(head: Head) -> OtherAgent | None:
    return next((agent for agent in OTHER_AGENTS if agent.recognised(head)), None)


def _first_text_line(text: bytes) -> bytes:
    return text.lstrip().split(b"\n", 1)[0]


def _paths(value: Any, prefix: str = "", depth: int = 1) -> Iterable[str]:
    """The key paths of a parsed value down to PATH_DEPTH containers (of an array, its first 50 items)."""
    if depth > PATH_DEPTH:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from _paths(item, path, depth + 1)
    elif isinstance(value, list):
        for item in value[:50]:
            yield from _paths(item, prefix + "[]", depth + 1)


# A JSON token after optional white space: a string (no raw control character in it), a mark, a scalar.
_TOKEN = re.compile(rb'[ \t\r\n]*(?:("[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*")|([{}\[\]:,])|(-?[0-9][0-9.eE+-]*|true|false|null))')
_CUT_TOKEN = re.compile(rb'[ \t\r\n]*(?:"[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*\\?|-?[0-9][0-9.eE+-]*|[tfn][a-z]*)\Z')
_CLOSES = {b"}": "{", b"]": "["}


def _scan(text: bytes, start: int, cut: bool) -> tuple[int, bool, bool, set[str]] | None:
    """`text` from `start` read as JSON values, one after another, without building them: (how many
    values, whether one spans lines, whether the last one ended, the key paths seen, PATH_DEPTH
    deep), or None when it is not that (a bad JSONL line, two values on one line). `cut`: the text
    stops where the head does, maybe inside a token."""
    paths: set[str] = set()
    stack: list[tuple[str, str]] = []  # each open container: its kind ("{" or "[") and its path
    key_path = ""  # the path of the value after the key just read
    values, spans_lines, last_end, position = 0, False, start, start
    expect = "value"  # value, value-or-close, key, key-or-close, colon, comma-or-close
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            rest = text[position:]
            if not rest.strip(b" \t\r\n") or (cut and _CUT_TOKEN.match(rest)):
                break
            return None
        string, mark, scalar = match.groups()
        token_start = match.start(match.lastindex or 0)
        if stack and b"\n" in text[match.start() : token_start]:
            spans_lines = True
        position = match.end()
        if expect in ("value-or-close", "key-or-close") and mark in _CLOSES and stack[-1][0] == _CLOSES[mark]:
            stack.pop()
        elif expect in ("value", "value-or-close"):
            if not stack:
                if values and b"\n" not in text[last_end:token_start]:
                    return None  # a second value on the line the first ended on
                values += 1
            path = key_path if stack and stack[-1][0] == "{" else stack[-1][1] + "[]" if stack else ""
            if mark in (b"{", b"["):
                stack.append((mark.decode(), path))
                expect = "key-or-close" if mark == b"{" else "value-or-close"
                continue
            if (string is None and scalar is None) or not stack:
                return None  # a mark where a value belongs, or a bare scalar (no document)
        elif expect in ("key", "key-or-close"):
            if string is None:
                return None
            key = _key(string)
            key_path = f"{stack[-1][1]}.{key}" if stack[-1][1] else key
            if len(stack) <= PATH_DEPTH:
                paths.add(key_path)
            expect = "colon"
            continue
        elif expect == "colon":
            if mark != b":":
                return None
            expect = "value"
            continue
        elif mark == b",":  # comma-or-close
            expect = "key" if stack[-1][0] == "{" else "value"
            continue
        elif mark in _CLOSES and stack[-1][0] == _CLOSES[mark]:
            stack.pop()
        else:
            return None
        # A value ended (a scalar, or the container just closed).
        if stack:
            expect = "comma-or-close"
        else:
            expect, last_end = "value", position
    return values, spans_lines, not stack and values > 0 and expect == "value", paths


def _key(token: bytes) -> str:
    try:
        key = orjson.loads(token)
    except orjson.JSONDecodeError:
        return ""
    return key if isinstance(key, str) else ""


def examine_first(first: dict[str, Any]) -> OtherAgent | None:
    """examine_buffer() of an input whose first line, at its first byte and within FIRST_LOOK bytes,
    holds the object `first`: only that object tells (no signature reads more of a JSONL file)."""
    return _match(Head(b"{", first))


def examine_buffer(buffer: Any) -> OtherAgent | None:
    """examine() of a whole input held in a buffer (bytes, an mmap, a store's object), reading no
    more of it than it needs: a JSONL file is told by its first line."""
    size = len(buffer)
    for length in (FIRST_LOOK, HEAD_BYTES):
        found = examine(bytes(buffer[:length]), final=length >= min(size, HEAD_BYTES), at_end=size <= length)
        if found is not MORE:
            return found if isinstance(found, OtherAgent) else None
    return None


def examine_lines(lines: Iterable[bytes | str]) -> tuple[list[bytes | str], OtherAgent | None]:
    """examine() of a stream's first lines, read one at a time until it can tell (at once for a
    JSONL file, so `tail -f` is not held up): the lines it read, to be read again, and what it found.
    A str among them is what is wrong with a line too long or binary to hold (core.jsonl.bounded_lines):
    no other agent's file starts so, and the reader says what it is."""
    head: list[bytes | str] = []
    size, check_at = 0, 1
    found: Any = MORE
    for line in lines:
        head.append(line)
        if not isinstance(line, bytes):
            return head, None
        size += len(line)
        if len(head) >= check_at or size >= HEAD_BYTES:
            found = examine(b"".join(head)[:HEAD_BYTES], final=size >= HEAD_BYTES, at_end=False)  # type: ignore[arg-type]  # bytes only, by the check above
            if found is not MORE:
                break
            check_at *= 2  # a pretty-printed document: looked at again after twice the lines
    if found is MORE:
        found = examine(b"".join(head), final=True, at_end=True)  # type: ignore[arg-type]
    return head, found if isinstance(found, OtherAgent) else None


__all__ = ["HEAD_BYTES", "MORE", "OTHER_AGENTS", "OtherAgent", "OtherAgentFile", "examine", "examine_buffer", "examine_lines", "refusal"]
