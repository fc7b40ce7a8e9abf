"""Where summaries come from: the session's own notes, a model, or (summarize.py) the transcript alone.

The LLM engine uses the real anthropic client. The client already retries 429, 529, 5xx and
timeouts with exponential backoff and jitter (honouring retry-after); on top of that this module
drops the oldest API rounds when the prompt is too long (at most 3 times), refuses an answer that
is a tool call, and stops calling the API after 3 consecutive failed summaries in one run.

The server is not trusted either: one deadline bounds a whole summary (every request, retry, wait
and byte of the answer, however slowly it drips), the answer is read up to a size limit and parsed
here (anything that is not a Messages API reply is a failed summary, never a traceback), and every
message made from an API failure has the key and anything shaped like a credential redacted.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson

from .errors import CtxpipeError
from .fields import moment
from .jsonl import Entry
from .model import Message
from .summarize import SECTIONS, format_llm_summary

MAX_PTL_RETRIES = 3
BREAKER_LIMIT = 3
SUMMARY_MAX_TOKENS = 20_000
TRUNCATION_MARKER = "[earlier conversation truncated for compaction retry]"
SECTION_CHARS = 2000 * 4
SECTION_TRUNCATED = "\n[... section truncated for length ...]"
SUMMARY_TIMEOUT = 300.0  # seconds for one whole summary; a typical one takes 30-120 s
DEFAULT_MODEL = "claude-sonnet-4-6"  # the llm engine's model when neither --model nor the transcript names one
MAX_REPLY_BYTES = 16 * 1024 * 1024  # a 20,000-token answer is about 100 KB of JSON

T = TypeVar("T")


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


def find_session_memory(transcript: Path, session_id: str | None) -> Path | None:
    """<project dir>/<session id>/session-memory/summary.md beside the transcript.

    The id comes from the transcript, which is untrusted: anything but a UUID ("../x", "/tmp/y")
    is ignored rather than joined into a path. The file's own name is the user's choice.
    """
    names = [n for n in (session_id if is_session_id(session_id) else None, transcript.stem) if n and n not in (".", "..")]
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


@dataclass(frozen=True)
class LlmConfig:
    model: str
    api_key: str | None = None
    base_url: str | None = None
    instructions: str | None = None
    describe_images: bool = False
    max_tokens: int = SUMMARY_MAX_TOKENS
    timeout: float = SUMMARY_TIMEOUT  # seconds for the whole summary: every request, retry and wait
    max_retries: int = 4


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


ANTHROPIC_API = "https://api.anthropic.com"  # where the client sends a request when no base URL is given


def _failed(config: LlmConfig, message: str) -> SummaryFailed:
    """The one way an API failure becomes text: with the key and any credential redacted."""
    return SummaryFailed(redact(message, config.api_key))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def parse_reply(body: bytes, config: LlmConfig) -> tuple[str, bool, dict[str, int]]:
    """(text, whether it called a tool, usage) of a Messages API reply; SummaryFailed for anything else."""
    try:
        reply = orjson.loads(body)
    except orjson.JSONDecodeError:
        shown = body[:80].decode("utf-8", "replace")
        raise _failed(config, f"the API's answer is not JSON ({len(body):,} bytes: {shown!r})") from None
    content = reply.get("content") if isinstance(reply, dict) else None
    if not isinstance(content, list):
        raise _failed(config, "the API's answer is not a Messages API reply (no content list)")
    blocks = [block for block in content if isinstance(block, dict)]
    text = "".join(block["text"] for block in blocks if block.get("type") == "text" and isinstance(block.get("text"), str))
    called_tool = any(block.get("type") == "tool_use" for block in blocks)
    usage = reply.get("usage")
    counts = {key: _count(usage.get(key)) for key in ("input_tokens", "output_tokens")} if isinstance(usage, dict) else {}
    return text, called_tool, counts


def _client(config: LlmConfig, client: Any) -> Any:
    """An async client: the deadline cancels its requests, retry waits and reads outright."""
    import anthropic

    if isinstance(client, anthropic.AsyncAnthropic):
        return client
    if isinstance(client, anthropic.Anthropic):  # a sync client given: its settings, on a client the deadline can cancel
        return anthropic.AsyncAnthropic(
            api_key=client.api_key, auth_token=client.auth_token, base_url=client.base_url, timeout=client.timeout, max_retries=client.max_retries
        )
    if client is not None:
        raise TypeError("client must be an anthropic.Anthropic or anthropic.AsyncAnthropic")
    if not config.api_key:
        raise SummaryFailed("the llm engine needs ANTHROPIC_API_KEY")
    return anthropic.AsyncAnthropic(api_key=config.api_key, base_url=config.base_url, timeout=config.timeout, max_retries=config.max_retries)


def _in_a_loop(make: Callable[[], Awaitable[T]]) -> T:
    import asyncio
    import concurrent.futures

    async def main() -> T:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    # Called from async code (a library user's event loop): run on a loop of our own, in a thread.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def _with_deadline(config: LlmConfig, client: Any, deadline: float | None, work: Callable[[Any], Awaitable[T]], what: str) -> tuple[T, float]:
    """(`work(async client)`'s result, the deadline) when it completes by `deadline` (a time.monotonic()
    instant; None: config.timeout from now, counted once the client is ready), else SummaryFailed."""
    import anyio

    async def bounded() -> tuple[T, float]:
        api = _client(config, client)  # imports the SDK: a slow start is not the server's time
        end = time.monotonic() + config.timeout if deadline is None else deadline
        try:
            with anyio.move_on_after(max(0.0, end - time.monotonic())):
                return await work(api), end
        finally:
            if api is not client:
                await api.close()
        raise _failed(config, f"{what} to {config.base_url or ANTHROPIC_API} timed out: a summary may take {config.timeout:g} s in all (--timeout)")

    return _in_a_loop(bounded)


async def _ask(api: Any, config: LlmConfig, content: Any) -> tuple[str, bool, dict[str, int]]:
    """One request (with the client's own retries); the answer read up to MAX_REPLY_BYTES and parsed."""
    import anthropic

    body = bytearray()
    async with api.messages.with_streaming_response.create(
        model=config.model, max_tokens=config.max_tokens, system=SYSTEM, messages=[{"role": "user", "content": content}]
    ) as response:
        try:
            async for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_REPLY_BYTES:
                    raise _failed(config, f"the API's answer is larger than {MAX_REPLY_BYTES // 1024 // 1024} MB")
        except (anthropic.APIError, SummaryFailed):
            raise
        except Exception as exc:  # the transport's own errors (the connection dropped mid-answer...)
            raise _failed(config, f"the API's answer could not be read: {exc.__class__.__name__}: {exc}") from None
    return parse_reply(bytes(body), config)


def llm_summary(
    messages: Sequence[Message], config: LlmConfig, progress: Callable[[str], None] | None = None, client: Any = None, deadline: float | None = None
) -> LlmResult:
    """Ask the model for the nine-section summary; raises SummaryFailed when it cannot be had.

    Everything (every request, the client's retries and waits) ends by `deadline` (a
    time.monotonic() instant; default: config.timeout seconds from the first request), which the
    result carries for a repair request. `client` (tests, library users) supplies the connection
    settings: an anthropic.AsyncAnthropic, or a sync Anthropic whose settings are used on an async client.
    """
    result, end = _with_deadline(config, client, deadline, lambda api: _summary(api, messages, config, progress), "the summary request")
    result.deadline = end
    return result


async def _summary(api: Any, messages: Sequence[Message], config: LlmConfig, progress: Callable[[str], None] | None) -> LlmResult:
    import anthropic

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
            text, called_tool, usage = await _ask(api, config, content)
        except anthropic.BadRequestError as exc:
            excess = _too_long(exc)
            if excess is False or dropped >= len(groups) - 1 or attempts > MAX_PTL_RETRIES:
                raise _failed(config, f"the model at {config.base_url or ANTHROPIC_API} refused the request: {exc}") from None
            dropped += _drop(groups[dropped:], excess if isinstance(excess, tuple) else None)
            if progress:
                progress(f"prompt too long: dropped the oldest {dropped} API round(s), retrying")
            continue
        except anthropic.APIError as exc:
            raise _failed(config, f"the API call to {config.base_url or ANTHROPIC_API} failed: {exc}") from None
        if called_tool:
            if reminded:
                raise _failed(config, "the model answered with a tool call instead of a summary")
            reminded = True
            continue
        if not text.strip():
            raise _failed(config, "the model's answer holds no text")
        if text.lstrip().startswith(("API Error", "Prompt is too long")):
            raise _failed(config, f"the model answered with an error: {text[:200]}")
        summary = format_llm_summary(text)
        if not summary:
            raise _failed(config, "the model's answer holds no summary (only an <analysis> block)")
        return LlmResult(summary, attempts, dropped, usage)


def repair_summary(summary: str, missing: Sequence[str], config: LlmConfig, client: Any = None, deadline: float | None = None) -> str:
    """One request asking the model to rewrite the summary so it also carries the missing facts
    (within `deadline`, the summary's own: the repair is part of the summary's time)."""
    listing = "\n".join(f"- {fact}" for fact in missing)
    prompt = (
        f"Here is a summary of a coding session:\n\n{summary}\n\nIt leaves out these facts, which the session "
        f"must keep:\n{listing}\n\nRewrite the summary, same nine sections, so that it carries every one of "
        "them (user instructions verbatim). Text only, no tool calls. Put the result inside <summary></summary>."
    )

    async def repair(api: Any) -> str:
        import anthropic

        try:
            text, _, _ = await _ask(api, config, prompt)
        except anthropic.APIError as exc:
            raise _failed(config, f"the repair request failed: {exc}") from None
        repaired = format_llm_summary(text)
        if not repaired:
            raise _failed(config, "the repair request returned no summary")
        return repaired

    return _with_deadline(config, client, deadline, repair, "the repair request")[0]
