"""Where summaries come from: the session's own notes, a model, or (summarize.py) the transcript alone.

The LLM engine's rules live here; the model itself is a port (SummaryModel) handed in, whose real
implementation (jobs/llm.py) is the anthropic client. The client already retries 429, 529, 5xx and
timeouts with exponential backoff and jitter (honouring retry-after); on top of that this module
drops the oldest API rounds when the prompt is too long (at most 3 times), refuses an answer that
is a tool call, and stops calling the API after 3 consecutive failed summaries in one run.

The server is not trusted either: one deadline bounds a whole summary (every request, retry, wait
and byte of the answer, however slowly it drips), the answer is read up to a size limit (jobs/llm.py)
and parsed here (anything that is not a Messages API reply is a failed summary, never a traceback), and every
message made from an API failure has the key and anything shaped like a credential redacted.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from .blocks import is_text, is_tool_use, kind_of
from .errors import CtxpipeError
from .fields import moment
from .jsonl import LONE_SURROGATE, Entry, as_text
from .model import Message
from .summarize import SECTIONS, format_llm_summary

if TYPE_CHECKING:
    from .summarize import SummarizeSettings

MAX_PTL_RETRIES = 3
BREAKER_LIMIT = 3
SUMMARY_MAX_TOKENS = 20_000
TRUNCATION_MARKER = "[earlier conversation truncated for compaction retry]"
SECTION_CHARS = 2000 * 4
SECTION_TRUNCATED = "\n[... section truncated for length ...]"
SUMMARY_TIMEOUT = 300.0  # seconds for one whole summary; a typical one takes 30-120 s
DEFAULT_MODEL = "claude-sonnet-4-6"  # the llm engine's model when neither --model nor the transcript names one


class SummaryFailed(CtxpipeError):
    """The model gave no usable summary."""


# Credentials in text a server sent back: Anthropic keys and the values of auth headers.
_CREDENTIALS = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]+"
    r"|(?P<name>\b(?:x-api-key|(?:proxy-)?authorization)\b[\"']?\s*[:=]\s*[\"']?(?:(?:Bearer|Basic)\s+)?)(?!\[redacted\]|(?:Bearer|Basic)\s)[^\s\"',;)}\]]+",
    re.IGNORECASE,
)


def redact(text: str, *secrets: str | None) -> str:
    """`text` with each of `secrets` and anything shaped like a credential replaced by [redacted].

    A secret of 8 characters or more goes wherever it stands; a shorter one (`sk-1234`) wherever it
    stands as a token of its own, so that it cannot leak and ordinary words holding it stay whole."""
    for secret in secrets:
        if not secret:
            continue
        if len(secret) >= 8:
            text = text.replace(secret, "[redacted]")
        else:
            text = re.sub(rf"(?<![\w-]){re.escape(secret)}(?![\w-])", "[redacted]", text)
    return _CREDENTIALS.sub(lambda match: (match.group("name") or "") + "[redacted]", text)


# --- session memory ----------------------------------------------------------------------------


def is_session_id(value: object) -> bool:
    """A session id as Claude Code writes it (a UUID): the only kind a path may be built from."""
    if not isinstance(value, str) or len(value) != 36:
        return False
    try:
        return str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False


def usable_notes(text: str) -> bool:
    """Not empty and not just the template (headings and their italic description lines)."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and not (stripped.startswith("_") and stripped.endswith("_")):
            return True
    return False


def notes_cover(written: datetime, history_end: datetime | None) -> tuple[bool, str]:
    """Whether notes last written at `written` cover a history whose newest message is at
    `history_end`, and why. Claude Code records the last message its notes summarized
    (lastSummarizedMessageId); a file on disk keeps only its time, so notes written before the
    history's last message may lack the end of it. A history that records no time cannot be
    checked: it is taken as covered, and the reason says so."""
    if history_end is None:
        return True, "the history records no times, so the notes are taken as covering it"
    if written >= history_end:
        return True, f"written at {_when(written)}, after the history's last message at {_when(history_end)}"
    return False, f"written at {_when(written)}, before the history's last message at {_when(history_end)}"


def history_end(entries: Sequence[Entry], history: Sequence[Message]) -> datetime | None:
    """The newest time recorded on the lines of `history` (None when none records one)."""
    times = [t for m in history for p in m.entries if (t := moment(entries[p].obj.get("timestamp"))) is not None]
    return max(times, default=None)


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


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


