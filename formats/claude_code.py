"""Claude Code session JSONL (~/.claude/projects/<encoded-cwd>/<session-id>.jsonl).

Each line is one entry: `user`, `assistant` (exactly one content block per line; one API response
spans every line sharing `message.id`), `system` (hooks, `compact_boundary`, ...), `progress`,
`attachment`, and entries outside the conversation tree (`summary`, `file-history-snapshot`,
`queue-operation`, ...). Entries form a tree through uuid/parentUuid; the active context is the
main chain from the last user/assistant line back to the last `compact_boundary`.

    {"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"Fix the test"},"uuid":"…","timestamp":"…","sessionId":"…"}
"""

from __future__ import annotations

import bisect
import uuid as uuidlib
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from itertools import chain
from typing import Any

import orjson

from ..core.blocks import FLAT_KINDS, call_id, is_text, is_thinking, is_tool_result, is_tool_use, kind_of, text_of, thinking_text, tool_event
from ..core.count import SYNTHETIC_MODEL, Compaction, Marker, is_real_response, measures_context
from ..core.fields import count, moment, one_ms_after, read_blocks, text, times_from
from ..core.folds import Fold
from ..core.jsonl import LATEST_TIME, LEFT_OUT, Entry, OnError, ParsedLines, ReadStats, as_text, folded, iter_entries_reversed, memoized
from ..core.limits import MAX_COUNT
from ..core.model import Finding, Message
from ..core.permission_mode import PERMISSION_MODE
from ..core.placeholders import SUMMARY_PREAMBLE
from ..core.rules import rules_for
from ..core.tokens import RoughCounter
from ..core.transcript_format import ContextReader
from .base import CTXPIPE_NAMESPACE, SUMMARY_MARKER, CompactionSpan, WriteOptions

# Tuples, not sets: a line's `type` may be a list or an object, which a set lookup cannot hash.
TREE_TYPES = ("user", "assistant", "system", "progress", "attachment")
MESSAGE_TYPES = ("user", "assistant")
# Every entry type Claude Code is known to write, 1.0.x to 2.1.332 (2.1.332's registry of types,
# reference/claude-code-2.1.332.md §7, and the ones it dropped): a line of one of them is Claude Code's.
ENTRY_TYPES = frozenset(
    (
        *TREE_TYPES,
        *("summary", "file-history-snapshot", "file-history-delta", "queue-operation", "last-prompt", "permission-mode", "custom-title", "ai-title"),
        *("tag", "agent-name", "agent-color", "agent-setting", "pr-link", "mode", "worktree-state", "content-replacement", "attribution-snapshot"),
        *("continued-in", "resume-head-vouch", "api-request-shape", "api-request-blob", "api-request", "api-request-resumed", "host-row"),
        *("data-flow-records", "data-flow-incomplete", "fork-context-ref", "frame-link", "artifact-comment-monitor", "memory-mode", "derived-from"),
        *("ended-by-model", "relocated", "artifact-autoreact-ledger", "bridge-session", "history-suppression", "isolation-latch", "session-owner"),
        *("dev-mods", "atis-latch", "tools-used", "cost-state", "observer-ref", "repl-mode", "hybrid-organization"),
        *("task-summary", "speculation-accept", "marble-origami-commit", "marble-origami-snapshot"),
    )
)
# The fields that tie a line to a Claude Code session, whatever its type.
LINKS = ("uuid", "parentUuid", "sessionId", "leafUuid")
# The fields a line ctxpipe appends copies from the conversation it joins.
ENVELOPE = ("userType", "cwd", "sessionId", "version", "gitBranch", "slug")


# What a count reads of a `progress` line: its place in the chain and the envelope (no message, no marker).
_PROGRESS_KEPT = ("type", "uuid", "parentUuid", "logicalParentUuid", "isSidechain", "timestamp", *ENVELOPE)


def entry_type(obj: dict[str, Any]) -> str | None:
    """A line's `type` (user, assistant, system, progress, …) when it is a string; a hostile line's
    list or object reads as None, which names no type. (The loops over every line compare
    obj.get("type") itself with the names: any other value compares unequal to each, as None does.)"""
    value = obj.get("type")
    return value if isinstance(value, str) else None


def names_its_agent(obj: dict[str, Any]) -> bool:
    """Whether a side-chain line carries its agentId: Claude Code 2.0.55+ writes such lines only to
    the agent's own file (1.0.x wrote side chains into the main file, without one), whose thread
    is that side chain. The last conversation line of a file being one, it is the leaf at once: a
    reader from the file's end need not read the whole file to learn there is no main thread."""
    return isinstance(obj.get("agentId"), str)


def is_compact_boundary(obj: dict[str, Any]) -> bool:
    return obj.get("type") == "system" and obj.get("subtype") == "compact_boundary"


def is_summary_marker(obj: dict[str, Any]) -> bool:
    """ctxpipe's record below a kept tail: every response above it was measured before the summary."""
    return obj.get("type") == "system" and obj.get("subtype") == SUMMARY_MARKER


def uuid_index(entries: Sequence[Entry]) -> dict[str, int]:
    """uuid -> position; when a uuid repeats, the later line wins (as Claude Code loads it). Not to be
    changed by the caller: a LineIndex keeps it for the next one."""

    def scan() -> dict[str, int]:
        return {value: position for position, entry in enumerate(entries) if isinstance(value := entry.obj.get("uuid"), str)}

    found: dict[str, int] = memoized(entries, "uuid_index", scan)
    return found


def find_leaf(entries: Sequence[Entry]) -> int | None:
    """The last user/assistant line of the main thread, else of the side chain (a subagent's file):
    the last line of all when it is a side chain's that names its agent (names_its_agent)."""
    fallback = None
    for position in range(len(entries) - 1, -1, -1):
        obj = entries[position].obj
        if obj.get("type") in MESSAGE_TYPES:
            if not obj.get("isSidechain"):
                return position
            if fallback is None:
                if names_its_agent(obj):
                    return position
                fallback = position
    return fallback


def main_chain(entries: Sequence[Entry], history: bool = False, latest: dict[str, int] | None = None) -> list[int]:
    """Positions on the path from the root (or the last compact boundary) to the leaf, in file order.

    With history=True the walk crosses compact boundaries through `logicalParentUuid`; past a
    boundary it looks only at lines above it (a kept tail re-emitted below a boundary shares uuids
    with the history above it, and the later line of a uuid wins only within its own segment).
    `latest`: uuid_index(entries), when the caller has it already.
    """
    leaf = find_leaf(entries)
    if leaf is None:
        return []
    line_of = _LatestBelow(entries, latest) if latest is not None or isinstance(entries, list) else _ScanBack(entries)
    chain: list[int] = []
    seen: set[int] = set()
    limit = len(entries)
    position: int | None = leaf
    while position is not None and position not in seen:
        seen.add(position)
        chain.append(position)
        obj = entries[position].obj
        crossing = is_compact_boundary(obj)
        if crossing:
            if not history:
                break
            parent = obj.get("logicalParentUuid")
            limit = position
        else:
            parent = obj.get("parentUuid")
        if not isinstance(parent, str):
            position = _last_above(entries, limit) if crossing else None
            continue
        position = line_of(parent, limit)
        if position is None and crossing:
            position = _last_above(entries, limit)
    chain.reverse()
    return chain


