"""`ctxpipe summarize`: replace the older part of the active context with a summary."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from ..options import Format, InputPath, LlmTimeout, OnError, Output, Unbuffered, engine_name, readable_file
from ..stages import Ledger, Now, ReportJson, parse_now, run_stage


def summarize(
    path: InputPath = None,
    input_format: Format = None,
    output: Output = None,
    engine: Annotated[str, typer.Option("--engine", "-e", help="auto | session-memory | llm | offline. auto: the session's notes if found, else the model if ANTHROPIC_API_KEY is set, else offline.", callback=engine_name)] = "auto",
    session_memory: Annotated[Optional[str], typer.Option("--session-memory", help="The notes file to use (default: <project>/<session>/session-memory/summary.md beside the transcript).", show_default=False, callback=readable_file)] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model for the llm engine (default: the transcript's).", show_default=False)] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="A Messages-API-compatible endpoint (default: Anthropic's; ANTHROPIC_BASE_URL is honoured).", show_default=False)] = None,
    instructions: Annotated[Optional[str], typer.Option("--instructions", help="Custom instructions appended to the summary request.", show_default=False)] = None,
    describe_images: Annotated[bool, typer.Option("--describe-images", help="Send images and ask for a one-line description of each, kept in the summary.")] = False,
    keep_min_tokens: Annotated[int, typer.Option("--keep-min-tokens", help="The kept tail holds at least this many tokens (4/3-padded estimate)...", min=0)] = 10_000,
    keep_min_text_messages: Annotated[int, typer.Option("--keep-min-text-messages", help="...and at least this many messages with text...", min=0)] = 5,
    keep_max_tokens: Annotated[int, typer.Option("--keep-max-tokens", help="...and at most this many tokens.", min=0)] = 40_000,
    keep_last: Annotated[Optional[int], typer.Option("--keep-last", help="Keep exactly the last N messages instead (widened only to keep pairs whole).", min=0, show_default=False)] = None,
    keep_fraction: Annotated[Optional[float], typer.Option("--keep-fraction", help="Keep the last F (0-1) of the context's tokens instead.", min=0.0, max=1.0, show_default=False)] = None,
    drop_history: Annotated[bool, typer.Option("--drop-history", help="Leave out the lines before the summary (Claude Code keeps them above the boundary).")] = False,
    verify: Annotated[bool, typer.Option("--verify/--no-verify", help="Check the new context still holds the key facts; add what is missing.")] = True,
    timeout: LlmTimeout = None,
    now: Now = None,
    report_json: ReportJson = None,
    ledger: Ledger = None,
    unbuffered: Unbuffered = False,
    on_error: OnError = "fail",  # type: ignore[assignment]
) -> None:
    """Summarize the older part of the active context and keep a recent tail verbatim.

    Claude Code files get the original lines above, a compact_boundary, the isCompactSummary user
    line (continuation preamble + summary) and the kept tail re-linked after it, so Claude Code
    resumes the compacted conversation; Messages-API files get a summary message and the tail.
    stderr says which engine ran and why. With --verify (default) every typed instruction, edited
    file, the last request, open todos and an unresolved error are checked in the result, and
    whatever is missing is added as "Facts to keep".

    Example:  ctxpipe summarize --engine offline session.jsonl > compacted.jsonl
    """
    from ...core.errors import CtxpipeError
    from ...core.summarize import SplitConfig
    from ...core.summarize_engines import SUMMARY_TIMEOUT, LlmConfig
    from ...summarizing import SummarizeOptions, summarize_entries
    from .. import io

    split = SplitConfig(keep_min_tokens, keep_min_text_messages, keep_max_tokens, keep_last, keep_fraction)
    api_key = os.environ.get("ANTHROPIC_API_KEY") or None  # never printed or logged

    def transform(entries: list, transcript_format: object, measure: object) -> object:
        chosen_model = model or _transcript_model(entries, transcript_format) or "claude-sonnet-4-5"
        llm = LlmConfig(chosen_model, api_key, base_url or os.environ.get("ANTHROPIC_BASE_URL") or None, instructions, describe_images,
                        timeout=SUMMARY_TIMEOUT if timeout is None else timeout)
        options = SummarizeOptions(engine, split, session_memory, path, llm, verify, drop_history, parse_now(now), measure=measure)  # type: ignore[arg-type]
        if engine == "llm" and not api_key:
            raise CtxpipeError("--engine llm needs ANTHROPIC_API_KEY in the environment")
        with io.progress("summarizing") as progress:
            return summarize_entries(entries, transcript_format, options, shared_breaker(), progress)

    run_stage("summarize", path, input_format, on_error, output, ledger, report_json, transform, unbuffered, whole=drop_history)


_BREAKER: object | None = None


def shared_breaker() -> object:
    """One per process: a batch stops asking the model after 3 failed summaries in a row."""
    global _BREAKER
    if _BREAKER is None:
        from ...core.summarize_engines import Breaker

        _BREAKER = Breaker()
    return _BREAKER


def _transcript_model(entries: list, transcript_format: object) -> str | None:
    for message in reversed(transcript_format.messages(entries)):  # type: ignore[attr-defined]
        if message.role == "assistant" and message.model and message.model.startswith("claude"):
            return str(message.model)
    return None