def transcript_model(messages: Sequence[Message]) -> str:
    """The llm engine's default model: the Claude model of the transcript's latest response, else DEFAULT_MODEL."""
    for message in reversed(messages):
        if message.role == "assistant" and message.model and message.model.startswith("claude"):
            return str(message.model)
    return DEFAULT_MODEL


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
    deadline: float = 0.0  # the summary's deadline (time.monotonic()): a repair request shares it


def api_rounds(messages: Sequence[Message]) -> list[list[Message]]:
    """Claude Code's groupMessagesByApiRound: a new group at each new assistant response."""
    groups: list[list[Message]] = [[]]
    for message in messages:
        if message.role == "assistant" and groups[-1] and any(m.role == "assistant" for m in groups[-1]):
            groups.append([])
        groups[-1].append(message)
    return [group for group in groups if group]


def _render_block(block: dict[str, Any], role: str, names: dict[str, str], describe_images: bool) -> list[dict[str, Any]]:
    kind = kind_of(block)
    if kind == "text":
        return [{"type": "text", "text": f"[{role}]: {block.get('text', '')}"}]
    if kind == "tool_use":
        names[str(block.get("id"))] = str(block.get("name"))
        return [{"type": "text", "text": f"[assistant called {block.get('name')}]: {as_text(block.get('input'))}"}]
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


def request_content(messages: Sequence[Message], settings: SummarizeSettings, truncated: bool) -> list[dict[str, Any]]:
    """The conversation rendered as one user message, then our instructions."""
    names: dict[str, str] = {}
    content: list[dict[str, Any]] = [{"type": "text", "text": "<conversation>"}]
    if truncated:
        content.append({"type": "text", "text": TRUNCATION_MARKER})
    for message in messages:
        for block in message.content:
            content += _render_block(block, message.role, names, settings.describe_images)
    extra = f"\n\nAdditional Instructions:\n{settings.instructions.strip()}" if settings.instructions and settings.instructions.strip() else ""
    sections = "\n".join(f"{number}. {name}" for number, name in enumerate(SECTIONS, 1))
    content.append({"type": "text", "text": "</conversation>\n\n" + INSTRUCTIONS.format(sections=sections, extra=extra)})
    # Consecutive text parts merge into one block: fewer, larger blocks are cheaper to send.
    merged: list[dict[str, Any]] = []
    for part in content:
        if part["type"] == "text" and merged and merged[-1]["type"] == "text":
            merged[-1] = {"type": "text", "text": merged[-1]["text"] + "\n" + part["text"]}
        else:
            merged.append(part)
    return [{**part, "text": sendable(part["text"])} if part["type"] == "text" else part for part in merged]


def sendable(text: str) -> str:
    """`text` as a request can carry it: a lone surrogate (Claude Code writes one where it cut a string
    inside an emoji, and the readers keep it) is no UTF-8, so it goes as U+FFFD."""
    return LONE_SURROGATE.sub("\ufffd", text)


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


class ModelCallFailed(Exception):
    """A request the model's client could not complete; its text is the client's own."""


class PromptRefused(ModelCallFailed):
    """The server refused the request (HTTP 400); a prompt too long says so in the text."""


class SummaryModel(Protocol):
    """The llm engine's port to the model: one Messages API request at a time, within the
    summary's deadline (jobs/llm.AnthropicModel, on the anthropic client, is the real one)."""

    @property
    def where(self) -> str:
        """The endpoint, as a failure names it."""
        ...

    @property
    def secret(self) -> str | None:
        """The key, redacted from every failure's text."""
        ...

    async def ask(self, content: str | list[dict[str, Any]]) -> tuple[str, bool, dict[str, int]]:
        """(text, whether it called a tool, usage) of the answer to one user message, the client's
        retries included (parse_reply reads it). The server refusing the request raises
        PromptRefused, any other failed call ModelCallFailed; an answer that cannot be read, SummaryFailed."""
        ...


