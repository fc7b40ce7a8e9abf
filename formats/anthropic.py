"""Anthropic Messages API form: one message per line.

    {"role":"user","content":"Fix the failing test"}
    {"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"pytest"}}]}
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"1 failed"}]}

A line that carries an `id` and `usage` (a stored API response) keeps them; they are read as the
response's recorded usage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.count import Compaction, Marker
from ..core.fields import moment
from ..core.jsonl import Entry
from ..core.model import Finding, Message
from ..core.placeholders import SUMMARY_PREAMBLE
from .base import CompactionSpan, WholeFileContext, WriteOptions, lone_response

ROLES = ("user", "assistant")


class AnthropicFormat(WholeFileContext):
    name = "anthropic"
    summary = "Anthropic Messages API messages, one {role, content} object per line"
    schema = "anthropic.message.schema.json"
    writable = True
    has_usage = True  # a stored API response keeps its `usage`
    has_tree = False
    keeps_history = False  # the file is the context: a summary replaces the messages it covers
    state_lines: tuple[str, ...] = ()  # every line is a message
    lines_are_messages = True
    summary_preamble = SUMMARY_PREAMBLE  # Claude Code's: an API log resumes as Claude Code would
    compacts_at: float | None = None  # Claude Code's thresholds (core.budget)

    def sniff(self, obj: dict[str, Any]) -> bool | None:
        if "role" in obj and "content" in obj and "uuid" not in obj and "payload" not in obj:
            return True
        return False

    def messages(self, entries: Sequence[Entry], history: bool = False) -> list[Message]:
        messages = []
        for position, entry in enumerate(entries):
            obj = entry.obj
            role = obj.get("role")
            if role not in ROLES:
                continue
            content = obj.get("content")
            refs, blocks = entry.blocks(content, position)
            usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
            messages.append(
                Message(
                    role,
                    blocks,
                    [position],
                    obj.get("id") if isinstance(obj.get("id"), str) else None,
                    usage,
                    obj.get("model") if isinstance(obj.get("model"), str) else None,
                    text_content=content if isinstance(content, str) else None,
                    refs=refs,
                    compact_summary=role == "user" and isinstance(content, str) and content.startswith(SUMMARY_PREAMBLE),
                )
            )
        if messages and messages[0].compact_summary:
            # A kept tail: its usage, if any, was measured before the summary. A response stamped
            # after a stamped summary came after it (a compacted session converted from Claude
            # Code, which kept no tail): its usage measures the context as it is.
            summarized = moment(entries[messages[0].entries[0]].obj.get("timestamp"))
            for message in messages:
                answered = moment(entries[message.entries[0]].obj.get("timestamp")) if message.entries else None
                message.usage_stale = summarized is None or answered is None or answered <= summarized
        return messages

    def context_positions(self, entries: Sequence[Entry], history: bool = False) -> list[int]:
        return list(range(len(entries)))

    def api_calls(self, entries: Sequence[Entry]) -> list[Message]:
        return []  # a Messages-API log records no usage: nothing it says was billed

    def split_at_compaction(self, entries: Sequence[Entry]) -> tuple[list[Message], list[Message]] | None:
        return None  # a summary replaces the history: none is left in the file

    def compactions(self, entries: Sequence[Entry]) -> list[CompactionSpan]:
        return []  # a summary replaces the history: nothing is left to check it against

    def boundary_metadata(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        return None  # a summary is a message, not a boundary line

    def from_messages(self, messages: Sequence[dict[str, Any]], options: WriteOptions) -> list[Entry]:
        return [Entry(dict(message)) for message in messages]

    def replace_blocks(self, entry: Entry, blocks: dict[int, dict[str, Any]]) -> Entry:
        obj = dict(entry.obj)
        content = list(obj["content"])
        for index, block in blocks.items():
            content[index] = block
        obj["content"] = content
        return entry.replace(obj)

    def compacted(self, entries: Sequence[Entry], tail: Sequence[int], summary: str, metadata: dict[str, Any], when: str) -> list[Entry]:
        return [Entry({"role": "user", "content": summary})] + [entries[p] for p in tail]

    def meta_entries(self, entries: Sequence[Entry], texts: Sequence[str], when: str) -> list[Entry]:
        return [Entry({"role": "user", "content": text}) for text in texts]

    def marker(self, entries: Sequence[Entry], subtype: str, text: str, metadata_key: str, metadata: dict[str, Any], when: str) -> Entry | None:
        return None  # every line of this format is a message: there is nowhere to record a stage

    def markers(self, entries: Sequence[Entry]) -> list[Marker]:
        return []

    def typed_elsewhere(self, entries: Sequence[Entry]) -> list[tuple[int, Any]]:
        return []  # every line is a message

    def opening(self, entries: Sequence[Entry]) -> Compaction | None:
        # Only ctxpipe writes a summary into a Messages-API file, and it re-injects nothing unrecorded.
        messages = self.messages(entries)
        if messages and messages[0].compact_summary:
            return Compaction(messages[0].entries[0], entries[messages[0].entries[0]].line or None, "nothing")
        return None

    def is_lone_response(self, entry: Entry) -> bool:
        return lone_response(self, entry)

    def continues_earlier(self, head: Sequence[Entry]) -> bool:
        return False  # its lines name no earlier line

    def recorded_window(self, entries: Sequence[Entry]) -> int | None:
        return None  # the lines name the model, not its window

    def recorded_cwd(self, entries: Sequence[Entry]) -> str | None:
        return None  # API messages name no folder

    def recorded_model(self, entries: Sequence[Entry]) -> str | None:
        return None  # only a response names its model

    def check(self, entries: Sequence[Entry]) -> list[Finding]:
        from ..core.convert import EARLY, to_api_messages  # core.convert's rule: loaded when a file is checked (its report types are convert's)

        findings: list[Finding] = []
        messages = self.messages(entries)
        if messages and messages[0].role != "user":
            findings.append(
                Finding(
                    "warning",
                    "first-not-user",
                    "the first message is not from the user; the API expects a user turn first",
                    entries[messages[0].entries[0]].line,
                )
            )
        for previous, current in zip(messages, messages[1:]):
            if previous.role == current.role:
                findings.append(Finding("warning", "same-role", f"two {current.role} messages in a row; the API merges them", entries[current.entries[0]].line))
        _, report = to_api_messages(messages, entries)
        for problem in report.orphans:
            if problem.why == EARLY:
                findings.append(Finding("error", "result-before-use", f"tool_result for {problem.tool_use_id} {EARLY}", problem.line))
            else:
                findings.append(
                    Finding(
                        "error",
                        "orphan-tool-result",
                        f"tool_result for {problem.tool_use_id} does not answer a tool_use in the previous assistant message",
                        problem.line,
                    )
                )
        last_assistant = max((m.entries[0] for m in messages if m.role == "assistant"), default=-1)
        for problem in report.unanswered:
            at_end = problem.line is not None and problem.line >= entries[last_assistant].line
            findings.append(
                Finding(
                    "warning" if at_end else "error",
                    "unanswered-tool-use",
                    f"tool_use {problem.tool_use_id} is not answered in the next user message",
                    problem.line,
                )
            )
        return findings


FORMAT = AnthropicFormat()
