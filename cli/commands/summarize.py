"""`ctxpipe summarize`: replace the older part of the active context with a summary."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from ..options import Format, InputPath, OnError, Output, Unbuffered
from ..stage_options import (
    BaseUrl,
    DescribeImages,
    DropHistory,
    Engine,
    Instructions,
    KeepFraction,
    KeepLast,
    KeepMaxTokens,
    KeepMinTextMessages,
    KeepMinTokens,
    LlmTimeout,
    SessionMemory,
    Verify,
)
from ..stages import Ledger, Now, ReportJson, parse_now, run_stage


def summarize(
    path: InputPath = None,
    input_format: Format = None,
    output: Output = None,
    engine: Engine = "auto",
    session_memory: SessionMemory = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model for the llm engine (default: the transcript's).", show_default=False)] = None,
    base_url: BaseUrl = None,
    instructions: Instructions = None,
    describe_images: DescribeImages = False,
    keep_min_tokens: KeepMinTokens = 10_000,
    keep_min_text_messages: KeepMinTextMessages = 5,
    keep_max_tokens: KeepMaxTokens = 40_000,
    keep_last: KeepLast = None,
    keep_fraction: KeepFraction = None,
    drop_history: DropHistory = False,
    verify: Verify = True,
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
    from ...core.summarize_engines import SUMMARY_TIMEOUT, LlmConfig, transcript_model
    from ...summarizing import SummarizeOptions, summarize_entries
    from .. import io

    split = SplitConfig(keep_min_tokens, keep_min_text_messages, keep_max_tokens, keep_last, keep_fraction)
    api_key = os.environ.get("ANTHROPIC_API_KEY") or None  # never printed or logged

    def transform(entries: list, transcript_format: object, measure: object) -> object:
        chosen_model = model or transcript_model(transcript_format.messages(entries))  # type: ignore[attr-defined]
        llm = LlmConfig(
            chosen_model,
            api_key,
            base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            instructions,
            describe_images,
            timeout=SUMMARY_TIMEOUT if timeout is None else timeout,
        )
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