class _LatestBelow:
    """The latest line of a uuid before a position, from the index of every uuid's latest line."""

    def __init__(self, entries: Sequence[Entry], latest: dict[str, int] | None) -> None:
        self.entries = entries
        self.latest = uuid_index(entries) if latest is None else latest
        self.places: dict[str, list[int]] | None = None  # every position of a uuid, built only past a boundary

    def __call__(self, uuid: str, limit: int) -> int | None:
        position = self.latest.get(uuid)
        if position is None or position < limit:
            return position
        if self.places is None:
            self.places = {}
            for index, entry in enumerate(self.entries):
                value = entry.obj.get("uuid")
                if isinstance(value, str):
                    self.places.setdefault(value, []).append(index)
        # The latest line of that uuid above the boundary (places are in file order).
        candidates = self.places.get(uuid, [])
        below = bisect.bisect_left(candidates, limit)
        return candidates[below - 1] if below else None


class _ScanBack:
    """_LatestBelow for entries read in place (core.jsonl.LineIndex): the lines are read from the
    end back only as far as the walk asks, and only the uuids of those are held."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.entries = entries
        self.low = len(entries)  # every line from here on has been read
        self.seen: dict[str, list[int]] = {}  # uuid -> its positions from `low` on, latest first

    def __call__(self, uuid: str, limit: int) -> int | None:
        for position in self.seen.get(uuid, ()):
            if position < limit:
                return position
        while self.low > 0:
            self.low -= 1
            value = self.entries[self.low].obj.get("uuid")
            if isinstance(value, str):
                self.seen.setdefault(value, []).append(self.low)
                if value == uuid and self.low < limit:
                    return self.low
        return None


def _last_above(entries: Sequence[Entry], boundary: int) -> int | None:
    """Where the history above a boundary ends when its logicalParentUuid names no line there
    (Claude Code 2.1.39 writes such boundaries): the last main-thread message line above it."""
    return find_leaf(entries[:boundary])


def context_positions(entries: Sequence[Entry], history: bool = False, latest: dict[str, int] | None = None) -> list[int]:
    """The main chain plus the lines that hang off it as siblings, in file order.

    Parallel tool calls branch: each tool_result line's parent is its own tool_use line, so the
    walk from the leaf passes only the last one. The other results (matched by tool_use id) and
    the other lines of a response on the chain (matched by message.id) belong to the context too.
    """
    chain = main_chain(entries, history, latest)
    if not chain:
        return chain
    on_chain = set(chain)
    response_ids: set[str] = set()
    tool_ids: set[str] = set()
    for position in chain:
        obj = entries[position].obj
        payload = obj.get("message")
        if obj.get("type") != "assistant" or not isinstance(payload, dict):
            continue
        if isinstance(payload.get("id"), str):
            response_ids.add(payload["id"])
        tool_ids.update(_tool_use_ids(payload))
    sidechain = bool(entries[chain[-1]].obj.get("isSidechain"))
    extra = []
    # File order: a response's tool_use lines come before the results that answer them.
    for position in range(chain[0] + 1, len(entries)):
        if position in on_chain:
            continue
        obj = entries[position].obj
        if bool(obj.get("isSidechain")) != sidechain:
            continue
        payload = obj.get("message")
        if not isinstance(payload, dict):
            continue
        kind = obj.get("type")
        if kind == "assistant" and text(payload, "id") in response_ids:
            extra.append(position)
            tool_ids.update(_tool_use_ids(payload))
        elif kind == "user" and any(is_tool_result(block) and call_id(block) in tool_ids for block in _blocks(payload.get("content"))):
            extra.append(position)
    if not extra:
        return chain
    return sorted(on_chain.union(extra))


def _typed(line: dict[str, Any]) -> bool:
    """Whether a user line holds words a person typed (not only tool results)."""
    payload = line.get("message")
    content = payload.get("content") if isinstance(payload, dict) else None
    return isinstance(content, str) or (isinstance(content, list) and any(is_text(block) for block in content if isinstance(block, dict)))


def _attachment_messages(entries: Sequence[Entry], positions: Sequence[int]) -> list[Message]:
    """The text of the attachment lines among `positions` (file and plan restores, a hook's context,
    todo lists), each as a meta user message: the model reads them with the summary."""
    found = []
    for position in positions:
        obj = entries[position].obj
        attachment = obj.get("attachment") if entry_type(obj) == "attachment" else None
        if isinstance(attachment, dict):
            words = "\n".join(as_text(attachment.get(key)) for key in ("content", "prompt", "text", "filename", "plan", "todos") if key in attachment)
            if words.strip():
                found.append(Message("user", [{"type": "text", "text": words}], [position], meta=True))
    return found


# The reasons a 2.1.332 `remove` gives when it takes a prompt out of the queue undelivered. Any other
# reason ("absorbed_mid_turn", "delivered_to_agent", …), and a `remove` with none (as 2.1.88 and before
# write it, when a queued prompt is attached to the turn in progress), is a delivery: the model read it.
WITHDRAWN = frozenset({"cleared_on_cancel", "dropped_by_hook", "not_carried_to_background", "agent_stopped"})


def queued_prompts(entries: Sequence[Entry], start: int = 0) -> list[tuple[int, Any]]:
    """(position, content) of the prompts typed while the agent was busy, from `start` on.

    Claude Code writes each as a `queue-operation` enqueue line, often with no `user` line: a
    `dequeue` runs it as the next prompt, a `remove` hands it to the turn in progress (its text is
    then nowhere else in the file), and a 2.1.332 `queued_command` attachment records one reaching
    the model (the summary keeps one of each repeated text). A prompt the user took back (`popAll`,
    or a `remove` whose reason is in WITHDRAWN) is no message."""
    found: list[tuple[int, Any]] = []
    waiting: list[int] = []  # indexes into found of enqueued prompts not yet taken from the queue

    def take(obj: dict[str, Any]) -> int:
        """The waiting prompt an operation takes: the one its content names, else the oldest."""
        named = [at for at in waiting if found[at][1] == obj.get("content")] if "content" in obj else []
        taken = named[0] if named else waiting[0]
        waiting.remove(taken)
        return taken

    for position in range(start, len(entries)):
        obj = entries[position].obj
        kind = entry_type(obj)
        operation = obj.get("operation") if kind == "queue-operation" else None
        if operation == "enqueue" and isinstance(obj.get("content"), (str, list)):
            waiting.append(len(found))
            found.append((position, obj["content"]))
        elif operation in ("dequeue", "remove", "popAll") and waiting:
            taken = take(obj)
            if operation == "popAll" or obj.get("reason") in WITHDRAWN:
                found[taken] = (found[taken][0], None)
        elif kind == "attachment" and isinstance(obj.get("attachment"), dict) and obj["attachment"].get("type") == "queued_command":
            prompt = obj["attachment"].get("prompt")
            if isinstance(prompt, (str, list)):
                found.append((position, prompt))
    return [(position, content) for position, content in found if content is not None]


def is_unmetered(obj: dict[str, Any]) -> bool:
    """An assistant record Claude Code 2.1.332 leaves out of every count (`isUnmetered: true`)."""
    return obj.get("isUnmetered") is True


def _response_id(obj: dict[str, Any]) -> str | None:
    """The message.id of a response line whose usage can anchor a count (not a synthetic error, not
    unmetered, not a usage of zeros)."""
    payload = obj.get("message")
    if obj.get("type") != "assistant" or not isinstance(payload, dict) or not measures_context(payload.get("usage")):
        return None
    if payload.get("model") == "<synthetic>" or is_unmetered(obj):
        return None
    message_id = payload.get("id")
    return message_id if isinstance(message_id, str) else None


def _blocks(content: Any) -> list[dict[str, Any]]:
    return read_blocks(content)[1]


def _tool_use_ids(message: dict[str, Any]) -> list[str]:
    """The ids of a message's tool_use blocks (read in place: a block whose id is not a string has none)."""
    content = message.get("content")
    return [block["id"] for block in content if is_tool_use(block) and isinstance(block.get("id"), str)] if isinstance(content, list) else []