def failed(secret: str | None, message: str) -> SummaryFailed:
    """The one way an API failure becomes text: with the key and any credential redacted."""
    return SummaryFailed(redact(message, secret))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def parse_reply(body: bytes, secret: str | None) -> tuple[str, bool, dict[str, int]]:
    """(text, whether it called a tool, usage) of a Messages API reply; SummaryFailed for anything else."""
    try:
        reply = orjson.loads(body)
    except orjson.JSONDecodeError:
        shown = body[:80].decode("utf-8", "replace")
        raise failed(secret, f"the API's answer is not JSON ({len(body):,} bytes: {shown!r})") from None
    content = reply.get("content") if isinstance(reply, dict) else None
    if not isinstance(content, list):
        raise failed(secret, "the API's answer is not a Messages API reply (no content list)")
    blocks = [block for block in content if isinstance(block, dict)]
    text = "".join(block["text"] for block in blocks if is_text(block) and isinstance(block.get("text"), str))
    called_tool = any(is_tool_use(block) for block in blocks)
    usage = reply.get("usage")
    counts = {key: _count(usage.get(key)) for key in ("input_tokens", "output_tokens")} if isinstance(usage, dict) else {}
    return text, called_tool, counts


async def summary_of(model: SummaryModel, messages: Sequence[Message], settings: SummarizeSettings, progress: Callable[[str], None] | None) -> LlmResult:
    """Ask `model` for the nine-section summary of `messages`; SummaryFailed when it cannot be had."""
    groups = api_rounds(messages)
    dropped = 0
    attempts = 0
    reminded = False
    while True:
        attempts += 1
        kept = [m for group in groups[dropped:] for m in group]
        content = request_content(kept, settings, truncated=dropped > 0)
        if reminded:
            content.append({"type": "text", "text": "Your previous answer called a tool. Answer with the text summary only."})
        try:
            text, called_tool, usage = await model.ask(content)
        except PromptRefused as exc:
            excess = _too_long(exc)
            if excess is False or dropped >= len(groups) - 1 or attempts > MAX_PTL_RETRIES:
                raise failed(model.secret, f"the model at {model.where} refused the request: {exc}") from None
            dropped += _drop(groups[dropped:], excess if isinstance(excess, tuple) else None)
            if progress:
                progress(f"prompt too long: dropped the oldest {dropped} API round(s), retrying")
            continue
        except ModelCallFailed as exc:
            raise failed(model.secret, f"the API call to {model.where} failed: {exc}") from None
        if called_tool:
            if reminded:
                raise failed(model.secret, "the model answered with a tool call instead of a summary")
            reminded = True
            continue
        if not text.strip():
            raise failed(model.secret, "the model's answer holds no text")
        if text.lstrip().startswith(("API Error", "Prompt is too long")):
            raise failed(model.secret, f"the model answered with an error: {text[:200]}")
        if "<analysis>" in text and "</analysis>" not in text and "</summary>" not in text:
            # Cut off inside its analysis (max_tokens): the half-written analysis is no summary.
            raise failed(model.secret, "the model's answer stops inside its <analysis> block, before any summary")
        summary = format_llm_summary(text)
        if not summary:
            raise failed(model.secret, "the model's answer holds no summary (only an <analysis> block)")
        return LlmResult(summary, attempts, dropped, usage)


async def repaired(model: SummaryModel, summary: str, missing: Sequence[str]) -> str:
    """One request asking the model to rewrite the summary so it also carries the missing facts."""
    listing = "\n".join(f"- {fact}" for fact in missing)
    prompt = (
        f"Here is a summary of a coding session:\n\n{summary}\n\nIt leaves out these facts, which the session "
        f"must keep:\n{listing}\n\nRewrite the summary, same nine sections, so that it carries every one of "
        "them (user instructions verbatim). Text only, no tool calls. Put the result inside <summary></summary>."
    )
    try:
        text, called_tool, _ = await model.ask(sendable(prompt))
    except ModelCallFailed as exc:
        raise failed(model.secret, f"the repair request failed: {exc}") from None
    # Only a rewritten summary replaces the one there is: a refusal, a tool call or an error text
    # would throw the model's summary away.
    if called_tool:
        raise failed(model.secret, "the repair request was answered with a tool call, not a summary")
    if not re.search(r"<summary>\s*\S.*?</summary>", text, flags=re.S):
        raise failed(model.secret, "the repair request's answer holds no <summary> block")
    return format_llm_summary(text)
