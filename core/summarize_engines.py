"""Where summaries come from: the session's own notes, a model, or (summarize.py) the transcript alone.

The LLM engine uses the real anthropic client. The client already retries 429, 529, 5xx and
timeouts with exponential backoff and jitter (honouring retry-after); on top of that this module
drops the oldest API rounds when the prompt is too long (at most 3 times), refuses an answer that
is a tool call, and stops calling the API after 3 consecutive failed summaries in one run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .errors import CtxpipeError
from .model import Message
from .summarize import SECTIONS, format_llm_summary

MAX_PTL_RETRIES = 3
BREAKER_LIMIT = 3
SUMMARY_MAX_TOKENS = 20_000
TRUNCATION_MARKER = "[earlier conversation truncated for compaction retry]"
SECTION_CHARS = 2000 * 4
SECTION_TRUNCATED = "\n[... section truncated for length ...]"


class SummaryFailed(CtxpipeError):
    """The model gave no usable summary."""


# --- session memory ----------------------------------------------------------------------------


def find_session_memory(transcript: Path, session_id: str | None) -> Path | None:
    """<project dir>/<session id>/session-memory/summary.md beside the transcript."""
    names = [n for n in (session_id, transcript.stem) if n]
    for name in names:
        candidate = transcript.parent / name / "session-memory" / "summary.md"
        if candidate.is_file():
            return candidate
    return None


def usable_notes(text: str) -> bool:
    """Not empty and not just the template (headings and their italic description lines)."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and not (stripped.startswith("_") and stripped.endswith("_")):
            return True
    return False


def notes_summary(text: str, path: str) -> str:
    """The notes as a summary, each section cut at a line boundary to 8,000 characters."""
    sections = re.split(r"(?m)^(?=# )", text.strip())
    out = []
    for section in sections:
        if len(section) > SECTION_CHARS:
            cut = section.rfind("\n", 0, SECTION_CHARS)
            section = section[: cut if cut > 0 else SECTION_CHARS] + SECTION_TRUNCATED
        out.append(section.rstrip())
    return "Summary (from the session notes):\n" + "\n\n".join(out) + f"\n\n(The full notes are at {path}.)"


# --- the model ---------------------------------------------------------------------------------

SYSTEM = (
    "You summarize a conversation between a user and an AI coding agent so that the agent can carry "
    "on the work from your summary alone. You answer in text; you have no tools."
)

INSTRUCTIONS = """Write a summary of the conversation above.

Answer with text only. Do not call any tool (no Read, Bash, Grep, Glob, Edit, Write or any other): a tool call will be refused and your only turn wasted.

First, inside <analysis></analysis>, walk through the conversation in order and note: each explicit request of the user and the intent behind it, the approach taken, the key decisions, the exact details (file names, code, function signatures, edits), the errors met and how they were fixed, and what the user said about the work. Then check your notes for accuracy.

Then, inside <summary></summary>, write these nine numbered sections:
{sections}

Section 6 lists every message the user typed (not tool results), verbatim where short. Section 9 names only a step that follows directly from the latest explicit request, with a verbatim quote from the recent conversation to support it.{extra}

Remember: text only, no tool calls."""


@dataclass(frozen=True)
class LlmConfig:
    model: str
    api_key: str | None = None
    base_url: str | None = None
    instructions: str | None = None
    describe_images: bool = False
    max_tokens: int = SUMMARY_MAX_TOKENS
    timeout: float = 600.0
    max_retries: int = 4


@dataclass
class Breaker:
    """Stops calling the API after `limit` consecutive failed summaries (shared by a whole batch)."""

    limit: int = BREAKER_LIMIT
    failures: int = 0

    @property
    def open(self) -> bool:
        return self.failures >= self.limit

    def record(self, ok: bool) -> None:
        self.failures = 0 if ok else self.failures + 1


@dataclass
class LlmResult:
    text: str
    attempts: int
    dropped_groups: int
    usage: dict[str, int] = field(default_factory=dict)


def api_rounds(messages: Sequence[Message]) -> list[list[Message]]:
    """Claude Code's groupMessagesByApiRound: a new group at each new assistant response."""
    groups: list[list[Message]] = [[]]
    for message in messages:
        if message.role == "assistant" and groups[-1] and any(m.role == "assistant" for m in groups[-1]):
            groups.append([])
        groups[-1].append(message)
    return [group for group in groups if group]


def _render_block(block: dict[str, Any], role: str, names: dict[str, str], describe_images: bool) -> list[dict[str, Any]]:
    kind = block.get("type")
    if kind == "text":
        return [{"type": "text", "text": f"[{role}]: {block.get('text', '')}"}]
    if kind == "tool_use":
        names[str(block.get("id"))] = str(block.get("name"))
        return [{"type": "text", "text": f"[assistant called {block.get('name')}]: {orjson.dumps(block.get('input')).decode()}"}]
    if kind == "tool_result":
        content = block.get("content")
        label = f"[result of {names.get(str(block.get('tool_use_id')), 'a tool')}{' (error)' if block.get('is_error') else ''}]: "
        if isinstance(content, list):
            parts: list[dict[str, Any]] = [{"type": "text", "text": label}]
            for inner in content:
                if isinstance(inner, dict):
                    parts += _render_block(inner, "tool", names, describe_images)
            return parts
        return [{"type": "text", "text": label + str(content or "")}]
    if kind in ("image", "document"):
        if describe_images and kind == "image":
            return [{"type": "text", "text": "[image follows; describe it in one line in the summary as [image: …]]"}, block]
        return [{"type": "text", "text": f"[{kind}]"}]
    return []  # thinking and server-side blocks are not the conversation's content