def build_messages(entries: Sequence[Entry], positions: Sequence[int], content: bool = True, unmetered: bool = False) -> list[Message]:
    """Messages from the given entries: assistant lines merged by message.id, usage from the last.
    content=False reads no block (usage, model and lines only: what the cost needs). A response with
    an unmetered line has no usage (its content is in the context, its usage counts nothing), unless
    `unmetered` keeps it (the API calls, which the cost reads)."""
    return _built(MessagesSoFar(), entries, positions, content, unmetered)


class MessagesSoFar:
    """build_messages' state between calls, for a caller that builds one history in stretches and
    keeps what each stretch ended with (`snapshot`: the messages so far, which no later stretch
    changes: a message a later line extends is copied first)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.responses: dict[str, Message] = {}
        self.places: dict[str, int] = {}  # message id -> where its message is in `messages`
        self.unmetered_ids: set[str] = set()
        self.kept: set[int] | None = None  # id() of the messages a snapshot holds; None: no snapshot taken

    def snapshot(self) -> list[Message]:
        self.kept = set(map(id, self.messages))
        return list(self.messages)

    def extend(self, entries: Sequence[Entry], positions: Sequence[int]) -> None:
        _built(self, entries, positions)


def _built(state: MessagesSoFar, entries: Sequence[Entry], positions: Sequence[int], content: bool = True, unmetered: bool = False) -> list[Message]:
    messages, responses, unmetered_ids = state.messages, state.responses, state.unmetered_ids
    for position in positions:
        obj = entries[position].obj
        kind = obj.get("type")
        if kind not in MESSAGE_TYPES:
            continue
        payload = obj.get("message")
        if not isinstance(payload, dict):
            continue
        raw = payload.get("content")
        refs, blocks = entries[position].blocks(raw, position) if content else ([], [])
        if kind == "assistant":
            message_id = payload.get("id") if isinstance(payload.get("id"), str) else None
            usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else None
            if not unmetered and is_unmetered(obj):
                usage = None
                if message_id:
                    unmetered_ids.add(message_id)
            known = responses.get(message_id) if message_id else None
            if known is not None and state.kept is not None and id(known) in state.kept:
                known = _copied(state, known)  # a snapshot holds it as it was
            if known is not None:
                known.content.extend(blocks)
                known.refs.extend(refs)
                known.entries.append(position)
                if message_id in unmetered_ids:
                    known.usage = None
                elif usage is not None:
                    known.usage = usage
                continue
            message = Message("assistant", blocks, [position], message_id, usage, text(payload, "model"), refs=refs)
            if message_id:
                responses[message_id] = message
                state.places[message_id] = len(messages)
            messages.append(message)
        else:
            messages.append(
                Message(
                    "user",
                    blocks,
                    [position],
                    meta=bool(obj.get("isMeta")),
                    compact_summary=bool(obj.get("isCompactSummary")),
                    text_content=raw if content and isinstance(raw, str) else None,
                    refs=refs,
                )
            )
    return messages


def _copied(state: MessagesSoFar, message: Message) -> Message:
    """A copy of `message` in its place in `state`, its lists its own, for a later line to extend."""
    from dataclasses import replace

    assert message.message_id is not None  # only a response with an id is extended
    copy = replace(message, content=list(message.content), entries=list(message.entries), refs=list(message.refs))
    state.messages[state.places[message.message_id]] = copy
    state.responses[message.message_id] = copy
    return copy


# The lines Claude Code keeps as the conversation's tree (2.1.88 and 2.1.332 alike): a parentUuid that
# names any other kind of line (progress, a type it does not know) is a dead end when it walks up.
CONVERSATION_TYPES = ("user", "assistant", "system", "attachment")


def _anchor(entries: Sequence[Entry]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Where a line appended below `entries` hangs, and the fields it copies to join that conversation.

    The parent is the last main-chain conversation line (else the last side-chain one, in a subagent's
    file; else the last line with a uuid; None: there is none): hung off a progress line or a line of a
    newer type, Claude Code's walk up from ctxpipe's line stops at once and finds no conversation. The
    fields are the envelope of the last user or assistant line of the parent's chain (else the
    parent's), and that chain's isSidechain and agentId: in a subagent's file, Claude Code reads only
    the lines of that agent's side chain.
    """
    last = first_conversation = first_with_uuid = None
    for entry in reversed(entries):  # from the end, as far as the first main-chain conversation line
        obj = entry.obj
        if not isinstance(obj.get("uuid"), str):
            continue
        first_with_uuid = first_with_uuid or obj
        if entry_type(obj) in CONVERSATION_TYPES:
            first_conversation = first_conversation or obj
            if obj.get("isSidechain") is not True:
                last = obj
                break
    last = last or first_conversation or first_with_uuid
    parent = last or {}
    side = parent.get("isSidechain") is True
    source = next((e.obj for e in reversed(entries) if entry_type(e.obj) in MESSAGE_TYPES and (e.obj.get("isSidechain") is True) == side), parent)
    fields: dict[str, Any] = {"isSidechain": side, **{key: source[key] for key in ENVELOPE if key in source}}
    if side and isinstance(parent.get("agentId"), str):
        fields["agentId"] = parent["agentId"]
    return last, fields


