"""The options of the stages `compact` runs, declared once.

Each stage command (microcompact, collapse, summarize, restore) and `compact` use these same
aliases, so a flag has one name, help text and range wherever it appears; the defaults sit in the
signatures (typer reads them there) and tests/test_compact_options.py checks that they agree.
Help texts say what they act on, since `compact` lists the options of every stage together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from .options import SourceChoice, engine_name, readable_file

if TYPE_CHECKING:
    from ..core.cache import CachePolicy

# --- microcompact ----------------------------------------------------------------------------------

KeepRecent = Annotated[
    int, typer.Option("--keep-recent", help="Old tool results: keep those of the last N compactable calls (0 keeps 1, as Claude Code).", min=0)
]
Tools = Annotated[
    Optional[str],
    typer.Option(
        "--tools",
        help="Comma-separated tool names whose old results are cleared (default: Read,Bash,PowerShell,Grep,Glob,WebSearch,WebFetch,Edit,Write,MultiEdit,NotebookEdit). Task, Agent and mcp__ tools are never cleared.",
        show_default=False,
    ),
]
GapMinutes = Annotated[
    float,
    typer.Option(
        "--gap-minutes", help="Clear old tool results only when the last response is at least this many minutes old (the prompt cache has expired).", min=0.0
    ),
]
CacheAware = Annotated[
    bool,
    typer.Option(
        "--cache-aware",
        help="Clear old tool results only when the tokens freed pay for the prompt-cache break within --horizon turns (replaces the time trigger).",
    ),
]
ClearAtLeast = Annotated[int, typer.Option("--clear-at-least", help="With --cache-aware: the fewest tokens worth a cache break.", min=0)]
Horizon = Annotated[int, typer.Option("--horizon", help="With --cache-aware: the turns within which the break must pay for itself.", min=1)]
Prices = Annotated[
    Optional[str],
    typer.Option(
        "--prices",
        help="With --cache-aware: a JSON price table {model fragment: {input, cache_write_5m, cache_write_1h, cache_read, output}} in $/MTok.",
        show_default=False,
    ),
]

# --- microcompact and collapse ---------------------------------------------------------------------

NoMarker = Annotated[
    bool, typer.Option("--no-marker", help="Do not append the record saying what was cleared or folded (microcompact_boundary, ctxpipe_collapse).")
]

# --- summarize ------------------------------------------------------------------------------------

Engine = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        help="Summary engine: auto | session-memory | llm | offline. auto: the session's notes if found and written after the history they replace, else the model if ANTHROPIC_API_KEY is set, else offline.",
        callback=engine_name,
    ),
]
SessionMemory = Annotated[
    Optional[str],
    typer.Option(
        "--session-memory",
        help="The session notes for the session-memory engine (default: <project>/<session>/session-memory/summary.md beside the transcript). Notes last written before the history's last message do not cover it: auto then uses the next engine, --engine session-memory stops with an error.",
        show_default=False,
        callback=readable_file,
    ),
]
BaseUrl = Annotated[
    Optional[str],
    typer.Option(
        "--base-url", help="llm engine: a Messages-API-compatible endpoint (default: Anthropic's; ANTHROPIC_BASE_URL is honoured).", show_default=False
    ),
]
Instructions = Annotated[
    Optional[str], typer.Option("--instructions", help="llm engine: custom instructions appended to the summary request.", show_default=False)
]
DescribeImages = Annotated[
    bool, typer.Option("--describe-images", help="llm engine: send images and ask for a one-line description of each, kept in the summary.")
]
# None: core.summarize_engines.SUMMARY_TIMEOUT (the number is not imported here, to keep start-up light).
LlmTimeout = Annotated[
    Optional[float],
    typer.Option(
        "--timeout",
        help="llm engine: seconds for a whole summary, every request, retry and wait included (default 300); past it the offline engine runs.",
        min=0.0,
        show_default=False,
    ),
]
KeepMinTokens = Annotated[
    int, typer.Option("--keep-min-tokens", help="The tail kept after the summary holds at least this many tokens (4/3-padded estimate)...", min=0)
]
KeepMinTextMessages = Annotated[int, typer.Option("--keep-min-text-messages", help="...and at least this many messages with text...", min=0)]
KeepMaxTokens = Annotated[int, typer.Option("--keep-max-tokens", help="...and at most this many tokens.", min=0)]
KeepLast = Annotated[
    Optional[int],
    typer.Option(
        "--keep-last", help="Keep exactly the last N messages after the summary instead (widened only to keep pairs whole).", min=0, show_default=False
    ),
]
KeepFraction = Annotated[
    Optional[float],
    typer.Option("--keep-fraction", help="Keep the last F (0-1) of the context's tokens after the summary instead.", min=0.0, max=1.0, show_default=False),
]
DropHistory = Annotated[bool, typer.Option("--drop-history", help="Leave out the lines before the summary (Claude Code keeps them above the boundary).")]
Verify = Annotated[bool, typer.Option("--verify/--no-verify", help="Check the new context still holds the key facts; add what is missing.")]

# --- restore --------------------------------------------------------------------------------------

Root = Annotated[
    Optional[str],
    typer.Option(
        "--root",
        help="Restore reads files from disk only under this folder, links resolved (default: the current directory, and only for a transcript whose cwd is in it; else the transcript's own copies).",
        show_default=False,
    ),
]
Source = Annotated[
    SourceChoice, typer.Option("--source", help="Where a restored file's content comes from (auto: disk when the file is under the root, else the transcript).")
]
AllowOutsideRoot = Annotated[
    bool, typer.Option("--allow-outside-root", help="Restore reads files outside the root too (a transcript is untrusted input: off by default).")
]


# --- turning them into the stages' settings ---------------------------------------------------------


def compactable_tools(tools: str | None) -> frozenset[str]:
    """--tools as a set of names (default: Claude Code's compactable tools), warning about the ones never cleared."""
    from ..core.microcompact import COMPACTABLE_TOOLS, never_cleared
    from . import io

    chosen = frozenset(name.strip() for name in tools.split(",") if name.strip()) if tools else COMPACTABLE_TOOLS
    for name in sorted(chosen):
        if never_cleared(name):
            io.warn(f"--tools: {name} results are never cleared (a subagent or MCP result cannot be reproduced)")
    return chosen


def load_prices(path: str) -> Any:
    """The price table in `path` before ours; a file that cannot be read or is not one is bad input."""
    import orjson

    from ..core.cache import prices_from
    from ..core.errors import InputError
    from ..inputs import open_file, read_all

    with open_file(path) as handle:
        data = read_all(handle, path)
    try:
        return prices_from(orjson.loads(data))
    except (ValueError, TypeError) as exc:
        raise InputError(path, None, f"not a price table: {exc}") from None


def cache_policy(cache_aware: bool, clear_at_least: int, horizon: int, prices: str | None, model: str | None) -> CachePolicy | None:
    """--cache-aware and its settings as microcompact's policy (None: the time trigger)."""
    if not cache_aware:
        return None
    from ..core.cache import DEFAULT_PRICES, CachePolicy

    return CachePolicy(clear_at_least, horizon, load_prices(prices) if prices else DEFAULT_PRICES, model)