def request_content(messages: Sequence[Message], config: LlmConfig, truncated: bool) -> list[dict[str, Any]]:
    """The conversation rendered as one user message, then our instructions."""
    names: dict[str, str] = {}
    content: list[dict[str, Any]] = [{"type": "text", "text": "<conversation>"}]
    if truncated:
        content.append({"type": "text", "text": TRUNCATION_MARKER})
    for message in messages:
        for block in message.content:
            content += _render_block(block, message.role, names, config.describe_images)
    extra = f"\n\nAdditional Instructions:\n{config.instructions.strip()}" if config.instructions and config.instructions.strip() else ""
    sections = "\n".join(f"{number}. {name}" for number, name in enumerate(SECTIONS, 1))
    content.append({"type": "text", "text": "</conversation>\n\n" + INSTRUCTIONS.format(sections=sections, extra=extra)})
    # Consecutive text parts merge into one block: fewer, larger blocks are cheaper to send.
    merged: list[dict[str, Any]] = []
    for part in content:
        if part["type"] == "text" and merged and merged[-1]["type"] == "text":
            merged[-1] = {"type": "text", "text": merged[-1]["text"] + "\n" + part["text"]}
        else:
            merged.append(part)
    return merged


def _too_long(error: Exception) -> tuple[int, int] | None | bool:
    text = str(error).lower()
    if "prompt is too long" not in text:
        return False
    numbers = re.search(r"(\d+)\s*tokens\s*>\s*(\d+)", text)
    return (int(numbers.group(1)), int(numbers.group(2))) if numbers else None


def _drop(groups: list[list[Message]], excess: tuple[int, int] | None) -> int:
    """How many of the oldest groups to drop: enough for the reported excess, else a fifth."""
    if excess:
        from .tokens import RoughCounter, estimate_blocks

        needed, dropped, freed = excess[0] - excess[1], 0, 0
        while dropped < len(groups) - 1 and freed < needed:
            freed += sum(estimate_blocks(m.content, RoughCounter()) for m in groups[dropped])
            dropped += 1
        return max(1, dropped)
    return max(1, len(groups) // 5)


def llm_summary(messages: Sequence[Message], config: LlmConfig, progress: Callable[[str], None] | None = None, client: Any = None) -> LlmResult:
    """Ask the model for the nine-section summary; raises SummaryFailed when it cannot be had."""
    import anthropic

    if client is None:
        if not config.api_key:
            raise SummaryFailed("the llm engine needs ANTHROPIC_API_KEY")
        client = anthropic.Anthropic(api_key=config.api_key, base_url=config.base_url, timeout=config.timeout, max_retries=config.max_retries)
    groups = api_rounds(messages)
    dropped = 0
    attempts = 0
    reminded = False
    while True:
        attempts += 1
        kept = [m for group in groups[dropped:] for m in group]
        content = request_content(kept, config, truncated=dropped > 0)
        if reminded:
            content.append({"type": "text", "text": "Your previous answer called a tool. Answer with the text summary only."})
        try:
            response = client.messages.create(model=config.model, max_tokens=config.max_tokens, system=SYSTEM,
                                              messages=[{"role": "user", "content": content}])
        except anthropic.BadRequestError as exc:
            excess = _too_long(exc)
            if excess is False or dropped >= len(groups) - 1 or attempts > MAX_PTL_RETRIES:
                raise SummaryFailed(f"the model refused the request: {exc}") from None
            dropped += _drop(groups[dropped:], excess if isinstance(excess, tuple) else None)
            if progress:
                progress(f"prompt too long: dropped the oldest {dropped} API round(s), retrying")
            continue
        except anthropic.APIError as exc:
            raise SummaryFailed(f"the API call failed: {exc}") from None
        text = "".join(getattr(block, "text", "") for block in response.content if getattr(block, "type", "") == "text")
        called_tool = any(getattr(block, "type", "") == "tool_use" for block in response.content)
        if called_tool or not text.strip():
            if reminded:
                raise SummaryFailed("the model answered with a tool call instead of a summary")
            reminded = True
            continue
        if text.lstrip().startswith(("API Error", "Prompt is too long")):
            raise SummaryFailed(f"the model answered with an error: {text[:200]}")
        usage = getattr(response, "usage", None)
        return LlmResult(format_llm_summary(text), attempts, dropped,
                         {"input_tokens": getattr(usage, "input_tokens", 0), "output_tokens": getattr(usage, "output_tokens", 0)} if usage else {})


def repair_summary(summary: str, missing: Sequence[str], config: LlmConfig, client: Any = None) -> str:
    """One request asking the model to rewrite the summary so it also carries the missing facts."""
    import anthropic

    if client is None:
        client = anthropic.Anthropic(api_key=config.api_key, base_url=config.base_url, timeout=config.timeout, max_retries=config.max_retries)
    listing = "\n".join(f"- {fact}" for fact in missing)
    prompt = (f"Here is a summary of a coding session:\n\n{summary}\n\nIt leaves out these facts, which the session "
              f"must keep:\n{listing}\n\nRewrite the summary, same nine sections, so that it carries every one of "
              "them (user instructions verbatim). Text only, no tool calls. Put the result inside <summary></summary>.")
    try:
        response = client.messages.create(model=config.model, max_tokens=config.max_tokens, system=SYSTEM, messages=[{"role": "user", "content": prompt}])
    except anthropic.APIError as exc:
        raise SummaryFailed(f"the repair request failed: {exc}") from None
    text = "".join(getattr(block, "text", "") for block in response.content if getattr(block, "type", "") == "text")
    if not text.strip():
        raise SummaryFailed("the repair request returned no text")
    return format_llm_summary(text)
