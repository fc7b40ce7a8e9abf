"""The llm engine's model on the anthropic client (core.summarize_engines.SummaryModel's real port).

The client, its retries and its errors live here; what is asked and what an answer must hold are
core's (core.summarize_engines.summary_of, repaired). One deadline bounds a whole summary: the
client is async, so the deadline cancels its requests, retry waits and reads outright.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..core.model import Message
from ..core.summarize import SummarizeSettings
from ..core.summarize_engines import (
    SUMMARY_MAX_TOKENS,
    SUMMARY_TIMEOUT,
    SYSTEM,
    LlmResult,
    ModelCallFailed,
    PromptRefused,
    SummaryFailed,
    failed,
    parse_reply,
    repaired,
    summary_of,
)

ANTHROPIC_API = "https://api.anthropic.com"  # where the client sends a request when no base URL is given
MAX_REPLY_BYTES = 16 * 1024 * 1024  # a 20,000-token answer is about 100 KB of JSON

T = TypeVar("T")


# Not a copy of SummarizeSettings: how the model is reached, resolved from the transcript (the
# model it names) and the environment (the key, the endpoint) by the caller.
@dataclass(frozen=True)
class ModelAccess:
    model: str
    api_key: str | None = None
    base_url: str | None = None


@dataclass(frozen=True)
class AnthropicModel:
    """One summary's model: an async anthropic client, asked with the stage's request."""

    api: Any  # anthropic.AsyncAnthropic
    access: ModelAccess

    @property
    def where(self) -> str:
        return self.access.base_url or ANTHROPIC_API

    @property
    def secret(self) -> str | None:
        return self.access.api_key

    async def ask(self, content: str | list[dict[str, Any]]) -> tuple[str, bool, dict[str, int]]:
        """One request (with the client's own retries); the answer read up to MAX_REPLY_BYTES and parsed."""
        import anthropic

        body = bytearray()
        try:
            async with self.api.messages.with_streaming_response.create(
                model=self.access.model, max_tokens=SUMMARY_MAX_TOKENS, system=SYSTEM, messages=[{"role": "user", "content": content}]
            ) as response:
                try:
                    async for chunk in response.iter_bytes():
                        body += chunk
                        if len(body) > MAX_REPLY_BYTES:
                            raise failed(self.secret, f"the API's answer is larger than {MAX_REPLY_BYTES // 1024 // 1024} MB")
                except (anthropic.APIError, SummaryFailed):
                    raise
                except Exception as exc:  # the transport's own errors (the connection dropped mid-answer...)
                    raise failed(self.secret, f"the API's answer could not be read: {exc.__class__.__name__}: {exc}") from None
        except anthropic.BadRequestError as exc:
            raise PromptRefused(str(exc)) from None
        except anthropic.APIError as exc:
            raise ModelCallFailed(str(exc)) from None
        return parse_reply(bytes(body), self.secret)


def summary_timeout(settings: SummarizeSettings) -> float:
    """Seconds for a whole summary: --timeout, else SUMMARY_TIMEOUT."""
    return SUMMARY_TIMEOUT if settings.timeout is None else settings.timeout


def _client(access: ModelAccess, settings: SummarizeSettings, client: Any) -> Any:
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
    if not access.api_key:
        raise SummaryFailed("the llm engine needs ANTHROPIC_API_KEY")
    return anthropic.AsyncAnthropic(api_key=access.api_key, base_url=access.base_url, timeout=summary_timeout(settings), max_retries=settings.max_retries)


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


def _with_deadline(
    access: ModelAccess, settings: SummarizeSettings, client: Any, deadline: float | None, work: Callable[[AnthropicModel], Awaitable[T]], what: str
) -> tuple[T, float]:
    """(`work(model)`'s result, the deadline) when it completes by `deadline` (a time.monotonic()
    instant; None: the settings' timeout from now, counted once the client is ready), else SummaryFailed."""
    import anyio

    timeout = summary_timeout(settings)

    async def bounded() -> tuple[T, float]:
        api = _client(access, settings, client)  # imports the SDK: a slow start is not the server's time
        end = time.monotonic() + timeout if deadline is None else deadline
        try:
            with anyio.move_on_after(max(0.0, end - time.monotonic())):
                return await work(AnthropicModel(api, access)), end
        finally:
            if api is not client:
                await api.close()
        raise failed(access.api_key, f"{what} to {access.base_url or ANTHROPIC_API} timed out: a summary may take {timeout:g} s in all (--timeout)")

    return _in_a_loop(bounded)


def llm_summary(
    messages: Sequence[Message],
    settings: SummarizeSettings,
    access: ModelAccess,
    progress: Callable[[str], None] | None = None,
    client: Any = None,
    deadline: float | None = None,
) -> LlmResult:
    """Ask the model for the nine-section summary; raises SummaryFailed when it cannot be had.

    Everything (every request, the client's retries and waits) ends by `deadline` (a
    time.monotonic() instant; default: the settings' timeout from the first request), which the
    result carries for a repair request. `client` (tests, library users) supplies the connection
    settings: an anthropic.AsyncAnthropic, or a sync Anthropic whose settings are used on an async client.
    """
    result, end = _with_deadline(access, settings, client, deadline, lambda model: summary_of(model, messages, settings, progress), "the summary request")
    result.deadline = end
    return result


def repair_summary(
    summary: str, missing: Sequence[str], settings: SummarizeSettings, access: ModelAccess, client: Any = None, deadline: float | None = None
) -> str:
    """One request asking the model to rewrite the summary so it also carries the missing facts
    (within `deadline`, the summary's own: the repair is part of the summary's time)."""
    return _with_deadline(access, settings, client, deadline, lambda model: repaired(model, summary, missing), "the repair request")[0]