def _appended_clock(entries: Sequence[Entry], when: str) -> Any:
    """Times for lines appended below `entries`, one millisecond apart: from `when` when it is later
    than every line's time, else from a millisecond after the latest.

    Claude Code 2.1.88 resumes from the non-sidechain line with the latest timestamp (ties: the first
    in the file) and walks parentUuid up from there. A line appended below the conversation must be
    the newest, or Claude Code resumes from a line above it and loses what it added (a summarized
    tail's end, the restored files); an appended line older than its parent is never read.
    """
    latest = folded(entries, LATEST_TIME)
    start = moment(when) or datetime.now(timezone.utc)
    return times_from(one_ms_after(latest) if latest is not None and start <= latest else start)


# Claude Code 2.1.332 estimates a PDF page it read at this many tokens.
PDF_PAGE_TOKENS = 3_000
_ROUGH = RoughCounter()


def _thinking_tokens(obj: dict[str, Any]) -> int:
    """Claude Code's rough estimate (len / 4) of a response line's thinking blocks."""
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return 0
    texts = (thinking_text(block) for block in content if is_thinking(block))
    return sum(_ROUGH.count(value) for value in texts if value is not None)


def _attachment_marker(attachment: dict[str, Any], position: int, line: int | None, thinking: int) -> Marker | None:
    """A thinking_stripped of scope "all" drops the thinking before it; a message_pdf_reads adds its
    reads (3,000 tokens a page, a text result by its length). Other attachments change nothing the
    count follows (a partial strip's point is not followed)."""
    kind = attachment.get("type")
    if kind == "thinking_stripped" and attachment.get("scope") == "all" and thinking > 0:
        return Marker(position, line, "thinking_stripped", thinking)
    if kind != "message_pdf_reads" or not isinstance(attachment.get("reads"), list):
        return None
    added = 0
    for read in attachment["reads"]:
        result = read.get("result") if isinstance(read, dict) else None
        if is_text(result) and (result_text := text_of(result)) is not None:
            added += _ROUGH.count(result_text)
        elif isinstance(read, dict):
            added += PDF_PAGE_TOKENS * min(count(read, "pages"), MAX_COUNT // PDF_PAGE_TOKENS)
    return Marker(position, line, "message_pdf_reads", 0, min(added, MAX_COUNT - 1)) if added > 0 else None


class _Markers:
    """MARKERS' state: the next line's position, the rough tokens of the thinking blocks so far (what
    a strip of scope "all" drops) and the markers found."""

    __slots__ = ("position", "thinking", "found")

    def __init__(self, position: int = 0, thinking: int = 0, found: list[Marker] | None = None) -> None:
        self.position, self.thinking, self.found = position, thinking, [] if found is None else found

    def copy(self) -> _Markers:
        return _Markers(self.position, self.thinking, list(self.found))


def _marker_step(state: _Markers, entry: Entry) -> _Markers:
    obj, position = entry.obj, state.position
    state.position += 1
    kind = obj.get("type")
    if kind == "assistant" and obj.get("isSidechain") is not True:
        state.thinking += _thinking_tokens(obj)
    elif kind == "attachment" and isinstance(obj.get("attachment"), dict):
        marker = _attachment_marker(obj["attachment"], position, entry.line or None, state.thinking)
        if marker is not None:
            state.found.append(marker)
            state.thinking -= marker.tokens_saved
    elif kind == "system":
        if obj.get("subtype") == "compact_boundary":
            state.thinking = 0  # the thinking above a compaction is not in the context a strip after it acts on
        metadata = obj.get("microcompactMetadata") or obj.get("snipMetadata") or obj.get("ctxpipeMetadata")
        if isinstance(metadata, dict) and count(metadata, "tokensSaved") > 0:
            state.found.append(Marker(position, entry.line or None, text(obj, "subtype") or "marker", count(metadata, "tokensSaved")))
    return state


# The markers of a session's lines (ClaudeCodeFormat.markers), folded line by line: a file read in
# place folds them while it is checked.
MARKERS: Fold[_Markers] = Fold("markers", _Markers, _marker_step, _Markers.copy)


def _images_left_out(obj: dict[str, Any]) -> int:
    """How many image and document blocks of a line's message, or of the tool results in it, read
    jsonl.LEFT_OUT as their source's data: each costs a flat estimate (core.tokens.block_texts),
    whatever its data holds (a count's skim of the walk back)."""
    message = obj.get("message")
    pending = [message.get("content")] if isinstance(message, dict) else []
    found = 0
    while pending:
        content = pending.pop()
        for block in content if isinstance(content, list) else ():
            kind = kind_of(block)
            if kind in FLAT_KINDS:
                source = block.get("source")
                found += isinstance(source, dict) and source.get("data") == LEFT_OUT
            elif kind == "tool_result":
                pending.append(block.get("content"))
    return found


class _WalkBack:
    """ClaudeCodeFormat.read_context's walk from the file's end, kept between reads: a read for more
    responses goes on from the line the one before stopped at, so no line is parsed twice."""

    def __init__(
        self,
        buffer: Any,
        source: str,
        on_error: OnError,
        stats: ReadStats,
        keep_raw: bool,
        parsed: ParsedLines | None = None,
        skim: Callable[[dict[str, Any]], int] | None = None,
    ) -> None:
        self.buffer, self.source, self.on_error, self.stats, self.keep_raw, self.parsed, self.skim = buffer, source, on_error, stats, keep_raw, parsed, skim
        self.collected: list[Entry] = []  # from the last line back
        self.wanted: str | None = None  # the uuid of the next line of the chain
        self.leaf_seen = False
        self.side_seen = False  # a side-chain conversation line was met before the leaf
        self.seen_responses: set[str] = set()
        self.held: tuple[int, Entry] | None = None  # the line the last read stopped at, parsed but not taken
        self.ended = False  # the walk reached the start of the active context (or of the file)
        self.offset = 0  # where the earliest line taken starts

    def read(self, responses: int | None) -> tuple[list[Entry], bool]:
        """The entries from the end back past the last `responses` whole API responses of the chain
        (all of the active context when None), in file order, and whether they reach its start."""
        complete = True
        if not self.ended:
            complete = self._walk(responses)
        return self.collected[::-1], complete

    def _walk(self, responses: int | None) -> bool:
        keep_raw, collected, seen_responses, parsed = self.keep_raw, self.collected, self.seen_responses, self.parsed
        lines = iter_entries_reversed(self.buffer, self.source, self.on_error, self.stats, keep_raw, self.held[0] if self.held else None, self.skim)
        if self.held is not None:
            lines = chain((self.held,), lines)
            self.held = None
        for start, entry in lines:
            obj = entry.obj
            kind = obj.get("type")
            on_chain = self.leaf_seen and obj.get("uuid") == self.wanted
            response = _response_id(obj) if on_chain else None
            if response is not None and responses is not None and response not in seen_responses and len(seen_responses) >= responses:
                self.held = (start, entry)  # every line of the responses counted so far is in hand
                return False
            if not keep_raw and kind == "progress":
                # To a count a progress line is at most a link of the chain (most are off it): a run of
                # thousands (a long Bash, a busy hook) costs no memory.
                if not on_chain:
                    continue
                if parsed is not None:
                    parsed[start] = obj
                entry.obj = obj = {key: obj[key] for key in _PROGRESS_KEPT if key in obj}
            elif parsed is not None:
                parsed[start] = obj
            collected.append(entry)
            self.offset = start
            if kind == "system" and is_summary_marker(obj) and not seen_responses:
                responses = None  # the responses above it are stale: the count needs the whole context (this read ends the walk)
            if not self.leaf_seen:
                if kind not in MESSAGE_TYPES:
                    continue
                if obj.get("isSidechain"):
                    # find_leaf's rule: the first side-chain line met is the leaf when it names its agent.
                    if self.side_seen or not names_its_agent(obj):
                        self.side_seen = True
                        continue
                self.leaf_seen = True
                response = _response_id(obj)
            elif not on_chain:
                continue
            if response is not None:
                seen_responses.add(response)
            parent = obj.get("parentUuid")
            if is_compact_boundary(obj) or not isinstance(parent, str):
                break
            self.wanted = parent
        self.ended = True
        return True


class ClaudeCodeFormat:
    name = "claude-code"
    summary = "Claude Code session JSONL (~/.claude/projects/…/<session-id>.jsonl)"
    schema = "claude-code.entry.schema.json"
    writable = True
    has_usage = True
    has_tree = True  # uuid/parentUuid
    keeps_history = True  # a compact_boundary starts a new root below the history
    state_lines: tuple[str, ...] = ()  # the chain's other lines (progress, attachments, hooks) belong to its messages
    summary_preamble = SUMMARY_PREAMBLE
    lines_are_messages = False  # envelope fields (uuid, cwd, sessionId, …) a rebuild would drop
    compacts_at: float | None = None  # Claude Code's thresholds (core.budget)
    # The markers count reads; the mode a compaction ran in, which its re-injection depends on.
    line_folds: tuple[Fold[Any], ...] = (MARKERS, PERMISSION_MODE)

    def sniff(self, obj: dict[str, Any]) -> bool | None:
        kind = entry_type(obj)
        if kind is None:
            return False
        if "payload" in obj:  # a Codex rollout line
            return False
        linked = any(isinstance(obj.get(key), str) for key in LINKS)
        if kind in ("user", "assistant") and "message" not in obj and not linked:
            # No message and none of its links: not a line Claude Code writes (a Gemini CLI record
            # without its chat's metadata line above it, from `tail`), so not enough to claim the file.
            return None
        if kind in ENTRY_TYPES or linked:
            return True
        # A type Claude Code has never written, on a line with none of its links: maybe a newer
        # version's, maybe another program's; a file of nothing else is no transcript to read as one.
        return None

    def messages(self, entries: Sequence[Entry], history: bool = False) -> list[Message]:
        positions = context_positions(entries, history)
        messages = build_messages(entries, positions)
        if not positions or history or not is_compact_boundary(entries[positions[0]].obj):
            return messages
        # A tail kept through a compaction is written again below the boundary under its own uuids;
        # its usage was measured on the old, longer prompt and must not anchor a count. Told by the
        # uuids above the boundary when they were read, and by ctxpipe's summary record below the
        # tail (which a reader of the file's end meets first).
        kept_until = max((p for p in range(positions[0], len(entries)) if is_summary_marker(entries[p].obj)), default=-1)
        responses = [message for message in messages if message.role == "assistant"]
        wanted = {text(entries[message.entries[-1]].obj, "uuid") for message in responses}
        above: set[str | None] = set()
        for entry in reversed(entries[: positions[0]]):  # the nearest lines first: a kept tail is just above
            if text(entry.obj, "uuid") in wanted:
                above.add(text(entry.obj, "uuid"))
                if len(above) == len(wanted):
                    break
        for message in responses:
            if message.entries[-1] < kept_until or text(entries[message.entries[-1]].obj, "uuid") in above:
                message.usage_stale = True
        return messages

    def compactions(self, entries: Sequence[Entry]) -> list[CompactionSpan]:
        """Every compact boundary on the session's chain (followed back through logicalParentUuid).

        What a compaction replaced is the whole chain above it (what a person would check the new
        context against); what it left is the run of lines right below it that are no new turn:
        the summary, the tail it kept (lines whose uuid is already above the boundary: ctxpipe
        re-emits its tail), the messages 2.1.332 names as preserved, and the attachments Claude Code
        adds before the next request (a SessionStart hook's context among them)."""
        latest = uuid_index(entries)
        chain = context_positions(entries, history=True, latest=latest)
        boundaries = [p for p in chain if is_compact_boundary(entries[p].obj)]
        if not boundaries:
            return []
        first_seen: dict[str, int] = {}
        for position, entry in enumerate(entries):
            value = entry.obj.get("uuid")
            if isinstance(value, str):
                first_seen.setdefault(value, position)
        queued = queued_prompts(entries)
        # The history above each boundary is built once, stretch by stretch, each span's a snapshot
        # (building it again for every boundary was quadratic: 1,600 compactions took 36 s and 2 GB).
        # Only where the chain runs in file order does each prefix extend the one before it.
        so_far = MessagesSoFar() if all(a < b for a, b in zip(chain, chain[1:])) else None
        built = 0
        spans = []
        for number, boundary in enumerate(boundaries):
            following = boundaries[number + 1] if number + 1 < len(boundaries) else len(entries)
            obj = entries[boundary].obj
            metadata = self.boundary_metadata(obj) or {}
            left: list[int] = []
            after: list[int] = []
            for position in (p for p in chain if boundary < p < following):
                line = entries[position].obj
                uuid = text(line, "uuid")
                re_emitted = uuid is not None and first_seen.get(uuid, boundary) < boundary
                kind = entry_type(line)
                new_turn = kind == "assistant" or (kind == "user" and not line.get("isMeta") and not line.get("isCompactSummary") and _typed(line))
                (after if after or (new_turn and not re_emitted) else left).append(position)
            preserved = metadata.get("preservedMessages")
            named = preserved.get("uuids") if isinstance(preserved, dict) else None
            if isinstance(named, list):
                left = sorted(set(left) | {latest[u] for u in named if isinstance(u, str) and latest.get(u, boundary) < boundary})
            pre = metadata.get("preTokens")
            if so_far is not None:
                upto = bisect.bisect_left(chain, boundary, built)
                so_far.extend(entries, chain[built:upto])
                built = upto
            spans.append(
                CompactionSpan(
                    position=boundary,
                    line=entries[boundary].line or None,
                    timestamp=text(obj, "timestamp"),
                    trigger=text(metadata, "trigger"),
                    pre_tokens=pre if isinstance(pre, int) and not isinstance(pre, bool) and pre >= 0 else None,
                    by="ctxpipe" if "ctxpipe" in metadata else "claude-code",
                    before=build_messages(entries, [p for p in chain if p < boundary]) if so_far is None else so_far.snapshot(),
                    left=build_messages(entries, left) + _attachment_messages(entries, left),
                    after=build_messages(entries, after),
                    typed_before=[(p, content) for p, content in queued if p < boundary],
                )
            )
        return spans

    def typed_elsewhere(self, entries: Sequence[Entry]) -> list[tuple[int, Any]]:
        positions = context_positions(entries)
        return queued_prompts(entries, positions[0] if positions else 0)

    def opening(self, entries: Sequence[Entry]) -> Compaction | None:
        """The compaction the active context starts from, if it starts at a compact boundary."""
        positions = context_positions(entries)
        if not positions or not is_compact_boundary(entries[positions[0]].obj):
            return None
        start = positions[0]
        metadata = entries[start].obj.get("compactMetadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        kept_until = max((p for p in range(start, len(entries)) if is_summary_marker(entries[p].obj)), default=None)
        by_ctxpipe = "ctxpipe" in metadata or kept_until is not None
        # A session-memory compaction (it keeps a preserved segment) restores only the plan. 2.1.332 has
        # none: its full compaction keeps a tail too (preservedSegment, preservedMessages) and restores files.
        session_memory = rules_for(text(entries[start].obj, "version"))[0].session_memory_compaction
        kept_a_segment = session_memory and "preservedSegment" in metadata
        restores = "nothing" if by_ctxpipe else "plan" if kept_a_segment else "files, plan and skills"
        return Compaction(start, entries[start].line or None, restores, kept_until)

    def context_positions(self, entries: Sequence[Entry], history: bool = False) -> list[int]:
        return context_positions(entries, history)

    def api_calls(self, entries: Sequence[Entry]) -> list[Message]:
        # Usage and model only: the cost needs no content, so no block is read (a big file has millions).
        responses = [position for position, entry in enumerate(entries) if entry_type(entry.obj) == "assistant"]
        return [call for call in build_messages(entries, responses, content=False, unmetered=True) if is_real_response(call)]

    def split_at_compaction(self, entries: Sequence[Entry]) -> tuple[list[Message], list[Message]] | None:
        """The main chain's messages before the last compact boundary (followed back through
        logicalParentUuid), and the active context's."""
        everything = context_positions(entries, history=True)
        boundaries = [p for p in everything if is_compact_boundary(entries[p].obj)]
        if not boundaries:
            return None
        last = boundaries[-1]
        return build_messages(entries, [p for p in everything if p < last]), self.messages(entries)

    def boundary_metadata(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        if not is_compact_boundary(obj):
            return None
        metadata = obj.get("compactMetadata")
        return metadata if isinstance(metadata, dict) else {}

    def from_messages(self, messages: Sequence[dict[str, Any]], options: WriteOptions) -> list[Entry]:
        """One line per assistant block (sharing a message id), one line per tool result. A message's
        own `timestamp`, and a response's `id`, `model` and `usage` (core.convert.RECORDED) are kept."""
        session_id = options.session_id or str(uuidlib.uuid4())
        start = moment(options.start_time)
        if options.start_time and start is None:
            raise ValueError(f"start_time {options.start_time!r} is not an ISO 8601 time")
        clock = times_from(start)
        out: list[Entry] = []
        parent: str | None = None

        def add(kind: str, message: dict[str, Any], when: str | None) -> None:
            nonlocal parent
            line_uuid = str(uuidlib.uuid5(CTXPIPE_NAMESPACE, f"{session_id}:{len(out)}"))
            obj = {
                "parentUuid": parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": options.cwd,
                "sessionId": session_id,
                "version": "ctxpipe",
                "type": kind,
                "message": message,
                "uuid": line_uuid,
                "timestamp": when or next(clock),
            }
            out.append(Entry(obj))
            parent = line_uuid

        for number, api_message in enumerate(messages):
            content = api_message.get("content")
            when = api_message["timestamp"] if moment(api_message.get("timestamp")) is not None else None
            if api_message.get("role") == "assistant":
                recorded_id = api_message.get("id")
                message_id = (
                    recorded_id if isinstance(recorded_id, str) else f"msg_ctxpipe_{uuidlib.uuid5(CTXPIPE_NAMESPACE, f'{session_id}:msg:{number}').hex[:24]}"
                )
                model = options.model or (api_message["model"] if isinstance(api_message.get("model"), str) else None)
                usage = api_message.get("usage") if isinstance(api_message.get("usage"), dict) else None
                for block in _blocks(content):
                    payload: dict[str, Any] = {"id": message_id, "type": "message", "role": "assistant"}
                    if model:
                        payload["model"] = model
                    payload.update({"content": [block], "stop_reason": None, "stop_sequence": None})
                    if usage is not None:
                        payload["usage"] = usage  # as Claude Code: every line of a response carries its usage
                    add("assistant", payload, when)
            elif isinstance(content, str):
                add("user", {"role": "user", "content": content}, when)
            else:
                blocks = _blocks(content)
                for block in blocks:
                    if is_tool_result(block):
                        add("user", {"role": "user", "content": [block]}, when)
                rest = [block for block in blocks if not is_tool_result(block)]
                if rest:
                    add("user", {"role": "user", "content": rest}, when)
        return out

    def read_context(self, buffer: Any, source: str, on_error: OnError, stats: ReadStats, responses: int | None = None) -> tuple[list[Entry], bool]:
        """The end of the file back to the start of the active context, parsed backwards.

        Walks the chain from the leaf as lines come in and stops at its root or at the last compact
        boundary, so history above a boundary is never parsed; with `responses`, it stops as soon as
        that many whole API responses of the chain are in hand. Returns the entries (in file order,
        without line numbers) and whether they reach the start of the active context.
        """
        return self.context_reader(buffer, source, on_error, stats)(responses)

    def context_reader(
        self, buffer: Any, source: str, on_error: OnError, stats: ReadStats, parsed: ParsedLines | None = None, flat_images: bool = False
    ) -> ContextReader:
        """read_context that goes on: each call reads on back from where the one before stopped.
        `parsed`: where to keep the object of each line taken, by where it starts."""
        return _WalkBack(buffer, source, on_error, stats, keep_raw=False, parsed=parsed, skim=_images_left_out if flat_images else None).read

    def read_region(self, buffer: Any, source: str, on_error: OnError, stats: ReadStats) -> tuple[int, list[Entry]]:
        """Where the active context starts (a byte offset) and every line from there on, with its bytes.

        Stages edit only this region; the bytes before it pass through untouched, unparsed.
        """
        walk = _WalkBack(buffer, source, on_error, stats, keep_raw=True)
        entries, _ = walk.read(None)
        return walk.offset, entries

    def replace_blocks(self, entry: Entry, blocks: dict[int, dict[str, Any]]) -> Entry:
        """A copy of `entry` whose message content has the given blocks (by index) replaced."""
        obj = dict(entry.obj)
        message = dict(obj["message"])
        content = list(message["content"])
        for index, block in blocks.items():
            content[index] = block
        message["content"] = content
        obj["message"] = message
        return entry.replace(obj)

    def meta_entries(self, entries: Sequence[Entry], texts: Sequence[str], when: str) -> list[Entry]:
        """isMeta user lines holding injected text, chained one after another below the last line."""
        last, fields = _anchor(entries)
        parent = last.get("uuid") if last else None
        # Each line newer than every line above it (markers included), or the ones after the first are not loaded.
        clock = _appended_clock(entries, when)
        out = []
        for injected in texts:
            line_uuid = str(uuidlib.uuid5(CTXPIPE_NAMESPACE, orjson.dumps(["meta", parent, injected]).decode()))
            out.append(
                Entry(
                    {
                        "parentUuid": parent,
                        **fields,
                        "type": "user",
                        "message": {"role": "user", "content": injected},
                        "isMeta": True,
                        "uuid": line_uuid,
                        "timestamp": next(clock),
                    }
                )
            )
            parent = line_uuid
        return out

    def marker(self, entries: Sequence[Entry], subtype: str, text: str, metadata_key: str, metadata: dict[str, Any], when: str) -> Entry | None:
        """A system line recording what a stage did, appended as a child of the last line.

        It carries the envelope of the last conversation line (session, cwd, version) and a uuid
        derived from its content, so the same run gives the same bytes.
        """
        last, fields = _anchor(entries)
        if last is None:
            return None
        body = orjson.dumps([subtype, metadata, last["uuid"]])
        obj: dict[str, Any] = {"parentUuid": last["uuid"], **fields}
        obj.update(
            {
                "type": "system",
                "subtype": subtype,
                "content": text,
                "isMeta": False,
                "level": "info",
                metadata_key: metadata,
                "uuid": str(uuidlib.uuid5(CTXPIPE_NAMESPACE, body.decode())),
                "timestamp": next(_appended_clock(entries, when)),
            }
        )
        return Entry(obj)

    def compacted(self, entries: Sequence[Entry], tail: Sequence[int], summary: str, metadata: dict[str, Any], when: str) -> list[Entry]:
        """The lines a summary appends: a compact_boundary (a root whose logicalParentUuid is the last
        line), the isCompactSummary user line, then the kept tail again under its own uuids.

        Claude Code loads the later line of a uuid, so re-emitting the tail (its first lines
        re-parented to the summary) makes the compacted chain the one it resumes.
        """
        anchor, base = _anchor(entries)
        last = anchor or {}
        session = text(base, "sessionId") or ""
        seed = orjson.dumps([session, last.get("uuid"), summary]).decode()
        boundary_uuid = str(uuidlib.uuid5(CTXPIPE_NAMESPACE, "boundary:" + seed))
        summary_uuid = str(uuidlib.uuid5(CTXPIPE_NAMESPACE, "summary:" + seed))
        boundary: dict[str, Any] = {
            "parentUuid": None,
            "logicalParentUuid": last.get("uuid"),
            **base,
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "isMeta": False,
            "timestamp": when,
            "uuid": boundary_uuid,
            "level": "info",
            "compactMetadata": metadata,
        }
        summary_line: dict[str, Any] = {
            "parentUuid": boundary_uuid,
            **base,
            "type": "user",
            "message": {"role": "user", "content": summary},
            "isVisibleInTranscriptOnly": True,
            "isCompactSummary": True,
            "uuid": summary_uuid,
            "timestamp": when,
        }
        out = [Entry(boundary), Entry(summary_line)]
        kept = {text(entries[p].obj, "uuid") for p in tail}
        for position in tail:
            entry = entries[position]
            if text(entry.obj, "parentUuid") not in kept:
                entry = entry.replace({**entry.obj, "parentUuid": summary_uuid})
            out.append(entry)
        return out

    def markers(self, entries: Sequence[Entry]) -> list[Marker]:
        """Records of stages that removed content from the context (microcompact, collapse, …), and
        Claude Code 2.1.332's attachments that change the next request: thinking_stripped (the
        thinking before it is no longer sent) and message_pdf_reads (PDF pages it adds)."""
        return folded(entries, MARKERS).found

    def recorded_window(self, entries: Sequence[Entry]) -> int | None:
        return None  # the lines name the model, not its window

    def recorded_cwd(self, entries: Sequence[Entry]) -> str | None:
        """The newest line's `cwd` (each line carries the folder it ran in)."""
        return next((str(entry.obj["cwd"]) for entry in reversed(entries) if isinstance(entry.obj.get("cwd"), str)), None)

    def recorded_model(self, entries: Sequence[Entry]) -> str | None:
        return None  # only a response names its model

    def is_lone_response(self, entry: Entry) -> bool:
        """A line is a whole response on its own here (one content block a line, the usage on each):
        what messages([entry]) makes of it, read from the line's fields."""
        obj = entry.obj
        payload = obj.get("message")
        if entry_type(obj) != "assistant" or not isinstance(payload, dict) or not isinstance(payload.get("usage"), dict):
            return False
        return not is_unmetered(obj) and payload.get("model") != SYNTHETIC_MODEL

    def continues_earlier(self, head: Sequence[Entry]) -> bool:
        """The first conversation line names a parent no line above it has (a parent comes before
        its child): the file was cut out of a longer session."""
        seen: set[Any] = set()
        for entry in head:
            obj = entry.obj
            if entry_type(obj) in MESSAGE_TYPES and not obj.get("isSidechain"):
                parent = obj.get("parentUuid")
                return isinstance(parent, str) and parent not in seen
            seen.add(obj.get("uuid"))
        return False

    def check(self, entries: Sequence[Entry]) -> list[Finding]:
        # One pass reads from each line what the rules need: the lines of a long file lie far apart
        # in memory, so every pass over them is paid for in cache misses, not in the rules' work.
        duplicates: list[Finding] = []
        first_line_of: dict[str, int] = {}
        latest: dict[str, int] = {}  # uuid_index: a uuid names its latest line
        parents: list[Any] = []
        tree_parents: list[tuple[str, int]] = []  # (parentUuid, line) of each tree line that names one
        responses = _ResponseGroups()
        events: list[tuple[int, bool, str]] = []  # (position, is a tool_use, tool id) of every tool block of a message
        add_parent, add_tree_parent, add_response, add_event = parents.append, tree_parents.append, responses.add, events.append
        for position, entry in enumerate(entries):
            obj = entry.obj
            value = obj.get("uuid")
            if isinstance(value, str):
                if value in first_line_of:
                    duplicates.append(
                        Finding("warning", "duplicate-uuid", f"uuid {value} also on line {first_line_of[value]}; the later line wins", entry.line)
                    )
                else:
                    first_line_of[value] = entry.line
                latest[value] = position
            parent = obj.get("parentUuid")
            add_parent(parent)
            kind = obj.get("type")  # entry_type's, read only against strings: a hostile list or object is none of them
            if isinstance(parent, str) and kind in TREE_TYPES:
                add_tree_parent((parent, entry.line))
            if kind in MESSAGE_TYPES:
                payload = obj.get("message")
                if isinstance(payload, dict):
                    if kind == "assistant":
                        add_response(obj, payload, entry.line)
                    content = payload.get("content")
                    if isinstance(content, list):  # a plain string content holds no tool block
                        for block in content:
                            if isinstance(block, dict) and (event := tool_event(block)) is not None:
                                add_event((position, *event))
        findings = duplicates
        for parent, line in tree_parents:
            if parent not in first_line_of:
                findings.append(Finding("warning", "dangling-parent", f"parentUuid {parent} names no line in this file", line))
        parent_of = [latest.get(parent) if isinstance(parent, str) else None for parent in parents]
        findings.extend(_cycle_findings(entries, _cycles(parent_of)))
        findings.extend(responses.findings)
        findings.extend(_check_tool_pairs(entries, context_positions(entries, latest=latest), events))
        return findings

    def checked_part(self, obj: dict[str, Any]) -> dict[str, Any]:
        """check() reads a line's uuid links, type and subtype, requestId, isSidechain, its message's
        id and the type and ids of its tool blocks (through context_positions too), each with get():
        a copy of these alone (None where one is missing, which get() reads the same), a tenth of a
        line or less, every value as it is (so a hostile one reads the same)."""
        get = obj.get
        message = get("message")
        if isinstance(message, dict):
            content = message.get("content")
            tools: list[dict[str, Any]] | None = None  # a plain string holds no tool block
            if isinstance(content, list):
                tools = []  # a loop, not a comprehension: most lines have one block, and a comprehension costs a frame
                for block in content:
                    if isinstance(block, dict) and block.get("type") in _TOOL_BLOCKS:
                        tools.append({"type": block.get("type"), "id": block.get("id"), "tool_use_id": block.get("tool_use_id")})
            message = {"id": message.get("id"), "content": tools}
        else:
            message = None
        return {
            "type": get("type"),
            "subtype": get("subtype"),
            "uuid": get("uuid"),
            "parentUuid": get("parentUuid"),
            "isSidechain": get("isSidechain"),
            "requestId": get("requestId"),
            "message": message,
        }


# The content blocks ClaudeCodeFormat.checked_part keeps (check() reads no other).
_TOOL_BLOCKS = ("tool_use", "tool_result")


def parent_cycles(entries: Sequence[Entry]) -> list[list[int]]:
    """Every loop of parentUuid links, as positions in link order from the loop's first line in the file.

    A uuid names its latest line (as Claude Code loads it), so each line has at most one parent and
    one walk per line, stopping at any line already walked, finds every loop in linear time.
    """
    latest = uuid_index(entries)
    return _cycles([latest.get(parent) if isinstance(parent := entry.obj.get("parentUuid"), str) else None for entry in entries])


def _cycles(parent_of: Sequence[int | None]) -> list[list[int]]:
    """parent_cycles from each line's parent position."""
    walked = [0] * len(parent_of)  # the number of the walk that reached a line; 0: not yet
    cycles = []
    for start in range(len(parent_of)):
        if walked[start]:
            continue
        path: list[int] = []
        position: int | None = start
        while position is not None and not walked[position]:
            walked[position] = start + 1
            path.append(position)
            position = parent_of[position]
        if position is not None and walked[position] == start + 1:  # this walk came back to itself
            loop = path[path.index(position) :]
            first = loop.index(min(loop))
            cycles.append(loop[first:] + loop[:first])
    return sorted(cycles)  # in file order of their first lines


def _cycle_findings(entries: Sequence[Entry], cycles: list[list[int]]) -> list[Finding]:
    findings = []
    for loop in cycles:
        lines = [str(entries[position].line) for position in loop]
        named = " → ".join(lines[:8]) + (f" → … ({len(lines)} lines)" if len(lines) > 8 else "") + f" → {lines[0]}"
        findings.append(Finding("error", "parent-cycle", f"parentUuid links loop: line {named}; the chain has no root", entries[loop[0]].line))
    return findings


class _ResponseGroups:
    """All lines of one message.id must agree on requestId and on being a sidechain (fed the
    assistant lines in file order)."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.seen: dict[str, tuple[Any, Any, int]] = {}

    def add(self, obj: dict[str, Any], message: dict[str, Any], line: int) -> None:
        message_id = message.get("id")
        if not isinstance(message_id, str):
            return
        shape = (text(obj, "requestId"), bool(obj.get("isSidechain")))
        if message_id not in self.seen:
            self.seen[message_id] = (*shape, line)
            return
        request_id, sidechain, first = self.seen[message_id]
        if sidechain != shape[1]:
            self.findings.append(Finding("error", "split-response", f"message {message_id} spans main chain and sidechain (first line {first})", line))
        elif request_id != shape[0] and request_id and shape[0]:
            self.findings.append(Finding("warning", "request-mismatch", f"message {message_id} has requestId {shape[0]}, line {first} has {request_id}", line))


def _check_tool_pairs(entries: Sequence[Entry], context: Sequence[int], events: list[tuple[int, bool, str]]) -> list[Finding]:
    """A result must follow a tool_use with its id in the file (core.convert's rule); in the active
    context, pairs must be whole. `events`: (position, is a tool_use, tool id) of every tool block
    on a user or assistant line, in file order."""
    from ..core.convert import EARLY, UNASKED, unasked_results  # core.convert's rule: loaded when a file is checked (its report types are convert's)

    first_use: dict[str, int] = {}
    for position, is_use, tool_id in events:
        if is_use:
            first_use.setdefault(tool_id, entries[position].line)
    findings: list[Finding] = []
    reported: set[str] = set()  # one finding per tool id, at its first bad result
    for index, why in unasked_results([(is_use, tool_id) for _, is_use, tool_id in events]).items():
        position, _, tool_id = events[index]
        if tool_id in reported:
            continue
        reported.add(tool_id)
        if why == EARLY:
            findings.append(Finding("error", "result-before-use", f"tool_result for {tool_id} {why} (line {first_use[tool_id]})", entries[position].line))
        else:
            findings.append(Finding("error", "orphan-tool-result", f"tool_result for {tool_id} {UNASKED} in this file", entries[position].line))
    in_context = set(context)
    uses: dict[str, int] = {}
    results: dict[str, int] = {}
    for position, is_use, tool_id in events:
        if position in in_context:
            (uses if is_use else results).setdefault(tool_id, entries[position].line)
    for tool_id, line in results.items():
        if tool_id not in uses and tool_id not in reported:
            findings.append(Finding("error", "orphan-tool-result", f"tool_result for {tool_id} answers a tool_use outside the active context", line))
    for tool_id, line in uses.items():
        if tool_id not in results:
            findings.append(Finding("warning", "unanswered-tool-use", f"tool_use {tool_id} has no tool_result (interrupted?)", line))
    return findings


FORMAT = ClaudeCodeFormat()
